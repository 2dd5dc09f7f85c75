/*
 * The binding plan (see binding.h), with hwloc.
 *
 * Happy path: load the topology (an XML export, a synthetic description,
 * or this system, where hwloc itself honours HWLOC_XMLFILE and
 * HWLOC_SYNTHETIC) with its PCI devices; list the GPUs (display and 3D
 * controllers, accelerators) in PCI bus order, each with the NUMA node
 * nearest its non-I/O ancestor; give local rank r the r-th visible GPU, or,
 * with fewer GPUs than workers, a NUMA node in blocks (ranks 0..k-1 the
 * first node with usable CPUs, and so on); then cut the mode's CPU set out
 * of that node, inside the starting mask.
 *
 * Failure modes: the topology cannot be loaded, the mask or the node list
 * does not parse (an error naming it); exclusive with fewer cores than
 * GPUs on a node (torchrun's error); a set with no CPU inside the starting
 * mask (the starting mask, with a note); memory nodes the kernel does not
 * allow us (no memory policy, with a note).
 *
 * On Windows there is no plan: binding is refused (the modes parse, so the
 * error names the one asked for) and workers run unbound.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>
#ifndef _WIN32
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <linux/mempolicy.h>
#include <sys/syscall.h>
#else
#define MPOL_PREFERRED 1
#define MPOL_PREFERRED_MANY 5
#endif

#include "crun/binding.h"
#include "crun/err.h"

#ifndef _WIN32
struct gpu {
	hwloc_obj_t pci;
	hwloc_obj_t node; /* nearest NUMA node */
	char busid[16];
};

struct plan_ctx {
	hwloc_topology_t t;
	hwloc_bitmap_t mask; /* usable CPUs */
	hwloc_bitmap_t mems; /* usable memory nodes */
	struct gpu *gpus;
	int ngpus;
	int *vis; /* visible ordinal -> index into gpus, NULL: NUMA layout */
	int nvis; /* visible GPUs; worker r has ordinal r */
	int nnodes;
	struct crun_binding_plan *plan;
};

#endif

int binding_mode_parse(const char *numa_binding, const char *cpu_bind)
{
	static const char *const names[] = {"node", "socket", "exclusive",
					    "core-complex"};

	if (numa_binding) {
		for (int i = 0; i < 4; i++)
			if (strcmp(numa_binding, names[i]) == 0)
				return CRUN_BIND_NODE + i;
		return -1;
	}
	if (cpu_bind == NULL || strcmp(cpu_bind, "none") == 0)
		return CRUN_BIND_NONE;
	return strcmp(cpu_bind, "auto") == 0 ? CRUN_BIND_AUTO : -1;
}

const char *binding_mode_name(enum crun_bind_mode mode)
{
	switch (mode) {
	case CRUN_BIND_NODE:
		return "node";
	case CRUN_BIND_SOCKET:
		return "socket";
	case CRUN_BIND_EXCLUSIVE:
		return "exclusive";
	case CRUN_BIND_CORE_COMPLEX:
		return "core-complex";
	case CRUN_BIND_AUTO:
		return "auto";
	default:
		return "none";
	}
}

#ifndef _WIN32
static void note(struct crun_binding_plan *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(struct crun_binding_plan *p, const char *fmt, ...)
{
	size_t len = strlen(p->notes);
	va_list ap;

	if (len + 2 >= sizeof(p->notes))
		return;
	va_start(ap, fmt);
	vsnprintf(p->notes + len, sizeof(p->notes) - len - 1, fmt, ap);
	va_end(ap);
	len = strlen(p->notes);
	p->notes[len] = '\n';
	p->notes[len + 1] = '\0';
}

/* A GPU, as the vendors' runtimes count them: not the BMC's VGA. */
static int is_gpu(hwloc_obj_t o)
{
	unsigned cls = o->attr->pcidev.class_id;
	unsigned vendor = o->attr->pcidev.vendor_id;

	if (cls == 0x0302 || cls == 0x0380 || cls == 0x1200)
		return 1;
	return cls == 0x0300 && (vendor == 0x10de || vendor == 0x1002);
}

static int gpu_cmp(const void *x, const void *y)
{
	const struct gpu *a = x, *b = y;
	const struct hwloc_pcidev_attr_s *pa = &a->pci->attr->pcidev;
	const struct hwloc_pcidev_attr_s *pb = &b->pci->attr->pcidev;
	unsigned long ka, kb;

	ka = ((unsigned long)pa->domain << 24) |
	     ((unsigned long)pa->bus << 16) | ((unsigned long)pa->dev << 8) |
	     pa->func;
	kb = ((unsigned long)pb->domain << 24) |
	     ((unsigned long)pb->bus << 16) | ((unsigned long)pb->dev << 8) |
	     pb->func;
	return ka < kb ? -1 : ka > kb;
}

/* The NUMA node nearest obj's locality: the lowest of its nodeset. */
static hwloc_obj_t nearest_node(hwloc_topology_t t, hwloc_obj_t obj)
{
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, obj);
	int first;

	if (anc == NULL || anc->nodeset == NULL ||
	    (first = hwloc_bitmap_first(anc->nodeset)) < 0)
		return hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, 0);
	return hwloc_get_numanode_obj_by_os_index(t, (unsigned)first);
}

static int list_gpus(struct plan_ctx *c)
{
	hwloc_obj_t o = NULL;
	int n = 0;

	while ((o = hwloc_get_next_pcidev(c->t, o)))
		if (is_gpu(o))
			n++;
	if (n == 0)
		return 0;
	c->gpus = calloc((size_t)n, sizeof(*c->gpus));
	if (c->gpus == NULL)
		return UV_ENOMEM;
	while ((o = hwloc_get_next_pcidev(c->t, o))) {
		struct gpu *g;

		if (!is_gpu(o))
			continue;
		g = &c->gpus[c->ngpus++];
		g->pci = o;
		g->node = nearest_node(c->t, o);
		snprintf(g->busid, sizeof(g->busid), "%04x:%02x:%02x.%01x",
			 o->attr->pcidev.domain, o->attr->pcidev.bus,
			 o->attr->pcidev.dev, o->attr->pcidev.func);
	}
	qsort(c->gpus, (size_t)c->ngpus, sizeof(*c->gpus), gpu_cmp);
	return 0;
}

/*
 * Worker r's GPU: the r-th entry of the visibility list when it is a list
 * of indexes, else r. Fewer GPUs than workers: no GPU for anyone.
 */
static int map_gpus(struct plan_ctx *c, const char *visible, int n)
{
	int idx[256], nidx = 0;

	if (c->ngpus == 0)
		return 0;
	if (visible) {
		const char *s = visible;

		while (*s && nidx < (int)(sizeof(idx) / sizeof(idx[0]))) {
			char *end;
			long v = strtol(s, &end, 10);

			if (end == s || v < 0 || v >= c->ngpus ||
			    (*end && *end != ',')) {
				note(c->plan,
				     "CUDA_VISIBLE_DEVICES='%s' is not a list "
				     "of GPU indexes below %d: GPUs taken in "
				     "PCI order",
				     visible, c->ngpus);
				nidx = -1;
				break;
			}
			idx[nidx++] = (int)v;
			s = *end ? end + 1 : end;
		}
		if (nidx == 0)
			return 0; /* "" : no GPU is visible */
	}
	if (nidx <= 0) {
		nidx = c->ngpus < 256 ? c->ngpus : 256;
		for (int i = 0; i < nidx; i++)
			idx[i] = i;
	}
	if (nidx < n) {
		note(c->plan,
		     "%d workers but %d GPUs: binding follows the NUMA layout",
		     n, nidx);
		return 0;
	}
	c->vis = calloc((size_t)nidx, sizeof(*c->vis));
	if (c->vis == NULL)
		return UV_ENOMEM;
	for (int r = 0; r < nidx; r++)
		c->vis[r] = idx[r];
	c->nvis = nidx;
	return 0;
}

/* The usable PUs of obj's cpuset, or NULL when it has none. */
static hwloc_bitmap_t usable(struct plan_ctx *c, hwloc_const_cpuset_t set)
{
	hwloc_bitmap_t b = hwloc_bitmap_alloc();

	if (b)
		hwloc_bitmap_and(b, set, c->mask);
	return b;
}

/*
 * Units of a node's usable CPUs, sorted by their first PU: physical cores
 * (type HWLOC_OBJ_CORE) or last-level caches (cache != 0); PUs when the
 * topology has no such level. Returns the count; *out holds the sets.
 */
static int units(struct plan_ctx *c, hwloc_const_cpuset_t within, int cache,
		 hwloc_bitmap_t **out)
{
	hwloc_bitmap_t *u = NULL;
	int n = 0, cap = 0, pu;

	*out = NULL;
	hwloc_bitmap_foreach_begin(pu, within)
	{
		hwloc_obj_t p =
		    hwloc_get_pu_obj_by_os_index(c->t, (unsigned)pu);
		hwloc_obj_t key = NULL, a;
		int found = -1;

		for (a = p ? p->parent : NULL; a; a = a->parent) {
			if (!cache && a->type == HWLOC_OBJ_CORE) {
				key = a;
				break;
			}
			if (cache && hwloc_obj_type_is_cache(a->type) &&
			    (a->attr->cache.type == HWLOC_OBJ_CACHE_UNIFIED ||
			     a->attr->cache.type == HWLOC_OBJ_CACHE_DATA) &&
			    (key == NULL ||
			     a->attr->cache.depth > key->attr->cache.depth))
				key = a;
		}
		/* Without the level, each PU is its own unit (core), or the
		 * whole set one unit (cache). */
		for (int i = 0; i < n && found < 0; i++) {
			hwloc_bitmap_t probe = u[i];

			if (key ? hwloc_bitmap_intersects(probe, key->cpuset)
				: cache)
				found = i;
		}
		if (found < 0) {
			if (n == cap) {
				hwloc_bitmap_t *nu;

				cap = cap ? cap * 2 : 16;
				nu = realloc(u, (size_t)cap * sizeof(*u));
				if (nu == NULL)
					goto oom;
				u = nu;
			}
			u[n] = hwloc_bitmap_alloc();
			if (u[n] == NULL)
				goto oom;
			found = n++;
		}
		hwloc_bitmap_set(u[found], (unsigned)pu);
	}
	hwloc_bitmap_foreach_end();
	*out = u;
	return n; /* foreach visits PUs in order: units come sorted */
oom:
	for (int i = 0; i < n; i++)
		hwloc_bitmap_free(u[i]);
	free(u);
	return UV_ENOMEM;
}

static void units_free(hwloc_bitmap_t *u, int n)
{
	for (int i = 0; i < n; i++)
		hwloc_bitmap_free(u[i]);
	free(u);
}

/* Slice k of count over n units (the lowest get one extra): [lo, hi). */
static void slice(int n, int count, int k, int *lo, int *hi)
{
	int per = n / count, extra = n % count;

	*lo = k * per + (k < extra ? k : extra);
	*hi = *lo + per + (k < extra ? 1 : 0);
}

/* Largest first, then by first PU (torchrun's order of core complexes). */
static int unit_cmp(const void *x, const void *y)
{
	hwloc_const_bitmap_t a = *(hwloc_const_bitmap_t const *)x;
	hwloc_const_bitmap_t b = *(hwloc_const_bitmap_t const *)y;
	int wa = hwloc_bitmap_weight(a), wb = hwloc_bitmap_weight(b);

	if (wa != wb)
		return wb - wa;
	return hwloc_bitmap_first(a) - hwloc_bitmap_first(b);
}

/*
 * Worker w's CPUs and memory nodes in the mode, given its node, its index
 * among the k members of its group on that node.
 */
static int cut(struct plan_ctx *c, enum crun_bind_mode mode, hwloc_obj_t node,
	       int rel, int k, hwloc_bitmap_t cpus, hwloc_bitmap_t mems,
	       char *e, size_t l)
{
	hwloc_bitmap_t in = NULL, *u = NULL;
	int nu = 0, lo, hi, rc = 0;

	hwloc_bitmap_zero(cpus);
	hwloc_bitmap_only(mems, node->os_index);
	in = usable(c, node->cpuset);
	if (in == NULL)
		return UV_ENOMEM;
	/* Nothing of the node is ours: the caller falls back to the mask. */
	if (hwloc_bitmap_iszero(in) && mode != CRUN_BIND_SOCKET)
		mode = CRUN_BIND_NONE;
	switch (mode) {
	case CRUN_BIND_NODE:
		hwloc_bitmap_copy(cpus, in);
		break;
	case CRUN_BIND_SOCKET: {
		hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(
		    c->t, HWLOC_OBJ_PACKAGE, node);

		if (pkg == NULL)
			pkg = hwloc_get_root_obj(c->t);
		hwloc_bitmap_and(cpus, pkg->cpuset, c->mask);
		hwloc_bitmap_copy(mems, pkg->nodeset);
		break;
	}
	case CRUN_BIND_EXCLUSIVE:
	case CRUN_BIND_AUTO:
		nu = units(c, in, 0, &u);
		if (nu < 0) {
			rc = nu;
			break;
		}
		if (nu < k && mode == CRUN_BIND_EXCLUSIVE) {
			snprintf(
			    e, l,
			    "--numa_binding=exclusive: numa node %u has %d "
			    "usable physical cores for %d GPUs",
			    node->os_index, nu, k);
			rc = CRUN_ECONFIG;
			break;
		}
		if (nu < k) {
			/* auto: fewer cores than workers, split the PUs. */
			int npu = hwloc_bitmap_weight(in);

			units_free(u, nu);
			u = NULL;
			nu = 0;
			if (npu == 0)
				break;
			if (npu < k) {
				hwloc_bitmap_only(
				    cpus, (unsigned)hwloc_bitmap_next(in, -1));
				for (int i = 0; i < rel % npu; i++)
					hwloc_bitmap_only(
					    cpus,
					    (unsigned)hwloc_bitmap_next(
						in, hwloc_bitmap_first(cpus)));
				break;
			}
			slice(npu, k, rel, &lo, &hi);
			for (int i = 0, pu = hwloc_bitmap_first(in); pu >= 0;
			     pu = hwloc_bitmap_next(in, pu), i++)
				if (i >= lo && i < hi)
					hwloc_bitmap_set(cpus, (unsigned)pu);
			break;
		}
		slice(nu, k, rel, &lo, &hi);
		for (int i = lo; i < hi; i++)
			hwloc_bitmap_or(cpus, cpus, u[i]);
		break;
	case CRUN_BIND_CORE_COMPLEX:
		nu = units(c, in, 1, &u);
		if (nu < 0) {
			rc = nu;
			break;
		}
		if (nu == 0)
			break;
		qsort(u, (size_t)nu, sizeof(*u), unit_cmp);
		hwloc_bitmap_copy(cpus, u[rel % nu]);
		break;
	default:
		break;
	}
	if (u)
		units_free(u, nu);
	hwloc_bitmap_free(in);
	return rc;
}

static int parse_list(hwloc_bitmap_t b, const char *what, const char *s,
		      char *e, size_t l)
{
	const char *p;

	/* hwloc's list parser is lenient: check the characters first. */
	for (p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || *p == ',' || *p == '-'))
			break;
	if (*s == '\0' || *p || hwloc_bitmap_list_sscanf(b, s) < 0 ||
	    hwloc_bitmap_iszero(b)) {
		snprintf(e, l, "%s: '%s' is not a list of indexes like 0-7,16",
			 what, s);
		return CRUN_ECONFIG;
	}
	return 0;
}

/* The CPUs and memory nodes we may use, from src or from the kernel. */
static int starting_masks(struct plan_ctx *c,
			  const struct crun_binding_src *src, char *e, size_t l)
{
	int rc;

	if (src->mask) {
		if ((rc = parse_list(c->mask, "the starting cpu mask",
				     src->mask, e, l)))
			return rc;
	} else {
		cpu_set_t set;

		if (sched_getaffinity(0, sizeof(set), &set)) {
			snprintf(e, l, "cannot read crun's cpu affinity: %s",
				 strerror(errno));
			return -errno;
		}
		hwloc_cpuset_from_glibc_sched_affinity(c->t, c->mask, &set,
						       sizeof(set));
	}
	if (src->mems)
		return parse_list(c->mems, "the memory node list", src->mems, e,
				  l);
	{
		unsigned long m[CRUN_BIND_NODE_WORDS];

		memset(m, 0, sizeof(m));
		if (syscall(SYS_get_mempolicy, NULL, m, CRUN_BIND_MAX_NODES,
			    NULL, MPOL_F_MEMS_ALLOWED)) {
			hwloc_bitmap_only(c->mems, 0);
			return 0;
		}
		for (unsigned i = 0; i < CRUN_BIND_MAX_NODES; i++)
			if (m[i / (8 * sizeof(long))] &
			    (1UL << (i % (8 * sizeof(long)))))
				hwloc_bitmap_set(c->mems, i);
	}
	return 0;
}

static int load(struct plan_ctx *c, const struct crun_binding_src *src, char *e,
		size_t l)
{
	int rc = 0;

	if (hwloc_topology_init(&c->t)) {
		c->t = NULL;
		snprintf(e, l, "cannot initialise hwloc: %s", strerror(errno));
		return -errno;
	}
	hwloc_topology_set_io_types_filter(c->t,
					   HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (src->xml)
		rc = hwloc_topology_set_xml(c->t, src->xml);
	else if (src->synthetic)
		rc = hwloc_topology_set_synthetic(c->t, src->synthetic);
	if (rc == 0)
		rc = hwloc_topology_load(c->t);
	if (rc) {
		const char *what = src->xml	    ? src->xml
				   : src->synthetic ? src->synthetic
				   : getenv("HWLOC_XMLFILE")
				       ? getenv("HWLOC_XMLFILE")
				       : "this system";

		snprintf(e, l, "cannot load the hwloc topology of '%s': %s",
			 what, errno ? strerror(errno) : "invalid");
		return CRUN_ECONFIG;
	}
	return 0;
}

static void to_binding(struct plan_ctx *c, struct crun_binding *b,
		       hwloc_bitmap_t cpus, hwloc_bitmap_t mems,
		       enum crun_bind_mode mode)
{
	int i;

	hwloc_cpuset_to_glibc_sched_affinity(c->t, cpus, &b->cpus,
					     sizeof(b->cpus));
	hwloc_bitmap_list_snprintf(b->cpus_list, sizeof(b->cpus_list), cpus);
	hwloc_bitmap_list_snprintf(b->nodes_list, sizeof(b->nodes_list), mems);
	b->mpol = 0;
	memset(b->nodes, 0, sizeof(b->nodes));
	if (mode == CRUN_BIND_AUTO || c->nnodes < 2)
		return; /* one node: nothing to prefer */
	if (!hwloc_bitmap_isincluded(mems, c->mems)) {
		char have[64];

		hwloc_bitmap_list_snprintf(have, sizeof(have), c->mems);
		note(c->plan,
		     "local rank %d: numa node(s) %s outside the memory nodes "
		     "allowed (%s): memory policy left alone",
		     b->local_rank, b->nodes_list, have);
		return;
	}
	hwloc_bitmap_foreach_begin(i, mems)
	{
		if (i < CRUN_BIND_MAX_NODES)
			b->nodes[i / (8 * sizeof(long))] |=
			    1UL << (i % (8 * sizeof(long)));
	}
	hwloc_bitmap_foreach_end();
	b->first_node = hwloc_bitmap_first(mems);
	b->mpol = hwloc_bitmap_weight(mems) > 1 ? MPOL_PREFERRED_MANY
						: MPOL_PREFERRED;
}

int binding_plan_new(enum crun_bind_mode mode, int n,
		     const struct crun_binding_src *src,
		     struct crun_binding_plan **out, char *e, size_t l)
{
	struct plan_ctx c;
	hwloc_obj_t *wnode = NULL, *usable_nodes = NULL;
	hwloc_bitmap_t cpus = NULL, mems = NULL, all;
	int rc, nusable = 0;

	*out = NULL;
	memset(&c, 0, sizeof(c));
	c.mask = hwloc_bitmap_alloc();
	c.mems = hwloc_bitmap_alloc();
	cpus = hwloc_bitmap_alloc();
	mems = hwloc_bitmap_alloc();
	c.plan = calloc(1, sizeof(*c.plan));
	if (c.plan)
		c.plan->w = calloc((size_t)(n > 0 ? n : 1), sizeof(*c.plan->w));
	wnode = calloc((size_t)(n > 0 ? n : 1), sizeof(*wnode));
	if (!c.mask || !c.mems || !cpus || !mems || !c.plan || !c.plan->w ||
	    !wnode) {
		snprintf(e, l, "out of memory computing the binding");
		rc = UV_ENOMEM;
		goto fail;
	}
	c.plan->mode = mode;
	c.plan->n = n;
	if ((rc = load(&c, src, e, l)) || (rc = starting_masks(&c, src, e, l)))
		goto fail;
	/* Only CPUs the topology knows; none of ours: all of them. */
	all = hwloc_bitmap_dup(hwloc_topology_get_topology_cpuset(c.t));
	if (all == NULL) {
		rc = UV_ENOMEM;
		goto fail;
	}
	hwloc_bitmap_and(c.mask, c.mask, all);
	if (hwloc_bitmap_iszero(c.mask)) {
		note(c.plan, "no cpu of the starting mask is in the topology: "
			     "binding within all of its cpus");
		hwloc_bitmap_copy(c.mask, all);
	}
	hwloc_bitmap_free(all);
	c.nnodes = hwloc_get_nbobjs_by_type(c.t, HWLOC_OBJ_NUMANODE);
	if (c.nnodes < 1) {
		snprintf(e, l, "the hwloc topology has no numa node");
		rc = CRUN_ECONFIG;
		goto fail;
	}
	if ((rc = list_gpus(&c)) || (rc = map_gpus(&c, src->visible, n)))
		goto fail;

	/* Each worker's node. */
	if (c.vis) {
		snprintf(c.plan->source, sizeof(c.plan->source),
			 "%d GPU%s by PCI locality", c.ngpus,
			 c.ngpus == 1 ? "" : "s");
		for (int r = 0; r < n; r++)
			wnode[r] = c.gpus[c.vis[r]].node;
	} else {
		usable_nodes = calloc((size_t)c.nnodes, sizeof(*usable_nodes));
		if (usable_nodes == NULL) {
			rc = UV_ENOMEM;
			goto fail;
		}
		for (int i = 0; i < c.nnodes; i++) {
			hwloc_obj_t nd = hwloc_get_obj_by_type(
			    c.t, HWLOC_OBJ_NUMANODE, (unsigned)i);

			if (hwloc_bitmap_intersects(nd->cpuset, c.mask))
				usable_nodes[nusable++] = nd;
		}
		if (nusable == 0)
			usable_nodes[nusable++] =
			    hwloc_get_obj_by_type(c.t, HWLOC_OBJ_NUMANODE, 0);
		snprintf(c.plan->source, sizeof(c.plan->source),
			 "NUMA layout (%d node%s, no GPU per worker)", c.nnodes,
			 c.nnodes == 1 ? "" : "s");
		for (int r = 0; r < n; r++)
			wnode[r] = usable_nodes[(long)r * nusable / n];
	}

	for (int r = 0; r < n; r++) {
		struct crun_binding *b = &c.plan->w[r];
		int rel = 0, k = 0;

		b->local_rank = r;
		b->gpu = -1;
		b->numa = (int)wnode[r]->os_index;
		if (c.vis) {
			b->gpu = c.vis[r];
			snprintf(b->gpu_busid, sizeof(b->gpu_busid), "%s",
				 c.gpus[b->gpu].busid);
		}
		/* The group sharing the node: every visible GPU on it, by
		 * ordinal (exclusive and core-complex, as torchrun), or the
		 * workers on it (auto, the NUMA layout). */
		if (c.vis && mode != CRUN_BIND_AUTO) {
			for (int q = 0; q < c.nvis; q++) {
				if (c.gpus[c.vis[q]].node != wnode[r])
					continue;
				if (q < r)
					rel++;
				k++;
			}
		} else {
			for (int q = 0; q < n; q++) {
				if (wnode[q] != wnode[r])
					continue;
				if (q < r)
					rel++;
				k++;
			}
		}
		if ((rc = cut(&c, mode, wnode[r], rel, k, cpus, mems, e, l)))
			goto fail;
		if (hwloc_bitmap_iszero(cpus)) {
			char lst[64];

			hwloc_bitmap_list_snprintf(lst, sizeof(lst), c.mask);
			note(c.plan,
			     "local rank %d: no cpu of numa node %u is in the "
			     "starting mask %s: bound to the starting mask",
			     r, wnode[r]->os_index, lst);
			hwloc_bitmap_copy(cpus, c.mask);
			b->fallback = 1;
		}
		to_binding(&c, b, cpus, mems, mode);
	}
	*out = c.plan;
	c.plan = NULL;
	rc = 0;
fail:
	if (c.plan) {
		free(c.plan->w);
		free(c.plan);
	}
	free(wnode);
	free(usable_nodes);
	free(c.vis);
	free(c.gpus);
	hwloc_bitmap_free(cpus);
	hwloc_bitmap_free(mems);
	hwloc_bitmap_free(c.mask);
	hwloc_bitmap_free(c.mems);
	if (c.t)
		hwloc_topology_destroy(c.t);
	return rc;
}

#endif

#ifdef _WIN32
int binding_plan_new(enum crun_bind_mode mode, int n,
		     const struct crun_binding_src *src,
		     struct crun_binding_plan **out, char *e, size_t l)
{
	snprintf(e, l,
		 "binding workers (%s) needs Linux (hwloc, "
		 "sched_setaffinity): on Windows workers run unbound",
		 binding_mode_name(mode));
	return CRUN_EUSAGE;
}
#endif

int binding_plan_system(enum crun_bind_mode mode, int n,
			struct crun_binding_plan **out, char *e, size_t l)
{
	struct crun_binding_src src;

	memset(&src, 0, sizeof(src));
	/* hwloc would fall back to this system on a bad file: load it
	 * ourselves, so that a typo is an error. */
	src.xml = getenv("HWLOC_XMLFILE");
	if (src.xml && *src.xml == '\0')
		src.xml = NULL;
	src.synthetic = getenv("HWLOC_SYNTHETIC");
	if (src.synthetic && *src.synthetic == '\0')
		src.synthetic = NULL;
	src.mask = getenv("CRUN_BINDING_MASK");
	if (src.mask && *src.mask == '\0')
		src.mask = NULL;
	src.visible = getenv("CUDA_VISIBLE_DEVICES");
	if (src.visible == NULL)
		src.visible = getenv("HIP_VISIBLE_DEVICES");
	if (src.visible == NULL)
		src.visible = getenv("ROCR_VISIBLE_DEVICES");
	return binding_plan_new(mode, n, &src, out, e, l);
}

void binding_plan_free(struct crun_binding_plan *plan)
{
	if (plan == NULL)
		return;
	free(plan->w);
	free(plan);
}

const char *binding_mpol_name(const struct crun_binding *b)
{
	return b->mpol == MPOL_PREFERRED_MANY ? "preferred-many"
	       : b->mpol == MPOL_PREFERRED    ? "preferred"
					      : "unchanged";
}

void binding_describe(const struct crun_binding_plan *plan, int local_rank,
		      char *buf, size_t len)
{
	const struct crun_binding *b = &plan->w[local_rank];
	const char *mem = binding_mpol_name(b);
	char gpu[48] = "";

	if (b->gpu >= 0)
		snprintf(gpu, sizeof(gpu), " gpu %d (%s)", b->gpu,
			 b->gpu_busid);
	snprintf(buf, len, "local rank %d: cpus %s numa %s memory %s%s%s",
		 local_rank, b->cpus_list, b->nodes_list, mem, gpu,
		 b->fallback ? " (starting mask)" : "");
}

/*
 * libhwloc, loaded the first time it is used (only the binding plan uses
 * it, and only with --bind / --numa-binding).
 *
 * Linked in, libhwloc and libudev cost every crun process their mapping and
 * relocation at exec, and every fork of the agent (a guard per worker) their
 * ten mappings, while most runs bind nothing. These definitions carry
 * hwloc's own names and forward to the library opened with dlopen, so
 * src/node/binding.c stays written against hwloc.h and crun does not link
 * libhwloc (the unit tests do, and call through here all the same).
 *
 * Happy path: the first call opens libhwloc.so.15 and resolves every
 * function below. Failure modes: the library or a symbol is missing: one
 * line says why, hwloc_topology_init fails with ENOSYS (so the plan fails
 * with "cannot initialise hwloc"), allocations return NULL and the other
 * calls do nothing.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include <hwloc.h>

#include "crun/log.h"

/* Each function: its pointer (typed from hwloc.h's declaration) and name. */
#define HWLOC_DL_FUNCS(X)                                                      \
	X(bitmap_alloc)                                                        \
	X(bitmap_and)                                                          \
	X(bitmap_copy)                                                         \
	X(bitmap_dup)                                                          \
	X(bitmap_first)                                                        \
	X(bitmap_free)                                                         \
	X(bitmap_intersects)                                                   \
	X(bitmap_isincluded)                                                   \
	X(bitmap_iszero)                                                       \
	X(bitmap_list_snprintf)                                                \
	X(bitmap_list_sscanf)                                                  \
	X(bitmap_next)                                                         \
	X(bitmap_only)                                                         \
	X(bitmap_or)                                                           \
	X(bitmap_set)                                                          \
	X(bitmap_weight)                                                       \
	X(bitmap_zero)                                                         \
	X(get_nbobjs_by_depth)                                                 \
	X(get_obj_by_depth)                                                    \
	X(get_type_depth)                                                      \
	X(obj_type_is_cache)                                                   \
	X(topology_destroy)                                                    \
	X(topology_get_topology_cpuset)                                        \
	X(topology_init)                                                       \
	X(topology_load)                                                       \
	X(topology_set_io_types_filter)                                        \
	X(topology_set_synthetic)                                              \
	X(topology_set_xml)

#define HWLOC_DL_SLOT(f) __typeof__(&hwloc_##f) f;

static struct {
	int tried;
	void *h;
	HWLOC_DL_FUNCS(HWLOC_DL_SLOT)
} dl;

/* Open libhwloc once; 0 when every function is there. */
static int hwloc_dl_load(void)
{
	const char *missing = NULL;

	if (dl.tried)
		return dl.h != NULL ? 0 : -1;
	dl.tried = 1;
	dl.h = dlopen("libhwloc.so.15", RTLD_NOW | RTLD_LOCAL);
	if (dl.h == NULL) {
		log_say("cannot load libhwloc: %s (binding needs it)",
			dlerror());
		return -1;
	}
#define HWLOC_DL_RESOLVE(f)                                                    \
	if (missing == NULL &&                                                 \
	    (*(void **)&dl.f = dlsym(dl.h, "hwloc_" #f)) == NULL)              \
		missing = "hwloc_" #f;
	HWLOC_DL_FUNCS(HWLOC_DL_RESOLVE)
#undef HWLOC_DL_RESOLVE
	if (missing) {
		log_say("libhwloc.so.15 lacks '%s' (binding needs it)",
			missing);
		dlclose(dl.h);
		dl.h = NULL;
		return -1;
	}
	return 0;
}

int hwloc_topology_init(hwloc_topology_t *t)
{
	if (hwloc_dl_load()) {
		errno = ENOSYS;
		return -1;
	}
	return dl.topology_init(t);
}

/* The rest: the library's answer, or fail (without the library nothing
 * was ever allocated or loaded for them to act on). */
#define HWLOC_DL_CALL(fail, f, ...)                                            \
	return hwloc_dl_load() ? fail : dl.f(__VA_ARGS__)
#define HWLOC_DL_DO(f, ...)                                                    \
	do {                                                                   \
		if (hwloc_dl_load() == 0)                                      \
			dl.f(__VA_ARGS__);                                     \
	} while (0)

hwloc_bitmap_t hwloc_bitmap_alloc(void)
{
	return hwloc_dl_load() ? NULL : dl.bitmap_alloc();
}

int hwloc_bitmap_and(hwloc_bitmap_t r, hwloc_const_bitmap_t a,
		     hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(-1, bitmap_and, r, a, b);
}

int hwloc_bitmap_copy(hwloc_bitmap_t d, hwloc_const_bitmap_t s)
{
	HWLOC_DL_CALL(-1, bitmap_copy, d, s);
}

hwloc_bitmap_t hwloc_bitmap_dup(hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(NULL, bitmap_dup, b);
}

int hwloc_bitmap_first(hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(-1, bitmap_first, b);
}

void hwloc_bitmap_free(hwloc_bitmap_t b)
{
	HWLOC_DL_DO(bitmap_free, b);
}

int hwloc_bitmap_intersects(hwloc_const_bitmap_t a, hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(0, bitmap_intersects, a, b);
}

int hwloc_bitmap_isincluded(hwloc_const_bitmap_t a, hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(0, bitmap_isincluded, a, b);
}

int hwloc_bitmap_iszero(hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(1, bitmap_iszero, b);
}

int hwloc_bitmap_list_snprintf(char *__hwloc_restrict buf, size_t len,
			       hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(-1, bitmap_list_snprintf, buf, len, b);
}

int hwloc_bitmap_list_sscanf(hwloc_bitmap_t b, const char *__hwloc_restrict s)
{
	HWLOC_DL_CALL(-1, bitmap_list_sscanf, b, s);
}

int hwloc_bitmap_next(hwloc_const_bitmap_t b, int prev)
{
	HWLOC_DL_CALL(-1, bitmap_next, b, prev);
}

int hwloc_bitmap_only(hwloc_bitmap_t b, unsigned id)
{
	HWLOC_DL_CALL(-1, bitmap_only, b, id);
}

int hwloc_bitmap_or(hwloc_bitmap_t r, hwloc_const_bitmap_t a,
		    hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(-1, bitmap_or, r, a, b);
}

int hwloc_bitmap_set(hwloc_bitmap_t b, unsigned id)
{
	HWLOC_DL_CALL(-1, bitmap_set, b, id);
}

int hwloc_bitmap_weight(hwloc_const_bitmap_t b)
{
	HWLOC_DL_CALL(-1, bitmap_weight, b);
}

void hwloc_bitmap_zero(hwloc_bitmap_t b)
{
	HWLOC_DL_DO(bitmap_zero, b);
}

unsigned hwloc_get_nbobjs_by_depth(hwloc_topology_t t, int depth)
{
	HWLOC_DL_CALL(0, get_nbobjs_by_depth, t, depth);
}

hwloc_obj_t hwloc_get_obj_by_depth(hwloc_topology_t t, int depth, unsigned idx)
{
	HWLOC_DL_CALL(NULL, get_obj_by_depth, t, depth, idx);
}

int hwloc_get_type_depth(hwloc_topology_t t, hwloc_obj_type_t type)
{
	HWLOC_DL_CALL(HWLOC_TYPE_DEPTH_UNKNOWN, get_type_depth, t, type);
}

int hwloc_obj_type_is_cache(hwloc_obj_type_t type)
{
	HWLOC_DL_CALL(0, obj_type_is_cache, type);
}

void hwloc_topology_destroy(hwloc_topology_t t)
{
	HWLOC_DL_DO(topology_destroy, t);
}

hwloc_const_cpuset_t hwloc_topology_get_topology_cpuset(hwloc_topology_t t)
{
	HWLOC_DL_CALL(NULL, topology_get_topology_cpuset, t);
}

int hwloc_topology_load(hwloc_topology_t t)
{
	HWLOC_DL_CALL(-1, topology_load, t);
}

int hwloc_topology_set_io_types_filter(hwloc_topology_t t,
				       enum hwloc_type_filter_e f)
{
	HWLOC_DL_CALL(-1, topology_set_io_types_filter, t, f);
}

int hwloc_topology_set_synthetic(hwloc_topology_t __hwloc_restrict t,
				 const char *__hwloc_restrict d)
{
	HWLOC_DL_CALL(-1, topology_set_synthetic, t, d);
}

int hwloc_topology_set_xml(hwloc_topology_t __hwloc_restrict t,
			   const char *__hwloc_restrict x)
{
	HWLOC_DL_CALL(-1, topology_set_xml, t, x);
}

/*
 * The allow list of a round's workers' store (see peers.h): the addresses
 * the round's nodes announced plus this machine's interface addresses
 * (read when a peer that is neither loopback nor announced first comes),
 * kept as 16-byte IPv6 forms (IPv4 as ::ffff:a.b.c.d) and compared by
 * value; loopback always passes. Only address literals are taken: host
 * names often resolve nowhere (containers, pods) and resolving them would
 * block the loop, so every node announces its own addresses instead
 * (peers_own_addrs).
 *
 * Failure modes: a field that is not an address is left out (errmsg names
 * it); out of memory.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#include "crun/netif.h"
#include "crun/peers.h"

struct crun_peers {
	size_t n, cap;
	unsigned char (*a)[16];
	int own_read; /* this machine's addresses are in a[] */
};

/* sa as a 16-byte IPv6 form: 0, or -1 for another family. */
static int peers_key(const struct sockaddr *sa, unsigned char out[16])
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &in->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return 0;
	}
	return -1;
}

static int peers_add(struct crun_peers *p, const struct sockaddr *sa)
{
	unsigned char k[16];

	if (sa == NULL || peers_key(sa, k) != 0)
		return 0;
	for (size_t i = 0; i < p->n; i++)
		if (memcmp(p->a[i], k, 16) == 0)
			return 0;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		void *na = realloc(p->a, cap * 16);

		if (na == NULL)
			return UV_ENOMEM;
		p->a = na;
		p->cap = cap;
	}
	memcpy(p->a[p->n++], k, 16);
	return 0;
}

int peers_new(const char *addrs, struct crun_peers **out, char *errmsg,
	      size_t errlen)
{
	struct crun_peers *p = calloc(1, sizeof(*p));
	char *copy = NULL, *tok, *save = NULL;
	size_t off = 0;
	int rc = 0;

	if (errlen)
		errmsg[0] = '\0';
	if (p == NULL)
		return UV_ENOMEM;
	copy = addrs ? strdup(addrs) : NULL;
	if (addrs && copy == NULL)
		rc = UV_ENOMEM;
	for (tok = copy ? strtok_r(copy, " \t,", &save) : NULL;
	     tok != NULL && rc == 0; tok = strtok_r(NULL, " \t,", &save)) {
		struct sockaddr_in6 in6;
		struct sockaddr_in in;

		memset(&in, 0, sizeof(in));
		memset(&in6, 0, sizeof(in6));
		in.sin_family = AF_INET;
		in6.sin6_family = AF_INET6;
		if (inet_pton(AF_INET, tok, &in.sin_addr) == 1)
			rc = peers_add(p, (struct sockaddr *)&in);
		else if (inet_pton(AF_INET6, tok, &in6.sin6_addr) == 1)
			rc = peers_add(p, (struct sockaddr *)&in6);
		else if (off < errlen)
			off += (size_t)snprintf(
			    errmsg + off, errlen - off, "%s'%s'",
			    off ? ", " : "not an address: ", tok);
	}
	free(copy);
	if (rc != 0) {
		peers_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* Whether a is loopback or link-local (of no use to another host). */
static int peers_local_only(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET) {
		uint32_t v =
		    ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr);

		return (v >> 24) == 127 || (v >> 16) == 0xa9fe || v == 0;
	}
	if (a->sa_family == AF_INET6) {
		const struct in6_addr *v =
		    &((const struct sockaddr_in6 *)a)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(v) || IN6_IS_ADDR_LINKLOCAL(v) ||
		       IN6_IS_ADDR_UNSPECIFIED(v);
	}
	return 1;
}

/* Addresses peers_own_addrs looks at, at most, of each family. */
#define OWN_MAX 64

/* What peers_own_addrs collects: the literals of each family, in order. */
struct own_list {
	char lit[2][OWN_MAX][INET6_ADDRSTRLEN];
	int n[2];
};

static void own_on_addr(void *data, const struct sockaddr *a)
{
	struct own_list *o = data;
	int f = a->sa_family == AF_INET ? 0 : 1;
	const void *bin =
	    f == 0 ? (const void *)&((const struct sockaddr_in *)a)->sin_addr
		   : (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr;

	if (o->n[f] >= OWN_MAX || peers_local_only(a) ||
	    inet_ntop(a->sa_family, bin, o->lit[f][o->n[f]],
		      sizeof(o->lit[f][0])) == NULL)
		return;
	for (int i = 0; i < o->n[f]; i++)
		if (strcmp(o->lit[f][i], o->lit[f][o->n[f]]) == 0)
			return; /* said once (netif_addrs may repeat one) */
	o->n[f]++;
}

size_t peers_own_addrs(char *out, size_t len)
{
	struct own_list *o = calloc(1, sizeof(*o));
	size_t off = 0, n = 0;

	if (len)
		out[0] = '\0';
	if (len == 0 || o == NULL || netif_addrs(own_on_addr, o) != 0)
		goto done;
	/* IPv4 first: what gloo and most clusters use. */
	for (int f = 0; f < 2; f++) {
		for (int i = 0; i < o->n[f]; i++) {
			size_t l = strlen(o->lit[f][i]);

			if (off + (off > 0) + l + 1 > len)
				goto done; /* as many as fit */
			off += (size_t)snprintf(out + off, len - off, "%s%s",
						off ? "," : "", o->lit[f][i]);
			n++;
		}
	}
done:
	free(o);
	return n;
}

void peers_free(struct crun_peers *p)
{
	if (p == NULL)
		return;
	free(p->a);
	free(p);
}

/*
 * Add this machine's interface addresses, once, when a peer first needs
 * them: a job whose workers all come over loopback never asks the kernel
 * for its interfaces (a netlink dump at every start).
 */
static void own_add(void *data, const struct sockaddr *sa)
{
	peers_add(data, sa);
}

static void peers_read_own(struct crun_peers *p)
{
	p->own_read = 1;
	netif_addrs(own_add, p);
}

int peers_allow(void *data, const struct sockaddr *sa)
{
	struct crun_peers *p = data;
	static const unsigned char v6loop[16] = {[15] = 1};
	unsigned char k[16];

	if (peers_key(sa, k) != 0)
		return 0;
	if (memcmp(k, v6loop, 16) == 0)
		return 1;
	if (k[10] == 0xff && k[11] == 0xff && k[12] == 127 &&
	    memcmp(k, "\0\0\0\0\0\0\0\0\0\0", 10) == 0)
		return 1; /* 127.0.0.0/8 */
	for (size_t i = 0; i < p->n; i++)
		if (memcmp(p->a[i], k, 16) == 0)
			return 1;
	if (p->own_read)
		return 0;
	peers_read_own(p);
	return peers_allow(p, sa);
}

size_t peers_count(const struct crun_peers *p)
{
	return p->n;
}

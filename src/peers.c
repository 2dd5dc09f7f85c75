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
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

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

size_t peers_own_addrs(char *out, size_t len)
{
	struct ifaddrs *ifs = NULL;
	size_t off = 0, n = 0;

	if (len)
		out[0] = '\0';
	if (len == 0 || getifaddrs(&ifs) != 0)
		return 0;
	/* IPv4 first: what gloo and most clusters use. */
	for (int fam = 0; fam < 2; fam++) {
		for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
			char lit[INET6_ADDRSTRLEN];
			const struct sockaddr *a = i->ifa_addr;
			const void *bin;
			size_t l;

			if (a == NULL ||
			    a->sa_family != (fam == 0 ? AF_INET : AF_INET6) ||
			    peers_local_only(a))
				continue;
			bin =
			    fam == 0
				? (const void *)&((const struct sockaddr_in *)a)
				      ->sin_addr
				: (const void *)&(
				      (const struct sockaddr_in6 *)a)
				      ->sin6_addr;
			if (inet_ntop(a->sa_family, bin, lit, sizeof(lit)) ==
			    NULL)
				continue;
			l = strlen(lit);
			if (off + (off > 0) + l + 1 > len)
				goto done; /* as many as fit */
			off += (size_t)snprintf(out + off, len - off, "%s%s",
						off ? "," : "", lit);
			n++;
		}
	}
done:
	freeifaddrs(ifs);
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
static void peers_read_own(struct crun_peers *p)
{
	struct ifaddrs *ifs = NULL;

	p->own_read = 1;
	if (getifaddrs(&ifs) != 0)
		return;
	for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next)
		if (peers_add(p, i->ifa_addr) != 0)
			break;
	freeifaddrs(ifs);
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

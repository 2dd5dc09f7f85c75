/*
 * The allow list of a round's workers' store (see peers.h): the resolved
 * addresses of the round's nodes plus this machine's interface addresses,
 * kept as 16-byte IPv6 forms (IPv4 as ::ffff:a.b.c.d) and compared by
 * value; loopback always passes. Resolution is blocking getaddrinfo, once
 * per round, before the store's address is published.
 *
 * Failure modes: a name that does not resolve is left out (errmsg names
 * it); out of memory.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#include "crun/peers.h"

struct crun_peers {
	size_t n, cap;
	unsigned char (*a)[16];
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
	struct ifaddrs *ifs = NULL;
	char *copy = NULL, *tok, *save = NULL;
	size_t off = 0;
	int rc = 0;

	if (errlen)
		errmsg[0] = '\0';
	if (p == NULL)
		return UV_ENOMEM;
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i != NULL && rc == 0;
		     i = i->ifa_next)
			rc = peers_add(p, i->ifa_addr);
		freeifaddrs(ifs);
	}
	copy = addrs ? strdup(addrs) : NULL;
	if (addrs && copy == NULL)
		rc = UV_ENOMEM;
	for (tok = copy ? strtok_r(copy, " \t", &save) : NULL;
	     tok != NULL && rc == 0; tok = strtok_r(NULL, " \t", &save)) {
		struct addrinfo hints, *ai = NULL;

		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		if (getaddrinfo(tok, NULL, &hints, &ai) != 0) {
			if (off < errlen)
				off += (size_t)snprintf(
				    errmsg + off, errlen - off, "%s'%s'",
				    off ? ", " : "cannot resolve ", tok);
			continue;
		}
		for (struct addrinfo *x = ai; x != NULL && rc == 0;
		     x = x->ai_next)
			rc = peers_add(p, x->ai_addr);
		freeaddrinfo(ai);
	}
	free(copy);
	if (rc != 0) {
		peers_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void peers_free(struct crun_peers *p)
{
	if (p == NULL)
		return;
	free(p->a);
	free(p);
}

int peers_allow(void *data, const struct sockaddr *sa)
{
	const struct crun_peers *p = data;
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
	return 0;
}

size_t peers_count(const struct crun_peers *p)
{
	return p->n;
}

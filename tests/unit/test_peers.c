/*
 * The workers' store allow list (src/node/peers.c): loopback always passes,
 * the round's address literals and this machine's own pass, anything else
 * is refused; a name is reported, never resolved.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "crun/peers.h"

static int allow4(struct crun_peers *p, const char *ip)
{
	struct sockaddr_in in;

	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	cr_assert_eq(inet_pton(AF_INET, ip, &in.sin_addr), 1);
	return peers_allow(p, (struct sockaddr *)&in);
}

static int allow6(struct crun_peers *p, const char *ip)
{
	struct sockaddr_in6 in;

	memset(&in, 0, sizeof(in));
	in.sin6_family = AF_INET6;
	cr_assert_eq(inet_pton(AF_INET6, ip, &in.sin6_addr), 1);
	return peers_allow(p, (struct sockaddr *)&in);
}

Test(peers, round_members_only, .timeout = 10)
{
	struct crun_peers *p;
	char err[256];

	cr_assert_eq(peers_new("192.0.2.7 198.51.100.3 2001:db8::5", &p, err,
			       sizeof(err)),
		     0);
	cr_assert_str_empty(err);
	cr_assert(allow4(p, "192.0.2.7"));
	cr_assert(allow4(p, "198.51.100.3"));
	cr_assert(allow6(p, "2001:db8::5"));
	/* IPv4 seen through a dual-stack listener. */
	cr_assert(allow6(p, "::ffff:192.0.2.7"));
	/* Loopback, in both families. */
	cr_assert(allow4(p, "127.0.0.1"));
	cr_assert(allow4(p, "127.3.2.1"));
	cr_assert(allow6(p, "::1"));
	cr_assert(allow6(p, "::ffff:127.0.0.1"));
	/* Strangers. */
	cr_assert_not(allow4(p, "192.0.2.8"));
	cr_assert_not(allow4(p, "203.0.113.1"));
	cr_assert_not(allow6(p, "2001:db8::6"));
	peers_free(p);
}

Test(peers, names_and_failures, .timeout = 10)
{
	struct crun_peers *p;
	char err[256], own[256];

	cr_assert_eq(peers_new("localhost no-such-host.invalid", &p, err,
			       sizeof(err)),
		     0);
	cr_assert(strstr(err, "no-such-host.invalid") != NULL, "%s", err);
	cr_assert(strstr(err, "'localhost'") != NULL, "%s", err);
	peers_free(p);
	/* A node's field lists its addresses, comma-separated. */
	cr_assert_eq(peers_new("pod-a,10.9.0.1,2001:db8::9 10.9.0.2", &p, err,
			       sizeof(err)),
		     0);
	cr_assert(allow4(p, "10.9.0.1"));
	cr_assert(allow4(p, "10.9.0.2"));
	cr_assert(allow6(p, "2001:db8::9"));
	cr_assert(strstr(err, "'pod-a'") != NULL, "%s", err);
	peers_free(p);
	/* Our own addresses: no loopback, each a literal, bounded. */
	peers_own_addrs(own, sizeof(own));
	cr_assert(strstr(own, "127.0.0.1") == NULL, "%s", own);
	cr_assert_leq(peers_own_addrs(own, 8), 1, "%s", own);
	cr_assert(strlen(own) < 8);
	/* No round (one node): loopback and our own addresses only. */
	cr_assert_eq(peers_new(NULL, &p, err, sizeof(err)), 0);
	cr_assert(allow4(p, "127.0.0.1"));
	cr_assert_not(allow4(p, "203.0.113.1"));
	peers_free(p);
}

/* This machine's own addresses pass too, though read only when needed. */
Test(peers, own_addresses_on_demand, .timeout = 10)
{
	struct crun_peers *p;
	char err[256], own[1024], *tok, *save = NULL;
	size_t n = peers_own_addrs(own, sizeof(own));

	cr_assert_gt(n, 0, "this test needs an address other than loopback");
	cr_assert_eq(peers_new("192.0.2.200", &p, err, sizeof(err)), 0);
	cr_assert_eq(peers_count(p), 1, "interfaces read before any peer");
	cr_assert(allow4(p, "127.0.0.1"));
	cr_assert(allow4(p, "192.0.2.200"));
	cr_assert_eq(peers_count(p), 1, "interfaces read for a listed peer");
	for (tok = strtok_r(own, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		cr_assert(strchr(tok, ':') ? allow6(p, tok) : allow4(p, tok),
			  "own address %s refused", tok);
	cr_assert_gt(peers_count(p), 1);
	cr_assert_not(allow4(p, "203.0.113.9"));
	peers_free(p);
}

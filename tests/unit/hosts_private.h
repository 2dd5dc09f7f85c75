/*
 * A private /etc/hosts for one test (test_store_aclient.c,
 * test_store_relay.c): Criterion runs each test in a process of its own,
 * whose thread enters a mount namespace of its own and bind-mounts a file
 * of the test's lines over /etc/hosts. A name then resolves as the test
 * says, whatever the machine's file holds; the machine's file is never
 * touched. Needs root (CAP_SYS_ADMIN): else the test is skipped.
 */
#ifndef CRUN_TEST_HOSTS_PRIVATE_H
#define CRUN_TEST_HOSTS_PRIVATE_H

#include <errno.h>
#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * From now on, this thread resolves names from lines (an /etc/hosts file):
 * 0, or -1 with why not in why.
 */
static int hosts_private(const char *lines, char *why, size_t len)
{
	char path[] = "/tmp/crun-hosts-XXXXXX";
	size_t n = strlen(lines);
	int fd = mkstemp(path), rc = -1;

	if (fd < 0) {
		snprintf(why, len, "mkstemp: %s", strerror(errno));
		return -1;
	}
	if (write(fd, lines, n) != (ssize_t)n)
		snprintf(why, len, "writing %s: %s", path, strerror(errno));
	else if (unshare(CLONE_NEWNS) != 0)
		snprintf(why, len, "unshare(CLONE_NEWNS): %s (needs root)",
			 strerror(errno));
	/* Nothing mounted here propagates back to the machine. */
	else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		snprintf(why, len, "making / private: %s", strerror(errno));
	else if (mount(path, "/etc/hosts", NULL, MS_BIND, NULL) != 0)
		snprintf(why, len, "bind-mounting %s on /etc/hosts: %s", path,
			 strerror(errno));
	else
		rc = 0;
	close(fd);
	unlink(path); /* the mount keeps the file */
	return rc;
}

/*
 * Give name the addresses ::1 and 127.0.0.1 in a private /etc/hosts, as a
 * stock Debian one gives localhost, and check that the resolver lists ::1
 * first, as it does there: 0, or -1 with why not.
 */
static int hosts_v6_first(const char *name, char *why, size_t len)
{
	struct addrinfo hints, *res = NULL, *ai;
	char lines[256], all[256] = "";
	size_t off = 0;
	int rc;

	snprintf(lines, sizeof(lines), "::1 %s\n127.0.0.1 %s\n", name, name);
	if (hosts_private(lines, why, len) != 0)
		return -1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(name, NULL, &hints, &res)) != 0) {
		snprintf(why, len, "%s does not resolve: %s", name,
			 gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai != NULL && off < sizeof(all) - 64; ai = ai->ai_next) {
		char a[64] = "?";

		getnameinfo(ai->ai_addr, ai->ai_addrlen, a, sizeof(a), NULL, 0,
			    NI_NUMERICHOST);
		off += (size_t)snprintf(all + off, sizeof(all) - off, " %s", a);
	}
	freeaddrinfo(res);
	if (strcmp(all, " ::1 127.0.0.1") != 0) {
		snprintf(why, len,
			 "%.40s resolves to%.120s, not ::1 then 127.0.0.1 (no "
			 "IPv6 on loopback?)",
			 name, all);
		return -1;
	}
	return 0;
}

#endif

/*
 * The host's TCP sockets (tcptab.h): rows of /proc/net/tcp and tcp6, parsed
 * without trusting their widths, and the sockets to one port from sock_diag,
 * where the kernel filters them, so that a host with many unrelated sockets
 * costs the reader nothing.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#ifndef _WIN32
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#endif

#include "crun/tcptab.h"
#ifndef _WIN32
#include "nldump.h"
#endif

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* n hex digits at s into *v; returns the digits read (n) or -1. */
static int hexn(const char *s, int n, uint64_t *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		int h = hexval((unsigned char)s[i]);

		if (h < 0)
			return -1;
		*v = *v << 4 | (uint64_t)h;
	}
	return n;
}

/*
 * "ADDR:PORT" as the kernel prints it: ADDR is 8 (IPv4) or 32 (IPv6) hex
 * digits, each 32-bit word printed as the host-order integer of its
 * network-order bytes, so reading it back and copying the integer gives
 * the bytes again on any byte order.
 */
static const char *parse_endpoint(const char *s, unsigned char out[16],
				  int *port)
{
	size_t n = 0;
	uint64_t v;

	while (isxdigit((unsigned char)s[n]))
		n++;
	if ((n != 8 && n != 32) || s[n] != ':')
		return NULL;
	memset(out, 0, 16);
	if (n == 8) {
		uint32_t w;

		hexn(s, 8, &v);
		w = (uint32_t)v;
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &w, 4);
	} else {
		for (int k = 0; k < 4; k++) {
			uint32_t w;

			hexn(s + 8 * k, 8, &v);
			w = (uint32_t)v;
			memcpy(out + 4 * k, &w, 4);
		}
	}
	s += n + 1;
	n = 0;
	while (isxdigit((unsigned char)s[n]))
		n++;
	if (n != 4 || hexn(s, 4, &v) < 0)
		return NULL;
	*port = (int)v;
	return s + 4;
}

int tcptab_parse_row(const char *line, struct tcptab_row *t)
{
	const char *s = line;
	char *end;
	uint64_t v;

	memset(t, 0, sizeof(*t));
	while (*s == ' ')
		s++;
	/* "sl:" */
	if (!isdigit((unsigned char)*s))
		return -1;
	strtoul(s, &end, 10);
	if (*end != ':')
		return -1;
	s = end + 1;
	while (*s == ' ')
		s++;
	if ((s = parse_endpoint(s, t->local, &t->local_port)) == NULL ||
	    *s != ' ')
		return -1;
	s++;
	if ((s = parse_endpoint(s, t->remote, &t->remote_port)) == NULL ||
	    *s != ' ')
		return -1;
	s++;
	if (hexn(s, 2, &v) < 0 || s[2] != ' ')
		return -1;
	t->state = (int)v;
	/* tx:rx tr:when retrnsmt uid timeout inode */
	s += 3;
	for (int f = 0; f < 5; f++) {
		while (*s == ' ')
			s++;
		if (*s == '\0')
			return -1;
		while (*s && *s != ' ')
			s++;
	}
	while (*s == ' ')
		s++;
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	t->inode = strtoull(s, &end, 10);
	if (errno || (*end != ' ' && *end != '\n' && *end != '\0'))
		return -1;
	return 0;
}

#ifdef _WIN32
/* Windows has no sock_diag: as where netlink is refused. */
int tcptab_dump_port(int family, int port, int which, size_t max_bytes,
		     tcptab_cb cb, void *data)
{
	return -1;
}
#else
/* A socket's address from sock_diag into a row's 16 bytes. */
static void diag_addr(unsigned char out[16], int family, const __be32 *a)
{
	if (family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, a, 4);
	} else {
		memcpy(out, a, 16);
	}
}

struct dump_ctx {
	tcptab_cb cb;
	void *data;
};

static void on_diag_msg(void *data, const struct nlmsghdr *h)
{
	const struct dump_ctx *c = data;
	const struct inet_diag_msg *m = NLMSG_DATA(h);
	struct tcptab_row t;

	memset(&t, 0, sizeof(t));
	t.state = m->idiag_state;
	t.local_port = ntohs(m->id.idiag_sport);
	t.remote_port = ntohs(m->id.idiag_dport);
	t.inode = m->idiag_inode;
	diag_addr(t.local, m->idiag_family, m->id.idiag_src);
	diag_addr(t.remote, m->idiag_family, m->id.idiag_dst);
	c->cb(c->data, &t);
}

int tcptab_dump_port(int family, int port, int which, size_t max_bytes,
		     tcptab_cb cb, void *data)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
		struct nlattr bc_attr;
		struct inet_diag_bc_op bc[4];
	} msg;
	struct dump_ctx c = {cb, data};
	int listening = which == TCPTAB_LISTENING;

	memset(&msg, 0, sizeof(msg));
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	msg.req.sdiag_family = (unsigned char)family;
	msg.req.sdiag_protocol = IPPROTO_TCP;
	/* LISTEN alone: the kernel walks its listening sockets only. */
	msg.req.idiag_states = listening
				   ? 1U << 10		    /* LISTEN */
				   : (1U << 1) | (1U << 2); /* ESTABLISHED,
							       SYN_SENT */
	msg.bc_attr.nla_len = (unsigned short)(NLA_HDRLEN + sizeof(msg.bc));
	msg.bc_attr.nla_type = INET_DIAG_REQ_BYTECODE;
	/* Accept when running off the end (8 + 8 bytes), reject at end + 4. */
	msg.bc[0].code = listening ? INET_DIAG_BC_S_GE : INET_DIAG_BC_D_GE;
	msg.bc[0].yes = 8;
	msg.bc[0].no = 20;
	msg.bc[1].no = (unsigned short)port;
	msg.bc[2].code = listening ? INET_DIAG_BC_S_LE : INET_DIAG_BC_D_LE;
	msg.bc[2].yes = 8;
	msg.bc[2].no = 12;
	msg.bc[3].no = (unsigned short)port;
	/* Cut at the bound: the next tick looks again. */
	return nldump(NETLINK_SOCK_DIAG, &msg, sizeof(msg), SOCK_DIAG_BY_FAMILY,
		      NLMSG_LENGTH(sizeof(struct inet_diag_msg)), max_bytes,
		      on_diag_msg, &c) < 0
		   ? -1
		   : 0;
}
#endif

int tcptab_read(const char *path, int max_rows, tcptab_cb cb, void *data)
{
	char line[512];
	FILE *fp = fopen(path, "re");
	struct tcptab_row t;
	int rows = 0;

	if (fp == NULL)
		return -errno;
	while (rows++ < max_rows && fgets(line, sizeof(line), fp))
		if (tcptab_parse_row(line, &t) == 0)
			cb(data, &t);
	fclose(fp);
	return 0;
}

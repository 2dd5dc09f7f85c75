/*
 * The host's TCP sockets (src/node/tcptab.c): rows of /proc/net/tcp and tcp6 from
 * fixture text, bad rows refused, a table file read within its row bound,
 * and one real socket found by sock_diag or the table.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crun/tcptab.h"

/* ---- /proc/net/tcp rows -------------------------------------------------- */

static const char *tcp4[] = {
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when "
    "retrnsmt   uid  timeout inode\n",
    "   0: 00000000:5BA0 00000000:0000 0A 00000000:00000000 00:00000000 "
    "00000000     0        0 123456 1 0000000000000000 100 0 0 10 0\n",
    "   1: 0100007F:A1B2 0100007F:5BA0 01 00000000:00000000 00:00000000 "
    "00000000  1000        0 234567 1 0000000000000000 20 4 30 10 -1\n",
    "  12: 0201A8C0:C350 0101A8C0:5BA1 02 00000001:00000000 01:00000064 "
    "00000002     0        0 345678 2 0000000000000000 1000 0 0 1 -1\n",
};

static const char *tcp6[] = {
    "   0: 0000000000000000FFFF00000100007F:9C40 "
    "0000000000000000FFFF00000100007F:5BA0 01 00000000:00000000 "
    "00:00000000 00000000     0        0 456789 1 0000000000000000 20 4 "
    "0 10 -1\n",
    "   1: 00000000000000000000000001000000:1F90 "
    "00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 567890 1 0000000000000000 100 0 "
    "0 10 0\n",
};

static void v4(unsigned char out[16], const char *s)
{
	memset(out, 0, 16);
	out[10] = out[11] = 0xff;
	cr_assert_eq(inet_pton(AF_INET, s, out + 12), 1);
}

Test(tcptab, tcp_rows, .timeout = 20)
{
	struct tcptab_row t;
	unsigned char want[16];

	cr_assert_eq(tcptab_parse_row(tcp4[0], &t), -1, "the header");
	cr_assert_eq(tcptab_parse_row(tcp4[1], &t), 0);
	cr_assert_eq(t.state, 0x0a);
	cr_assert_eq(t.local_port, 23456);
	cr_assert_eq(t.inode, 123456);

	cr_assert_eq(tcptab_parse_row(tcp4[2], &t), 0);
	v4(want, "127.0.0.1");
	cr_assert_eq(memcmp(t.remote, want, 16), 0);
	cr_assert_eq(t.remote_port, 23456);
	cr_assert_eq(t.local_port, 0xa1b2);
	cr_assert_eq(t.state, 1);
	cr_assert_eq(t.inode, 234567);

	cr_assert_eq(tcptab_parse_row(tcp4[3], &t), 0);
	v4(want, "192.168.1.1");
	cr_assert_eq(memcmp(t.remote, want, 16), 0);
	v4(want, "192.168.1.2");
	cr_assert_eq(memcmp(t.local, want, 16), 0);
	cr_assert_eq(t.remote_port, 23457);
	cr_assert_eq(t.state, 2, "SYN_SENT");
	cr_assert_eq(t.inode, 345678);
}

Test(tcptab, tcp6_rows, .timeout = 20)
{
	struct tcptab_row t, t4;
	unsigned char want[16];

	cr_assert_eq(tcptab_parse_row(tcp6[0], &t), 0);
	cr_assert_eq(tcptab_parse_row(tcp4[2], &t4), 0);
	/* A v4-mapped peer in tcp6 matches the same peer in tcp. */
	cr_assert_eq(memcmp(t.remote, t4.remote, 16), 0);
	cr_assert_eq(t.remote_port, 23456);
	cr_assert_eq(t.local_port, 40000);
	cr_assert_eq(t.inode, 456789);

	cr_assert_eq(tcptab_parse_row(tcp6[1], &t), 0);
	cr_assert_eq(inet_pton(AF_INET6, "::1", want), 1);
	cr_assert_eq(memcmp(t.local, want, 16), 0);
	cr_assert_eq(t.local_port, 8080);
	cr_assert_eq(t.state, 0x0a);
}

Test(tcptab, tcp_rows_bad, .timeout = 20)
{
	static const char *bad[] = {
	    "",
	    "\n",
	    "   1: 0100007F:A1B2\n",
	    "   1: 0100007F:A1B2 0100007F:5BA0 01\n",
	    "   1: 0100007G:A1B2 0100007F:5BA0 01 00000000:00000000 "
	    "00:00000000 00000000 0 0 1 1\n",
	    "   1: 0100007F:A1B 0100007F:5BA0 01 00000000:00000000 "
	    "00:00000000 00000000 0 0 1 1\n",
	    "   1: 0100007F0:A1B2 0100007F:5BA0 01 00000000:00000000 "
	    "00:00000000 00000000 0 0 1 1\n",
	    "   1: 0100007F:A1B2 0100007F:5BA0 01 00000000:00000000 "
	    "00:00000000 00000000 0 0 x1 1\n",
	    "   x: 0100007F:A1B2 0100007F:5BA0 01 00000000:00000000 "
	    "00:00000000 00000000 0 0 1 1\n",
	};
	struct tcptab_row t;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(tcptab_parse_row(bad[i], &t), -1, "row %zu", i);
}

/* ---- reading a table ------------------------------------------------------ */

struct seen {
	int n;
	uint64_t inode[8];
};

static void on_row(void *data, const struct tcptab_row *t)
{
	struct seen *s = data;

	if (s->n < 8)
		s->inode[s->n] = t->inode;
	s->n++;
}

Test(tcptab, read_bounded, .timeout = 20)
{
	char path[] = "/tmp/crun-tcptab-XXXXXX";
	int fd = mkstemp(path);
	struct seen s;
	FILE *fp;

	cr_assert_geq(fd, 0);
	fp = fdopen(fd, "w");
	for (size_t i = 0; i < sizeof(tcp4) / sizeof(tcp4[0]); i++)
		fputs(tcp4[i], fp);
	fclose(fp);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(tcptab_read(path, 100, on_row, &s), 0);
	cr_assert_eq(s.n, 3, "the header is no row");
	cr_assert_eq(s.inode[2], 345678);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(tcptab_read(path, 2, on_row, &s), 0);
	cr_assert_eq(s.n, 1, "two lines read: the header and one row");
	unlink(path);
	cr_assert_eq(tcptab_read(path, 100, on_row, &s), -ENOENT);
}

/* A connection of ours to a listener on loopback is seen, by its port. */
struct find {
	int port, found;
};

static void on_find(void *data, const struct tcptab_row *t)
{
	struct find *f = data;

	if (t->remote_port == f->port && t->state == 1)
		f->found = 1;
}

/* A listener on 127.0.0.1 (its address in *sin) and, in *c, a connection
 * to it; returns the listener. */
static int listener_and_client(struct sockaddr_in *sin, int *c)
{
	socklen_t len = sizeof(*sin);
	int ls = socket(AF_INET, SOCK_STREAM, 0);

	*c = socket(AF_INET, SOCK_STREAM, 0);
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(ls, (struct sockaddr *)sin, sizeof(*sin)), 0);
	cr_assert_eq(listen(ls, 1), 0);
	cr_assert_eq(getsockname(ls, (struct sockaddr *)sin, &len), 0);
	cr_assert_eq(connect(*c, (struct sockaddr *)sin, sizeof(*sin)), 0);
	return ls;
}

Test(tcptab, real_socket, .timeout = 20)
{
	struct sockaddr_in sin;
	struct find f = {0, 0};
	int c, ls = listener_and_client(&sin, &c);

	f.port = ntohs(sin.sin_port);
	if (tcptab_dump_port(AF_INET, f.port, TCPTAB_TO_PORT, 1 << 20, on_find, &f) != 0)
		tcptab_read("/proc/net/tcp", 1 << 20, on_find, &f);
	cr_assert(f.found, "the connection to port %d", f.port);
	f.found = 0;
	cr_assert_eq(tcptab_read("/proc/net/tcp", 1 << 20, on_find, &f), 0);
	cr_assert(f.found, "the connection in /proc/net/tcp");
	close(c);
	close(ls);
}

/* sock_diag's listening sockets: ours, by its local port and address. */
struct listening {
	int port, found;
	unsigned char addr[16];
};

static void on_listening(void *data, const struct tcptab_row *t)
{
	struct listening *l = data;

	if (t->local_port == l->port && t->state == 10 && memcmp(t->local, l->addr, 16) == 0)
		l->found++;
}

Test(tcptab, listening_socket, .timeout = 20)
{
	struct sockaddr_in sin;
	struct listening l = {0, 0, {0}};
	/* The connection to it is not a listener. */
	int c, ls = listener_and_client(&sin, &c);

	l.port = ntohs(sin.sin_port);
	l.addr[10] = l.addr[11] = 0xff;
	memcpy(l.addr + 12, &sin.sin_addr, 4);
	cr_assert_eq(tcptab_dump_port(AF_INET, l.port, TCPTAB_LISTENING, 1 << 16, on_listening, &l),
		     0);
	cr_assert_eq(l.found, 1, "the listener on 127.0.0.1:%d, %d times", l.port, l.found);
	l.found = 0;
	cr_assert_eq(tcptab_read("/proc/net/tcp", 1 << 20, on_listening, &l), 0);
	cr_assert_eq(l.found, 1, "the listener in /proc/net/tcp");
	l.found = 0;
	l.port = l.port == 65535 ? 1 : l.port + 1;
	cr_assert_eq(tcptab_dump_port(AF_INET, l.port, TCPTAB_LISTENING, 1 << 16, on_listening, &l),
		     0);
	cr_assert_eq(l.found, 0);
	close(c);
	close(ls);
}

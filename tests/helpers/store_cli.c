/*
 * store_cli: runs the store transcript of tests/integration/py/store_ops.py
 * with libcrun's blocking client, printing the same lines, so that the C
 * client against PyTorch's server and PyTorch's client against crun's server
 * can be diffed. Keys get TCPStore's "/" prefix by hand. It builds for
 * Windows too (make windows), to run under Wine against either server.
 *
 * usage: store_cli [--g0] HOST PORT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/err.h"
#include "crun/store.h"

static struct crun_store_client *c;

/* Exit with a message naming the failed call. */
static void die(const char *what, int rc)
{
	fprintf(stderr, "store_cli: %s: %s\n", what, crun_strerror(rc));
	exit(1);
}

static void get(const char *key, const char *label)
{
	void *v;
	size_t len;
	int rc = store_get(c, key, -1, &v, &len);

	if (rc != 0)
		die(key, rc);
	printf("get %s %.*s\n", label, (int)len, (char *)v);
	free(v);
}

static void add(const char *key, long long d, const char *label)
{
	int64_t n;
	int rc = store_add(c, key, d, &n);

	if (rc != 0)
		die(key, rc);
	printf("add %s %lld\n", label, (long long)n);
}

static void cas(const char *key, const char *e, const char *d, const char *label)
{
	void *v;
	size_t len;
	int rc = store_compare_set(c, key, e, strlen(e), d, strlen(d), &v, &len);

	if (rc != 0)
		die(key, rc);
	printf("compare_set %s %.*s\n", label, (int)len, (char *)v);
	free(v);
}

static void numkeys(void)
{
	int64_t n;
	int rc = store_num_keys(c, &n);

	if (rc != 0)
		die("num_keys", rc);
	printf("num_keys %lld\n", (long long)n);
}

static void del(const char *key, const char *label)
{
	int d, rc = store_delete_key(c, key, &d);

	if (rc != 0)
		die(key, rc);
	printf("delete_key %s %s\n", label, d ? "True" : "False");
}

static double now(void)
{
	return (double)uv_hrtime() / 1e9;
}

/* The second client: half a second in, it sets /late and adds 10 to /cnt
 * (a thread: a connection of its own, while the first one waits). */
struct late {
	const char *host;
	int port, flags, failed;
};

static void late_main(void *arg)
{
	struct late *l = arg;
	struct crun_store_client *c2;

	uv_sleep(500);
	if (store_connect_ex(l->host, l->port, 5000, l->flags, &c2) != 0) {
		l->failed = 1;
		return;
	}
	if (store_set(c2, "/late", "L", 1) != 0 ||
	    store_add(c2, "/cnt", 10, NULL) != 0)
		l->failed = 1;
	store_close(c2);
}

int main(int argc, char **argv)
{
	const char *host;
	int flags = 0, port, rc, i;
	unsigned char *bin;
	struct late late;
	uv_thread_t tid;
	size_t len;
	double t;
	void *v;

	if (argc > 1 && strcmp(argv[1], "--g0") == 0) {
		flags = CRUN_STORE_G0;
		argc--;
		argv++;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: store_cli [--g0] HOST PORT\n");
		return 2;
	}
	host = argv[1];
	port = (int)strtol(argv[2], NULL, 10);
	rc = store_connect_ex(host, port, 5000, flags, &c);
	if (rc != 0)
		die("connect", rc);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((rc = store_set(c, "/key1", "val1", 4)) != 0)
		die("set", rc);
	printf("set key1\n");
	get("/key1", "key1");
	add("/cnt", 5, "cnt");
	add("/cnt", -2, "cnt");
	get("/cnt", "cnt");
	cas("/cs", "", "first", "cs");
	cas("/cs", "wrong", "x", "cs");
	cas("/cs", "first", "second", "cs");
	cas("/nokey2", "exp", "des", "nokey2");
	cas("/empty", "", "", "empty");
	cas("/empty", "", "z", "empty");
	if ((rc = store_wait(c, (const char *[]){"/key1", "/cnt"}, 2, -1)) != 0)
		die("wait", rc);
	printf("wait key1 cnt\n");
	numkeys();
	if ((rc = store_set(c, "/n", "12abc", 5)) != 0)
		die("set", rc);
	printf("set n\n");
	add("/n", 1, "n");
	get("/n", "n");
	add("/neg", -5, "neg");
	del("/key1", "key1");
	del("/key1", "key1");
	if ((rc = store_set(c, "/bin", "\0\1\2\377", 4)) != 0)
		die("set", rc);
	printf("set bin\n");
	if ((rc = store_get(c, "/bin", -1, &v, &len)) != 0)
		die("get", rc);
	printf("get bin ");
	for (bin = v, i = 0; i < (int)len; i++)
		printf("%02x", bin[i]);
	printf("\n");
	free(v);
	t = now();
	rc = store_wait(c, (const char *[]){"/never"}, 1, 500);
	t = now() - t;
	if (rc == CRUN_ETIMEDOUT && t < 2)
		printf("wait never timeout %.1f\n", t);
	else if (rc == CRUN_ETIMEDOUT)
		printf("wait never timeout slow\n");
	else
		printf("wait never returned\n");
	get("/cnt", "cnt");
	late = (struct late){.host = host, .port = port, .flags = flags};
	if (uv_thread_create(&tid, late_main, &late) != 0)
		die("thread", UV_EAGAIN);
	get("/late", "late");
	uv_thread_join(&tid);
	if (late.failed)
		die("the second client", CRUN_EPROTO);
	add("/cnt", 0, "cnt");
	numkeys();
	printf("done\n");
	store_close(c);
	return 0;
}

/*
 * `crun store`: run the store alone in the foreground, for tests, for
 * debugging workers by hand, and as the benchmark's target. It parses its
 * flags, starts a store server on a fresh loop, says "crun store: listening
 * on H:P" on stderr once the port is open (scripts wait for that line), and
 * stops cleanly on SIGINT or SIGTERM.
 */
#include <errno.h>
#include <signal.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/banned.h"
#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/auth.h"
#include "crun/store.h"
#include "launcher.h"

static const char store_usage[] =
    "usage: crun store --port P [--host H] [options]\n"
    "\n"
    "Run a TCPStore-compatible key-value server in the foreground until\n"
    "SIGINT or SIGTERM. PyTorch clients of any version (1.13 to 2.x) and\n"
    "libcrun's clients can connect.\n"
    "\n"
    "  --port P             TCP port (0: let the kernel choose)\n"
    "  --host H             address to bind (default: :: and 0.0.0.0)\n"
    "  --max-key-size N     largest key in bytes (default 8192)\n"
    "  --max-value-size N   largest value in bytes (default 8388608)\n"
    "  --max-keys N         most keys in one request (default 131072)\n"
    "  --max-memory N       ceiling on the bytes the store holds: keys,\n"
    "                       values, waiters and every connection's buffers\n"
    "                       (default 1G)\n"
    "  --max-conns N        concurrent connections (default 65536)\n"
    "  --max-output N       unsent reply bytes per connection, and at most\n"
    "                       half of --max-memory divided among the\n"
    "                       connections with unsent replies; past it the\n"
    "                       connection is not read until they drain, and a\n"
    "                       larger single reply is refused (default 64M)\n"
    "  --idle-timeout S     close a connection holding a partial request or\n"
    "                       unsent replies S seconds without progress\n"
    "                       (default 30)\n"
    "  --secret-file PATH   serve only clients that prove they know this\n"
    "                       secret (crun agents with the same\n"
    "                       --rdzv_conf=secret_file=; PyTorch clients "
    "cannot);\n"
    "                       default $CRUN_RDZV_SECRET_FILE\n"
    "  --quiet              do not log closed connections\n"
    "  -h, --help           show this help\n"
    "\n"
    "Sizes accept a K, M or G suffix (powers of 1024).\n";

/* The running store, for the signal callback. */
struct cmd_store {
	uv_loop_t loop;
	uv_signal_t sigint, sigterm;
	struct crun_store_server *srv;
	int stopping;
};

/* SIGINT/SIGTERM: close the server; the loop ends when it is closed. */
static void cmd_store_on_signal(uv_signal_t *h, int signum)
{
	struct cmd_store *cs = h->data;

	if (cs->stopping)
		return;
	cs->stopping = 1;
	store_server_close(cs->srv, NULL, NULL);
	uv_close((uv_handle_t *)&cs->sigint, NULL);
	uv_close((uv_handle_t *)&cs->sigterm, NULL);
}

int cmd_store_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"port", required_argument, NULL, 'p'},
	    {"host", required_argument, NULL, 'H'},
	    {"max-key-size", required_argument, NULL, 'k'},
	    {"max-value-size", required_argument, NULL, 'v'},
	    {"max-keys", required_argument, NULL, 'n'},
	    {"max-memory", required_argument, NULL, 'm'},
	    {"max-conns", required_argument, NULL, 'c'},
	    {"max-output", required_argument, NULL, 'o'},
	    {"idle-timeout", required_argument, NULL, 'i'},
	    {"secret-file", required_argument, NULL, 's'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct crun_store_limits lim;
	struct cmd_store cs;
	const char *host = NULL, *flag,
		   *secret = getenv("CRUN_RDZV_SECRET_FILE");
	struct crun_auth_key key;
	size_t *slot;
	long port = -1;
	char *end;
	int c, rc, quiet = 0;

	/* A client hanging up during a reply must not kill the store (main
	 * did this already; `crun store` must not depend on it). */
	signal(SIGPIPE, SIG_IGN);
	store_limits_default(&lim);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		slot = NULL;
		flag = NULL;
		switch (c) {
		case 'h':
			fputs(store_usage, stdout);
			return 0;
		case 'p':
			errno = 0;
			port = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || optarg[0] == '\0' ||
			    port < 0 || port > 65535) {
				fprintf(stderr,
					"crun store: invalid --port \"%s\"\n",
					optarg);
				return 2;
			}
			break;
		case 'H':
			host = optarg;
			break;
		case 'k':
			slot = &lim.max_key;
			flag = "--max-key-size";
			break;
		case 'v':
			slot = &lim.max_value;
			flag = "--max-value-size";
			break;
		case 'n':
			slot = &lim.max_keys;
			flag = "--max-keys";
			break;
		case 'm':
			slot = &lim.max_memory;
			flag = "--max-memory";
			break;
		case 'c':
			slot = &lim.max_conns;
			flag = "--max-conns";
			break;
		case 'o':
			slot = &lim.max_output;
			flag = "--max-output";
			break;
		case 'i':
			slot = &lim.idle_timeout;
			flag = "--idle-timeout";
			break;
		case 's':
			secret = optarg;
			break;
		case 'q':
			quiet = 1;
			break;
		case ':':
			fprintf(stderr,
				"crun store: option \"%s\" needs a value\n",
				argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "crun store: unknown option \"%s\"\n",
				argv[optind - 1]);
			return 2;
		}
		if (slot != NULL && cfg_parse_size(optarg, slot) != 0) {
			fprintf(stderr, "crun store: invalid %s \"%s\"\n", flag,
				optarg);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "crun store: unexpected argument \"%s\"\n",
			argv[optind]);
		return 2;
	}
	if (lim.max_output < lim.max_value + 64) {
		fprintf(
		    stderr,
		    "crun store: --max-output %zu must be at least "
		    "--max-value-size + 64 (one reply of the largest value)\n",
		    lim.max_output);
		return 2;
	}
	if (port < 0) {
		fprintf(stderr,
			"crun store: missing --port (see crun store --help)\n");
		return 2;
	}

	if (secret != NULL && *secret != '\0') {
		char errmsg[512];

		if (auth_key_load(secret, &key, errmsg, sizeof(errmsg)) != 0) {
			fprintf(stderr, "crun store: %s\n", errmsg);
			return 2;
		}
	}

	memset(&cs, 0, sizeof(cs));
	uv_loop_init(&cs.loop);
	rc = store_server_new(&cs.loop, host, (int)port, &lim, &cs.srv);
	if (rc != 0) {
		fprintf(stderr, "crun store: cannot listen on %s:%ld: %s\n",
			host != NULL ? host : "::", port, crun_strerror(rc));
		uv_run(&cs.loop, UV_RUN_DEFAULT);
		uv_loop_close(&cs.loop);
		return 1;
	}
	store_server_set_quiet(cs.srv, quiet);
	if (secret != NULL && *secret != '\0')
		store_server_set_auth(cs.srv, &key);
	uv_signal_init(&cs.loop, &cs.sigint);
	uv_signal_init(&cs.loop, &cs.sigterm);
	cs.sigint.data = cs.sigterm.data = &cs;
	uv_signal_start(&cs.sigint, cmd_store_on_signal, SIGINT);
	uv_signal_start(&cs.sigterm, cmd_store_on_signal, SIGTERM);
	if (host == NULL)
		host = "::";
	fprintf(stderr,
		strchr(host, ':') != NULL ? "crun store: listening on [%s]:%d\n"
					  : "crun store: listening on %s:%d\n",
		host, store_server_port(cs.srv));
	fflush(stderr);
	uv_run(&cs.loop, UV_RUN_DEFAULT);
	rc = uv_loop_close(&cs.loop);
	if (rc != 0) {
		fprintf(stderr, "crun store: loop not closed cleanly: %s\n",
			uv_strerror(rc));
		return 1;
	}
	return 0;
}

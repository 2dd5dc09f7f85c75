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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/log.h"
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

/* What the command line asks for. */
struct cmd_store_args {
	const char *host;
	long port;
	struct crun_store_limits lim;
	const char *secret;
	int quiet;
};

/* The size flags: each sets one of the store's limits. */
static const struct {
	const char *name;
	size_t offset;
} store_size_flags[] = {
    {"max-key-size", offsetof(struct crun_store_limits, max_key)},
    {"max-value-size", offsetof(struct crun_store_limits, max_value)},
    {"max-keys", offsetof(struct crun_store_limits, max_keys)},
    {"max-memory", offsetof(struct crun_store_limits, max_memory)},
    {"max-conns", offsetof(struct crun_store_limits, max_conns)},
    {"max-output", offsetof(struct crun_store_limits, max_output)},
    {"idle-timeout", offsetof(struct crun_store_limits, idle_timeout)},
};
#define N_SIZE_FLAGS (sizeof(store_size_flags) / sizeof(store_size_flags[0]))

/*
 * Parse argv into args. Returns -1 to go on, else the exit status: 0 after
 * --help, 2 after a one-line usage error on stderr.
 */
const struct option *cmd_store_options(void)
{
	static struct option opts[N_SIZE_FLAGS + 6];
	size_t n = 0;

	if (opts[0].name != NULL)
		return opts;
	for (size_t i = 0; i < N_SIZE_FLAGS; i++)
		opts[n++] =
		    (struct option){store_size_flags[i].name, required_argument,
				    NULL, (int)(256 + i)};
	opts[n++] = (struct option){"port", required_argument, NULL, 'p'};
	opts[n++] = (struct option){"host", required_argument, NULL, 'H'};
	opts[n++] =
	    (struct option){"secret-file", required_argument, NULL, 's'};
	opts[n++] = (struct option){"quiet", no_argument, NULL, 'q'};
	opts[n++] = (struct option){"help", no_argument, NULL, 'h'};
	opts[n] = (struct option){NULL, 0, NULL, 0};
	return opts;
}

static int cmd_store_parse(int argc, char **argv, struct cmd_store_args *args)
{
	const struct option *opts = cmd_store_options();
	size_t i;
	char *end;
	int c;

	memset(args, 0, sizeof(*args));
	args->port = -1;
	args->secret = getenv("CRUN_RDZV_SECRET_FILE");
	store_limits_default(&args->lim);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(store_usage, stdout);
			return 0;
		case 'p':
			errno = 0;
			args->port = strtol(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || optarg[0] == '\0' ||
			    args->port < 0 || args->port > 65535) {
				log_msg(LOG_ERROR, "crun store",
					"invalid --port \"%s\"", optarg);
				return 2;
			}
			break;
		case 'H':
			args->host = optarg;
			break;
		case 's':
			args->secret = optarg;
			break;
		case 'q':
			args->quiet = 1;
			break;
		case ':':
			log_msg(LOG_ERROR, "crun store",
				"option \"%s\" needs a value",
				argv[optind - 1]);
			return 2;
		default:
			if (c >= 256 && c < 256 + (int)N_SIZE_FLAGS) {
				i = (size_t)c - 256;
				if (cfg_parse_size(
					optarg, (size_t *)((char *)&args->lim +
							   store_size_flags[i]
							       .offset)) == 0)
					break;
				log_msg(LOG_ERROR, "crun store",
					"invalid --%s \"%s\"",
					store_size_flags[i].name, optarg);
				return 2;
			}
			log_msg(LOG_ERROR, "crun store",
				"unknown option \"%s\"", argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		log_msg(LOG_ERROR, "crun store", "unexpected argument \"%s\"",
			argv[optind]);
		return 2;
	}
	if (args->lim.max_output < args->lim.max_value + 64) {
		log_msg(LOG_ERROR, "crun store",
			"--max-output %zu must be at least --max-value-size + "
			"64 (one reply of the largest value)",
			args->lim.max_output);
		return 2;
	}
	if (args->port < 0) {
		log_msg(LOG_ERROR, "crun store",
			"missing --port (see crun store --help)");
		return 2;
	}
	return -1;
}

int cmd_store_main(int argc, char **argv)
{
	struct cmd_store_args args;
	struct cmd_store cs;
	struct crun_auth_key key;
	const char *host;
	int rc;

	/* A client hanging up during a reply must not kill the store (main
	 * did this already; `crun store` must not depend on it). */
	signal(SIGPIPE, SIG_IGN);
	rc = cmd_store_parse(argc, argv, &args);
	if (rc >= 0)
		return rc;
	if (args.secret != NULL && *args.secret != '\0') {
		char errmsg[512];

		if (auth_key_load(args.secret, &key, errmsg, sizeof(errmsg)) !=
		    0) {
			log_msg(LOG_ERROR, "crun store", "%s", errmsg);
			return 2;
		}
	}

	memset(&cs, 0, sizeof(cs));
	uv_loop_init(&cs.loop);
	rc = store_server_new(&cs.loop, args.host, (int)args.port, &args.lim,
			      &cs.srv);
	if (rc != 0) {
		log_msg(LOG_ERROR, "crun store", "cannot listen on %s:%ld: %s",
			args.host != NULL ? args.host : "::", args.port,
			crun_strerror(rc));
		uv_run(&cs.loop, UV_RUN_DEFAULT);
		uv_loop_close(&cs.loop);
		return 1;
	}
	store_server_set_quiet(cs.srv, args.quiet);
	if (args.secret != NULL && *args.secret != '\0')
		store_server_set_auth(cs.srv, &key);
	uv_signal_init(&cs.loop, &cs.sigint);
	uv_signal_init(&cs.loop, &cs.sigterm);
	cs.sigint.data = cs.sigterm.data = &cs;
	uv_signal_start(&cs.sigint, cmd_store_on_signal, SIGINT);
	uv_signal_start(&cs.sigterm, cmd_store_on_signal, SIGTERM);
	host = args.host != NULL ? args.host : "::";
	log_msg(LOG_INFO, "crun store",
		strchr(host, ':') != NULL ? "listening on [%s]:%d"
					  : "listening on %s:%d",
		host, store_server_port(cs.srv));
	uv_run(&cs.loop, UV_RUN_DEFAULT);
	rc = uv_loop_close(&cs.loop);
	if (rc != 0) {
		log_msg(LOG_ERROR, "crun store", "loop not closed cleanly: %s",
			uv_strerror(rc));
		return 1;
	}
	return 0;
}

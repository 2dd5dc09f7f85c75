/*
 * A controllable worker for integration tests (libuv's test-spawn re-runs a
 * helper the same way). Arguments are actions run left to right:
 *
 *   env FILE            write the environment, sorted, to FILE.<LOCAL_RANK>
 *   pid FILE            append "<pid>\n" to FILE
 *   append FILE TEXT    append "TEXT <RANK> <TORCHELASTIC_RESTART_COUNT>\n" to FILE
 *   trap FILE           on SIGTERM/SIGINT/SIGUSR1 append "<signame> <RANK>\n" to FILE and exit 0
 *   ignore SIG          ignore SIGTERM or SIGINT (to test escalation)
 *   print N             write N numbered lines to stdout as fast as possible
 *   eprint TEXT         write TEXT and a newline to stderr
 *   errorfile MSG       write torchelastic's error.json to $TORCHELASTIC_ERROR_FILE
 *   fail-if-attempt N C exit C when TORCHELASTIC_RESTART_COUNT is N
 *   fail-if-rank R C    exit C when RANK is R
 *   fail-if R N C       exit C when RANK is R on restart attempt N
 *   hang-if-attempt N   wait for signals forever on restart attempt N
 *   sleep MS            sleep MS milliseconds
 *   wait-lines FILE N   wait (polling every 10 ms) until FILE has N lines:
 *                       a barrier of the ranks that each append a line
 *   hang                wait for signals forever
 *   signal SIG          kill itself with SIG (SEGV, ABRT, KILL, TERM)
 *   exit C              exit with status C
 *   child FILE          start a copy of itself that appends its pid to FILE
 *                       and hangs (a grandchild of the agent), and go on
 *   store               speak the TCPStore wire to $MASTER_ADDR:$MASTER_PORT
 *                       (libcrun's client): set /crun-fw/<RANK>, wait for
 *                       every rank's key, and print "store ok <RANK> <sum>"
 *                       with the sum of the ranks read back
 *
 * It builds for Windows too (make windows), to run under crun.exe.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/store.h"
#ifdef _WIN32
#include <process.h>
#endif

extern char **environ;

static const char *trap_file;

static int num(const char *s)
{
	return (int)strtol(s, NULL, 10);
}

static const char *envs(const char *name)
{
	const char *v = getenv(name);

	return v ? v : "";
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int signum(const char *s)
{
	if (strcmp(s, "SEGV") == 0) return SIGSEGV;
	if (strcmp(s, "ABRT") == 0) return SIGABRT;
	if (strcmp(s, "KILL") == 0) return SIGKILL;
	if (strcmp(s, "TERM") == 0) return SIGTERM;
	if (strcmp(s, "INT") == 0) return SIGINT;
	if (strcmp(s, "USR1") == 0) return SIGUSR1;
	return num(s);
}

/* The store action: a barrier of every rank through the workers' store. */
static int store_barrier(void)
{
	struct crun_store_client *c;
	int world = num(envs("WORLD_SIZE")), sum = 0, rc;
	char key[64];

	rc = store_connect(envs("MASTER_ADDR"), num(envs("MASTER_PORT")), 30000,
			   &c);
	if (rc != 0) {
		fprintf(stderr, "store: connect: %s\n", crun_strerror(rc));
		return 101;
	}
	snprintf(key, sizeof(key), "/crun-fw/%s", envs("RANK"));
	rc = store_set(c, key, envs("RANK"), strlen(envs("RANK")));
	for (int r = 0; rc == 0 && r < world; r++) {
		const char *k = key;
		void *v;
		size_t len;

		snprintf(key, sizeof(key), "/crun-fw/%d", r);
		rc = store_wait(c, &k, 1, 30000);
		if (rc == 0 && (rc = store_get(c, key, -1, &v, &len)) == 0) {
			sum += num(v);
			free(v);
		}
	}
	store_close(c);
	if (rc != 0) {
		fprintf(stderr, "store: %s\n", crun_strerror(rc));
		return 101;
	}
	printf("store ok %s %d\n", envs("RANK"), sum);
	fflush(stdout);
	return 0;
}

static void on_signal(int sig)
{
	char line[64];
	const char *name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGUSR1";
	FILE *fp = fopen(trap_file, "a");

	snprintf(line, sizeof(line), "%s %s\n", name, envs("RANK"));
	if (fp) {
		fputs(line, fp);
		fclose(fp);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "child") == 0 && i + 1 < argc) {
			const char *file = argv[++i];
#ifdef _WIN32
			if (_spawnl(_P_NOWAIT, argv[0], argv[0], "pid", file,
				    "hang", NULL) < 0)
				return 102;
#else
			if (fork() == 0) {
				execl(argv[0], argv[0], "pid", file, "hang",
				      (char *)NULL);
				_exit(127);
			}
#endif
		} else if (strcmp(a, "store") == 0) {
			int rc = store_barrier();

			if (rc != 0)
				return rc;
		} else if (strcmp(a, "env") == 0 && i + 1 < argc) {
			char path[4096];
			int n = 0;
			FILE *fp;

			while (environ[n])
				n++;
			qsort(environ, (size_t)n, sizeof(char *), cmp);
			snprintf(path, sizeof(path), "%s.%s", argv[++i], envs("LOCAL_RANK"));
			fp = fopen(path, "w");
			if (fp == NULL)
				return 100;
			for (int k = 0; k < n; k++)
				fprintf(fp, "%s\n", environ[k]);
			fclose(fp);
		} else if (strcmp(a, "pid") == 0 && i + 1 < argc) {
			FILE *fp = fopen(argv[++i], "a");

			if (fp == NULL)
				return 100;
			fprintf(fp, "%d\n", (int)getpid());
			fclose(fp);
		} else if (strcmp(a, "append") == 0 && i + 2 < argc) {
			FILE *fp = fopen(argv[i + 1], "a");

			if (fp == NULL)
				return 100;
			fprintf(fp, "%s %s %s\n", argv[i + 2], envs("RANK"),
				envs("TORCHELASTIC_RESTART_COUNT"));
			fclose(fp);
			i += 2;
		} else if (strcmp(a, "trap") == 0 && i + 1 < argc) {
			trap_file = argv[++i];
			signal(SIGTERM, on_signal);
			signal(SIGINT, on_signal);
			signal(SIGUSR1, on_signal);
		} else if (strcmp(a, "ignore") == 0 && i + 1 < argc) {
			signal(signum(argv[++i]), SIG_IGN);
		} else if (strcmp(a, "print") == 0 && i + 1 < argc) {
			int n = num(argv[++i]);
			const char *r = envs("RANK");

			for (int k = 0; k < n; k++)
				printf("rank %s line %d abcdefghijklmnopqrstuvwxyz0123456789 end\n", r, k);
			fflush(stdout);
		} else if (strcmp(a, "eprint") == 0 && i + 1 < argc) {
			fprintf(stderr, "%s\n", argv[++i]);
		} else if (strcmp(a, "errorfile") == 0 && i + 1 < argc) {
			FILE *fp = fopen(envs("TORCHELASTIC_ERROR_FILE"), "w");

			if (fp == NULL)
				return 100;
			fprintf(fp, "{\"message\": {\"message\": \"RuntimeError: %s\", "
				    "\"extraInfo\": {\"py_callstack\": \"Traceback (most recent call last):\\n"
				    "  File \\\"train.py\\\", line 1\\nRuntimeError: %s\\n\", "
				    "\"timestamp\": \"%ld\"}}}\n",
				argv[i + 1], argv[i + 1], (long)time(NULL));
			fclose(fp);
			i++;
		} else if (strcmp(a, "fail-if-attempt") == 0 && i + 2 < argc) {
			if (strcmp(envs("TORCHELASTIC_RESTART_COUNT"), argv[i + 1]) == 0)
				return num(argv[i + 2]);
			i += 2;
		} else if (strcmp(a, "fail-if-rank") == 0 && i + 2 < argc) {
			if (strcmp(envs("RANK"), argv[i + 1]) == 0)
				return num(argv[i + 2]);
			i += 2;
		} else if (strcmp(a, "fail-if") == 0 && i + 3 < argc) {
			if (strcmp(envs("RANK"), argv[i + 1]) == 0 &&
			    strcmp(envs("TORCHELASTIC_RESTART_COUNT"), argv[i + 2]) == 0)
				return num(argv[i + 3]);
			i += 3;
		} else if (strcmp(a, "hang-if-attempt") == 0 && i + 1 < argc) {
			if (strcmp(envs("TORCHELASTIC_RESTART_COUNT"), argv[++i]) == 0)
				for (;;)
					pause();
		} else if (strcmp(a, "sleep") == 0 && i + 1 < argc) {
			usleep((useconds_t)num(argv[++i]) * 1000);
		} else if (strcmp(a, "wait-lines") == 0 && i + 2 < argc) {
			const char *path = argv[i + 1];
			long want = num(argv[i + 2]), n;
			int c;

			i += 2;
			for (;;) {
				FILE *fp = fopen(path, "r");

				n = 0;
				while (fp != NULL && (c = getc(fp)) != EOF)
					n += c == '\n';
				if (fp != NULL)
					fclose(fp);
				if (n >= want)
					break;
				usleep(10000);
			}
		} else if (strcmp(a, "hang") == 0) {
			for (;;)
				pause();
		} else if (strcmp(a, "signal") == 0 && i + 1 < argc) {
			int sig = signum(argv[++i]);

			signal(sig, SIG_DFL);
			fflush(NULL);
			raise(sig);
		} else if (strcmp(a, "exit") == 0 && i + 1 < argc) {
			fflush(NULL);
			return num(argv[++i]);
		} else {
			fprintf(stderr, "fake_worker: unknown action '%s'\n", a);
			return 99;
		}
	}
	return 0;
}

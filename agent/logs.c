/*
 * Where the agent writes (logs.h): <log_dir>/<run_id>_XXXXXX/attempt_<n>/ (a
 * temporary directory, removed after a success, when no --log_dir is
 * given), the round's failure report (failures.json, printed when the job
 * cannot restart), TORCHELASTIC_ERROR_FILE for a scheduler, and the console
 * as log.h's sink, so that libcrun's lines and the agent's share one
 * non-blocking console.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ftw.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "console.h"
#include "logs.h"
#include "worker.h"

/*
 * The console of the running agent, the sink of every "crun: ..." line
 * (log.h), libcrun's included; NULL before it exists and after it is freed
 * (then lines go straight out).
 */
static struct console *the_console;

/* The last line crun said: why it stops, for the launcher's error file. */
static char last_said[LOG_LINE_MAX];

/* The console lines go to from now on (NULL: straight to the fds). */
void logs_set_console(struct console *c)
{
	the_console = c;
}

/* Write whole bytes to the console; the agent is its only writer. */
static void to_console(int fd, const char *line, size_t len)
{
	if (the_console) {
		console_write(the_console, fd, line, len);
		return;
	}
	while (len > 0) {
		ssize_t n = write(fd, line, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* console gone: keep running, files still work
				 */
		line += n;
		len -= (size_t)n;
	}
}

/* log.h's sink while the agent runs: every line, on the console's stderr. */
void logs_on_log(void *data, enum log_level level, const char *line, size_t len,
		 const char *msg)
{
	(void)data;
	(void)level;
	(void)msg;
	snprintf(last_said, sizeof(last_said), "%.*s", (int)(len - 1), line);
	to_console(2, line, len);
}

/*
 * When crun's own environment names TORCHELASTIC_ERROR_FILE (a scheduler
 * asks for the launcher's root cause, as torchrun writes it), write it once:
 * the root failure of this node when there is one, else why crun stops.
 */
void logs_write_error_file(struct logs *l, int status)
{
	const char *path = getenv("TORCHELASTIC_ERROR_FILE");
	const struct crun_failure *root = NULL;
	char why[1200];

	if (l->error_file_done || path == NULL || *path == '\0')
		return;
	l->error_file_done = 1;
	snprintf(why, sizeof(why), "%s", last_said);
	if (l->npending > 0) {
		root = &l->pending[report_root(l->pending, l->npending)];
		snprintf(why, sizeof(why),
			 "ChildFailedError: %s: rank %d (local rank %d, pid "
			 "%d) on %s exited with %d%s%s",
			 l->cfg->argv[0], root->rank, root->local_rank,
			 (int)root->pid, root->host, root->exitcode,
			 root->signal ? ", " : "",
			 root->signal ? cfg_signame(root->signal) : "");
		status = root->exitcode;
	}
	if (report_write_error_file(path, root, why, status))
		log_say("cannot write the error file '%s'", path);
}

/* Worker w's entry in the failure report. */
static void failure_of(const struct logs *l, const struct crun_ranks *rk,
		       struct worker *w, struct crun_failure *x)
{
	x->local_rank = w->local_rank;
	x->group_rank = rk->group_rank;
	x->rank = rk->base_rank + w->local_rank;
	x->pid = w->pid;
	snprintf(x->host, sizeof(x->host), "%s", l->host);
	x->exitcode = w->status;
	x->signal = w->signal;
	x->time = w->exit_time;
	if (w->error_file == NULL ||
	    failure_read_error_file(x, w->error_file) != 0) {
		/* stderr that went straight to its file: read its end. */
		worker_tail_from_file(w);
		x->traceback = tail_lines(&w->tail, 20);
	}
	x->stacks = w->stacks ? strdup(w->stacks) : NULL;
}

/*
 * Workers the agent stopped were terminated, not failed; those it had to
 * SIGKILL are listed after the failures, for their stacks, when there
 * are failures (the report exists).
 */
int logs_collect(struct logs *l, const struct pool *p,
		 const struct crun_ranks *rk, int *root)
{
	struct crun_failure *f = calloc((size_t)p->n + 1, sizeof(*f));
	int n = 0;

	logs_drop_report(l, 0);
	*root = 0;
	for (int pass = 0; pass < 2 && f; pass++)
		for (int i = 0; i < p->n; i++) {
			struct worker *w = &p->w[i];
			int failed = w->status != 0 && !w->stopped;

			if (pass == 0 ? !failed
				      : failed || n == 0 || w->stacks == NULL)
				continue;
			failure_of(l, rk, w, &f[n++]);
		}
	if (n == 0) {
		free(f);
		return 0;
	}
	*root = report_root(f, n);
	if (l->attempt_prefix) {
		snprintf(l->report_path, sizeof(l->report_path),
			 "%sfailures.json", l->attempt_prefix);
		report_write_json(l->report_path, l->cfg->argv[0], f, n);
	}
	l->pending = f;
	l->npending = n;
	return n;
}

void logs_drop_report(struct logs *l, int print)
{
	if (l->pending && print) {
		char *text = NULL;
		size_t len = 0;
		FILE *fp = open_memstream(&text, &len);

		/* Through the console, which never blocks. */
		if (fp) {
			report_print(fp, l->cfg->argv[0], l->pending,
				     l->npending);
			fclose(fp);
			to_console(2, text, len);
		}
		free(text);
		logs_write_error_file(l, 1);
		if (*l->report_path)
			log_say("failure report saved to %s", l->report_path);
	}
	for (int i = 0; i < l->npending; i++)
		failure_release(&l->pending[i]);
	free(l->pending);
	l->pending = NULL;
	l->npending = 0;
	*l->report_path = '\0';
}

/* Whether an attempt of this run was given prefix already. */
static int scratch_named(const struct logs *l, const char *prefix)
{
	for (int i = 0; i < l->nscratch; i++)
		if (strcmp(l->scratch[i], prefix) == 0)
			return 1;
	return 0;
}

int logs_attempt(struct logs *l, int generation)
{
	char path[PATH_MAX];
	char **grown;

	free(l->attempt_dir);
	free(l->attempt_prefix);
	l->attempt_dir = l->attempt_prefix = NULL;
	if (l->root == NULL)
		return 0;
	if (l->tag) {
		grown =
		    realloc(l->scratch, sizeof(*grown) * (l->nscratch + 1u));
		if (grown == NULL)
			return -ENOMEM;
		l->scratch = grown;
		/* A prefix given before (a generation again) is not reused. */
		snprintf(path, sizeof(path), "%s/%s.attempt_%d.", l->root,
			 l->tag, generation);
		for (int k = 1; scratch_named(l, path); k++)
			snprintf(path, sizeof(path), "%s/%s.attempt_%d.%d.",
				 l->root, l->tag, generation, k);
		if ((l->scratch[l->nscratch] = strdup(path)) == NULL)
			return -ENOMEM;
		l->nscratch++;
		l->attempt_prefix = strdup(path);
		return l->attempt_prefix ? 0 : -ENOMEM;
	}
	snprintf(path, sizeof(path), "%s/attempt_%d", l->root, generation);
	for (int k = 1; mkdir(path, 0755) != 0; k++) {
		if (errno != EEXIST || k > 1000) {
			log_say("cannot create '%s': %s", path,
				strerror(errno));
			return -errno;
		}
		snprintf(path, sizeof(path), "%s/attempt_%d.%d", l->root,
			 generation, k);
	}
	l->attempt_dir = strdup(path);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/");
	l->attempt_prefix = strdup(path);
	return l->attempt_dir && l->attempt_prefix ? 0 : -ENOMEM;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/*
 * <run_id>_<pid>_<random>: what the run's scratch files start with. The id
 * keeps only [A-Za-z0-9._-] (it becomes a file name) and 64 of them.
 */
static char *scratch_tag(const char *id)
{
	static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char rnd[8] = {0};
	char tag[128], *p = tag;

	for (; *id && p < tag + 64; id++) {
		int keep = isalnum((unsigned char)*id) || strchr("._-", *id);

		*p++ = keep ? *id : '_';
	}
	p += snprintf(p, 24, "_%d_", (int)getpid());
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		memcpy(rnd, &(long){(long)time(NULL) ^ (long)clock()},
		       sizeof(long));
	for (size_t i = 0; i < sizeof(rnd); i++)
		*p++ = digits[rnd[i] % (sizeof(digits) - 1)];
	*p = '\0';
	return strdup(tag);
}

/* $TMPDIR (tmp)/crun-<uid>, made if need be: 0 when it is ours alone. */
static int user_dir(const char *tmp, char *path, size_t len)
{
	struct stat st;
	uid_t uid = geteuid();
	int k = snprintf(path, len, "%s/crun-%u", tmp, (unsigned)uid);

	if (k < 0 || (size_t)k >= len)
		return -ENAMETOOLONG;
	if ((mkdir(path, 0700) == 0 || errno == EEXIST) &&
	    lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
	    (st.st_mode & 077) == 0)
		return 0;
	return -EPERM;
}

int logs_user_dir(char *path, size_t len)
{
	const char *tmp = getenv("TMPDIR");

	return user_dir(tmp && *tmp ? tmp : "/tmp", path, len);
}

/*
 * Where a run that asked for no files puts what it still writes: each
 * worker's TORCHELASTIC_ERROR_FILE and a round's failure report. They go
 * to $TMPDIR/crun-<uid>/, the user's own directory, kept between runs as
 * tmux keeps its sockets, as <tag>.attempt_<n>.*: no directory is made or
 * removed per run (on a disk that discards freed blocks, that pair was the
 * dearest step of a short job). A crun-<uid> that is not a directory of
 * ours closed to others is never used: a private one of the run's own,
 * removed after a success, instead.
 */
static int setup_scratch(struct logs *l, const char *tmp)
{
	char path[PATH_MAX];

	if ((l->tag = scratch_tag(l->cfg->rdzv_id)) == NULL)
		return -ENOMEM;
	if (user_dir(tmp, path, sizeof(path)) == 0)
		return (l->root = strdup(path)) ? 0 : -ENOMEM;
	snprintf(path, sizeof(path), "%s/crun_XXXXXX", tmp);
	if (mkdtemp(path) == NULL) {
		log_say("cannot create a log directory in '%s': %s", tmp,
			strerror(errno));
		return -errno;
	}
	l->private_dir = 1;
	return (l->root = strdup(path)) ? 0 : -ENOMEM;
}

static int setup_dirs(struct logs *l)
{
	const struct crun_cfg *cfg = l->cfg;
	const char *dir = cfg->log_dir;
	char path[PATH_MAX];

	if (dir && strcmp(dir, "/dev/null") == 0)
		return 0; /* no files at all, as newer torchrun */
	if (dir == NULL) {
		const char *tmp = getenv("TMPDIR");

		if (tmp == NULL || *tmp == '\0')
			tmp = "/tmp";
		for (int i = 0; i < cfg->nproc_per_node; i++)
			l->kept |= cfg_std_for(&cfg->redirects, i) |
				   cfg_std_for(&cfg->tee, i);
		l->root_tmp = 1;
		/* Nobody asked for files and none will be kept: no tree. */
		if (!l->kept && cfg->ndup_filters[0] == 0 &&
		    cfg->ndup_filters[1] == 0)
			return setup_scratch(l, tmp);
		snprintf(path, sizeof(path), "%s/crun_XXXXXX", tmp);
		if (mkdtemp(path) == NULL) {
			log_say("cannot create a log directory in '%s': %s",
				tmp, strerror(errno));
			return -errno;
		}
		dir = path;
	} else if (mkdir(dir, 0755) && errno != EEXIST) {
		log_say("cannot create log directory '%s': %s", dir,
			strerror(errno));
		return -errno;
	}
	/*
	 * <dir>/<run_id>_<random>, as torchrun: reruns of a job with a fixed
	 * --rdzv_id, and nodes sharing one log_dir, never mix their files.
	 */
	l->root = malloc(strlen(dir) + strlen(cfg->rdzv_id) + 9);
	snprintf(l->root, strlen(dir) + strlen(cfg->rdzv_id) + 9,
		 "%s/%s_XXXXXX", dir, cfg->rdzv_id);
	if (mkdtemp(l->root) == NULL || chmod(l->root, 0755)) {
		log_say("cannot create log directory '%s': %s", l->root,
			strerror(errno));
		return -errno;
	}
	if (l->root_tmp && l->kept)
		log_say("worker logs go to %s (no --log_dir given)", l->root);
	return 0;
}

int logs_setup(struct logs *l)
{
	int rc = setup_dirs(l);

	l->ready = rc == 0;
	return rc;
}

/*
 * Remove the files this run may have written as scratch, by name (never
 * reading the directory, which holds other runs' files): each attempt's
 * failure report and its workers' error files; then a directory of the
 * run's own.
 */
static void remove_scratch(struct logs *l)
{
	char path[PATH_MAX];

	for (int i = 0; i < l->nscratch; i++) {
		snprintf(path, sizeof(path), "%sfailures.json", l->scratch[i]);
		unlink(path);
		for (int r = 0; r < l->cfg->nproc_per_node; r++) {
			char *ef = worker_error_file(l->scratch[i], r);

			if (ef)
				unlink(ef);
			free(ef);
		}
	}
	if (l->private_dir)
		rmdir(l->root);
}

/* A log directory crun invented is removed after a success. */
void logs_remove(struct logs *l, int exit_status)
{
	char *parent;

	if (!l->root_tmp || l->kept || exit_status != 0 || l->root == NULL)
		return;
	if (l->tag) {
		remove_scratch(l);
		return;
	}
	parent = strdup(l->root);
	nftw(l->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	if (parent && strrchr(parent, '/')) {
		*strrchr(parent, '/') = '\0';
		rmdir(parent);
	}
	free(parent);
}

void logs_init(struct logs *l, const struct crun_cfg *cfg, const char *host)
{
	memset(l, 0, sizeof(*l));
	l->cfg = cfg;
	l->host = host;
}

void logs_free(struct logs *l)
{
	logs_drop_report(l, 0);
	free(l->root);
	free(l->tag);
	for (int i = 0; i < l->nscratch; i++)
		free(l->scratch[i]);
	free(l->scratch);
	free(l->attempt_dir);
	free(l->attempt_prefix);
	memset(l, 0, sizeof(*l));
}

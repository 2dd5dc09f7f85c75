/*
 * Whether a worker makes progress (see progress.h).
 *
 * Happy path: once a second the stall detector (stall.c) walks each
 * worker's tree in root (from the worker's parent, through the children
 * files of every thread), reads each process's stat (and io) once, adds it
 * to the worker whose group or session it belongs to, and folds each worker's
 * sum into its record: the rank progressed when its CPU time or its bytes moved
 * past the thresholds, scaled to the time since the last sample.
 *
 * Failure modes: a process that exits between the directory read and the
 * open is skipped; a stat line that does not parse (a hostile or a fake
 * /proc) counts nothing; an io file we may not read counts 0 bytes, so
 * such a rank progresses by CPU alone; a kernel without children files
 * (no CONFIG_PROC_CHILDREN) leaves the whole of root to scan. At most
 * PROGRESS_MAX_PROCS entries and 1 KiB of each stat and io file are read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progress.h"

/*
 * The next decimal field at *p (after blanks), with an optional '-' (tpgid
 * is -1 without a terminal); -1 when there is none or it overflows.
 */
static int next_num(const char **p, const char *end, int64_t *out)
{
	const char *s = *p;
	int64_t v = 0;
	int digits = 0, neg = 0;

	while (s < end && *s == ' ')
		s++;
	if (s < end && *s == '-') {
		neg = 1;
		s++;
	}
	for (; s < end && *s >= '0' && *s <= '9'; s++, digits++) {
		if (v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	if (digits == 0 || (s < end && *s != ' ' && *s != '\n'))
		return -1;
	*p = s;
	*out = neg ? -v : v;
	return 0;
}

/* Skip one blank-separated field of any text (the state letter). */
static int skip_field(const char **p, const char *end)
{
	const char *s = *p;

	while (s < end && *s == ' ')
		s++;
	if (s == end)
		return -1;
	while (s < end && *s != ' ')
		s++;
	*p = s;
	return 0;
}

int progress_parse_stat(const char *text, size_t len, pid_t *pgrp,
			pid_t *session, uint64_t *ticks)
{
	const char *end = text + len, *p = NULL;
	int64_t f[18];
	uint64_t sum = 0;

	/* "pid (comm) state ppid pgrp session ...": comm may hold anything,
	 * so fields start after the last ')'. */
	for (const char *s = text; s < end; s++)
		if (*s == ')')
			p = s + 1;
	if (p == NULL || skip_field(&p, end))
		return -1;
	/* Fields 4 (ppid) to 17 (cstime), as f[4..17]. */
	for (int i = 4; i <= 17; i++)
		if (next_num(&p, end, &f[i]))
			return -1;
	if (f[5] <= 0 || f[5] > INT32_MAX || f[6] < 0 || f[6] > INT32_MAX)
		return -1;
	*pgrp = (pid_t)f[5];
	*session = (pid_t)f[6];
	/* Each of them below 2^62: a sum that cannot wrap. */
	for (int i = 14; i <= 17; i++) {
		if (f[i] < 0 || f[i] >> 62)
			return -1;
		sum += (uint64_t)f[i];
	}
	*ticks = sum;
	return 0;
}

uint64_t progress_parse_io(const char *text, size_t len)
{
	const char *end = text + len, *s = text;
	uint64_t total = 0;

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *le = nl ? nl : end;
		int64_t v;
		const char *p;

		if ((size_t)(le - s) > 6 && (memcmp(s, "rchar:", 6) == 0 ||
					     memcmp(s, "wchar:", 6) == 0)) {
			p = s + 6;
			if (next_num(&p, le, &v) == 0 && p == le && v >= 0 &&
			    !(v >> 62))
				total += (uint64_t)v;
		}
		s = nl ? nl + 1 : end;
	}
	return total;
}

/* Up to cap - 1 bytes of root/name/file, NUL-ended; the length or -1. */
static ssize_t read_small(const char *root, const char *name, const char *file,
			  char *buf, size_t cap)
{
	char path[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s/%s", root, name, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* Add the process root/name to out[] when it belongs to a worker's tree;
 * its parent in *ppid. Returns 1 when it counted, 0 when not, -1 when its
 * stat is not there or does not parse. */
static int scan_one(const char *root, const char *name, const pid_t *pgids,
		    size_t n, struct progress_sample *out, pid_t *ppid)
{
	char buf[1024];
	const char *p;
	pid_t pg, sid;
	uint64_t ticks;
	ssize_t len;
	size_t i;

	len = read_small(root, name, "stat", buf, sizeof(buf));
	if (len <= 0 ||
	    progress_parse_stat(buf, (size_t)len, &pg, &sid, &ticks))
		return -1;
	p = strrchr(buf, ')');
	*ppid = p ? (pid_t)strtol(p + 3, NULL, 10) : 0;
	for (i = 0; i < n; i++)
		if (pgids[i] > 0 && (pg == pgids[i] || sid == pgids[i]))
			break;
	if (i == n)
		return 0;
	out[i].cpu_ticks += ticks;
	out[i].nproc++;
	len = read_small(root, name, "io", buf, sizeof(buf));
	if (len > 0)
		out[i].io_bytes += progress_parse_io(buf, (size_t)len);
	return 1;
}

/* Every process of root, read once (the kernel has no children files). */
static int scan_all(const char *root, const pid_t *pgids, size_t n,
		    struct progress_sample *out)
{
	DIR *d = opendir(root);
	struct dirent *e;
	int matched = 0, seen = 0;
	pid_t ppid;

	if (d == NULL)
		return -errno;
	while ((e = readdir(d)) != NULL && seen++ < PROGRESS_MAX_PROCS) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		if (scan_one(root, e->d_name, pgids, n, out, &ppid) == 1)
			matched++;
	}
	closedir(d);
	return matched;
}

/*
 * Append pid's children (every thread's root/PID/task/TID/children) to
 * q[*len..cap). Returns 0, or -1 when the kernel has no children files
 * (built without CONFIG_PROC_CHILDREN).
 */
static int add_children(const char *root, pid_t pid, pid_t *q, size_t *len,
			size_t cap)
{
	char dir[512], buf[4096];
	struct dirent *e;
	int any = 0, none = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%d/task", root, (int)pid);
	d = opendir(dir);
	if (d == NULL)
		return 0; /* gone since: no children to find */
	while ((e = readdir(d)) != NULL) {
		ssize_t n;
		long v = 0;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		n = read_small(dir, e->d_name, "children", buf, sizeof(buf));
		if (n < 0) {
			none |= errno == ENOENT;
			continue;
		}
		any = 1;
		for (ssize_t i = 0; i <= n; i++) {
			if (i < n && buf[i] >= '0' && buf[i] <= '9') {
				if (v < INT32_MAX / 10)
					v = v * 10 + (buf[i] - '0');
				continue;
			}
			if (v > 0 && *len < cap)
				q[(*len)++] = (pid_t)v;
			v = 0;
		}
	}
	closedir(d);
	return any || !none ? 0 : -1;
}

int progress_scan(const char *root, const pid_t *pgids, size_t n,
		  struct progress_sample *out)
{
	pid_t *q = NULL;
	size_t len = 0;
	int matched = 0;

	memset(out, 0, n * sizeof(*out));
	if (access(root, R_OK | X_OK))
		return -errno;
	/*
	 * Only the workers' own trees are read: the processes reachable from
	 * each worker's parent (its guard, proc.h, to which descendants
	 * orphaned inside the tree are handed), through the children files.
	 * A kernel without them leaves only the whole of root to read.
	 */
	q = malloc(PROGRESS_MAX_PROCS * sizeof(*q));
	if (q == NULL)
		return scan_all(root, pgids, n, out);
	for (size_t i = 0; i < n; i++) {
		char name[24];
		pid_t ppid = 0, self = getpid();
		size_t j;

		if (pgids[i] <= 0 || len >= PROGRESS_MAX_PROCS)
			continue;
		snprintf(name, sizeof(name), "%d", (int)pgids[i]);
		/* The worker's parent roots the walk unless it is us (no
		 * guard) or init, or an earlier worker's walk has it. */
		if (scan_one(root, name, NULL, 0, out, &ppid) || ppid <= 1 ||
		    ppid == self)
			ppid = pgids[i];
		for (j = 0; j < len && q[j] != ppid; j++)
			;
		if (j == len)
			q[len++] = ppid;
	}
	for (size_t k = 0; k < len; k++) {
		char name[24];
		pid_t ppid;

		if (add_children(root, q[k], q, &len, PROGRESS_MAX_PROCS)) {
			free(q);
			memset(out, 0, n * sizeof(*out));
			return scan_all(root, pgids, n, out);
		}
		snprintf(name, sizeof(name), "%d", (int)q[k]);
		if (scan_one(root, name, pgids, n, out, &ppid) == 1)
			matched++;
	}
	free(q);
	return matched;
}

int progress_note(struct progress_rank *r, const struct progress_sample *s,
		  uint64_t now_ms, uint64_t elapsed_ms, long hz)
{
	int moved = 0;

	if (elapsed_ms == 0)
		elapsed_ms = 1;
	if (hz <= 0)
		hz = 100;
	if (!r->seen || s->nproc != r->last.nproc ||
	    s->cpu_ticks < r->last.cpu_ticks || s->io_bytes < r->last.io_bytes)
		moved = 1; /* the first look, or the tree changed */
	else {
		uint64_t cpu_ms =
		    (s->cpu_ticks - r->last.cpu_ticks) * 1000 / (uint64_t)hz;
		uint64_t io = s->io_bytes - r->last.io_bytes;

		moved = cpu_ms * 1000 >= PROGRESS_CPU_MS_PER_S * elapsed_ms ||
			io * 1000 >= PROGRESS_IO_BYTES_PER_S * elapsed_ms;
	}
	r->last = *s;
	r->seen = 1;
	if (moved)
		r->since_ms = now_ms;
	return moved;
}

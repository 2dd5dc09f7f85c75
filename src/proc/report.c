/*
 * Failure reports (see report.h). Error files are parsed with jansson; the
 * printed block follows torchrun's ChildFailedError layout so people who know
 * it read it at once, with two additions torchrun lacks: the signal's name
 * and, when no error file exists, the tail of the worker's stderr.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crun/cfg.h"
#include "crun/err.h"
#include "crun/report.h"

void failure_release(struct crun_failure *f)
{
	free(f->error_file);
	free(f->message);
	free(f->traceback);
	free(f->stacks);
	f->error_file = f->message = f->traceback = f->stacks = NULL;
}

static char *dup_str(json_t *j)
{
	return json_is_string(j) ? strdup(json_string_value(j)) : NULL;
}

int failure_read_error_file(struct crun_failure *f, const char *path)
{
	json_error_t jerr;
	json_t *root, *msg, *ts = NULL;

	root = json_load_file(path, 0, &jerr);
	if (root == NULL)
		return CRUN_ENOTFOUND;
	msg = json_object_get(root, "message");
	if (json_is_object(msg)) {
		json_t *extra = json_object_get(msg, "extraInfo");

		f->message = dup_str(json_object_get(msg, "message"));
		if (json_is_object(extra)) {
			f->traceback =
			    dup_str(json_object_get(extra, "py_callstack"));
			ts = json_object_get(extra, "timestamp");
		}
	} else if (json_is_string(msg)) {
		f->message = dup_str(msg);
		ts = json_object_get(root, "timestamp");
	} else {
		json_decref(root);
		return CRUN_EPROTO;
	}
	if (json_is_string(ts))
		f->time = strtod(json_string_value(ts), NULL);
	else if (json_is_number(ts))
		f->time = json_number_value(ts);
	free(f->error_file);
	f->error_file = strdup(path);
	json_decref(root);
	return 0;
}

int report_root(const struct crun_failure *f, int n)
{
	int root = 0;

	for (int i = 1; i < n; i++)
		if (f[i].time < f[root].time)
			root = i;
	return root;
}

static void rule(FILE *fp, char c, int w)
{
	for (int i = 0; i < w; i++)
		fputc(c, fp);
	fputc('\n', fp);
}

/* Print text with every line indented. */
static void indented(FILE *fp, const char *text, const char *indent)
{
	const char *p = text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		fprintf(fp, "%s%.*s\n", indent, (int)n, p);
		p += n + (nl ? 1 : 0);
	}
}

static void entry(FILE *fp, int idx, const struct crun_failure *f)
{
	char when[32];
	time_t t = (time_t)f->time;
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d_%H:%M:%S", &tm);
	fprintf(fp, "[%d]:\n", idx);
	fprintf(fp, "  time      : %s\n", when);
	fprintf(fp, "  host      : %s\n", f->host);
	fprintf(fp, "  rank      : %d (local_rank: %d)\n", f->rank,
		f->local_rank);
	if (f->signal)
		fprintf(fp, "  exitcode  : %d (pid: %d, signal %d: %s)\n",
			f->exitcode, (int)f->pid, f->signal,
			cfg_signame(f->signal));
	else
		fprintf(fp, "  exitcode  : %d (pid: %d)\n", f->exitcode,
			(int)f->pid);
	fprintf(fp, "  error_file: %s\n",
		f->error_file ? f->error_file : "<N/A>");
	if (f->message)
		fprintf(fp, "  message   : %s\n", f->message);
	if (f->traceback) {
		fprintf(fp, "  traceback : %s\n",
			f->error_file ? "" : "(last lines of stderr)");
		indented(fp, f->traceback, "    ");
	} else if (!f->message) {
		fprintf(fp,
			"  traceback : <no error file and no stderr output>\n");
	}
	if (f->stacks) {
		fprintf(fp, "  stacks    : (taken before SIGKILL)\n");
		indented(fp, f->stacks, "    ");
	}
}

void report_print(FILE *fp, const char *entrypoint,
		  const struct crun_failure *f, int n)
{
	int root = report_root(f, n), w = 60, others = 0;

	rule(fp, '=', w);
	fprintf(fp, "%s FAILED\n", entrypoint);
	rule(fp, '-', w);
	fprintf(fp, "Failures:\n");
	for (int i = 0; i < n; i++) {
		if (i == root)
			continue;
		entry(fp, ++others, &f[i]);
	}
	if (others == 0)
		fprintf(fp, "  <NO_OTHER_FAILURES>\n");
	rule(fp, '-', w);
	fprintf(fp, "Root Cause (first observed failure):\n");
	entry(fp, 0, &f[root]);
	rule(fp, '=', w);
	fflush(fp);
}

/*
 * A JSON string for s. jansson refuses invalid UTF-8, and a stderr tail is
 * arbitrary bytes, so each byte that does not start a valid sequence becomes
 * '?' rather than the whole field silently going missing.
 */
static json_t *json_text(const char *s)
{
	json_t *j = json_string(s), *t;
	char *copy;
	size_t i, n;

	if (j != NULL || (copy = strdup(s)) == NULL)
		return j;
	for (i = 0; copy[i]; i += n) {
		unsigned char c = (unsigned char)copy[i];

		n = c < 0x80	   ? 1
		    : c >> 5 == 6  ? 2
		    : c >> 4 == 14 ? 3
		    : c >> 3 == 30 ? 4
				   : 0;
		for (size_t k = 1; k < n; k++)
			if (((unsigned char)copy[i + k] & 0xC0) != 0x80)
				n = 0;
		if (n > 1 && (t = json_stringn(copy + i, n)) != NULL) {
			json_decref(t);
			continue;
		}
		if (n != 1) {
			copy[i] = '?';
			n = 1;
		}
	}
	j = json_string(copy);
	free(copy);
	return j;
}

int report_write_json(const char *path, const char *entrypoint,
		      const struct crun_failure *f, int n)
{
	json_t *root = json_object(), *arr = json_array();
	int rc;

	for (int i = 0; i < n; i++) {
		json_t *o = json_pack(
		    "{s:i, s:i, s:i, s:i, s:o, s:i, s:i, s:f}", "rank",
		    f[i].rank, "local_rank", f[i].local_rank, "group_rank",
		    f[i].group_rank, "pid", (int)f[i].pid, "host",
		    json_text(f[i].host), "exitcode", f[i].exitcode, "signal",
		    f[i].signal, "time", f[i].time);

		if (f[i].signal)
			json_object_set_new(
			    o, "signal_name",
			    json_string(cfg_signame(f[i].signal)));
		json_object_set_new(o, "error_file",
				    f[i].error_file ? json_text(f[i].error_file)
						    : json_null());
		json_object_set_new(o, "message",
				    f[i].message ? json_text(f[i].message)
						 : json_null());
		json_object_set_new(o, "traceback",
				    f[i].traceback ? json_text(f[i].traceback)
						   : json_null());
		json_object_set_new(o, "stacks",
				    f[i].stacks ? json_text(f[i].stacks)
						: json_null());
		json_array_append_new(arr, o);
	}
	json_object_set_new(root, "entrypoint", json_text(entrypoint));
	json_object_set_new(root, "root_cause",
			    json_integer(report_root(f, n)));
	json_object_set_new(root, "failures", arr);
	rc = json_dump_file(root, path, JSON_INDENT(2)) ? CRUN_EPROTO : 0;
	json_decref(root);
	return rc;
}

int report_write_error_file(const char *path, const struct crun_failure *root,
			    const char *why, int code)
{
	json_t *doc = NULL, *msg;
	char tmp[4096], ts[32];
	int rc;

	if (root && root->error_file)
		doc = json_load_file(root->error_file, 0, NULL);
	msg = doc ? json_object_get(doc, "message") : NULL;
	if (json_is_object(msg)) {
		/* As torchrun: the child's file, its exit code overriding. */
		json_object_set_new(msg, "errorCode", json_integer(code));
	} else {
		json_decref(doc);
		snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
		doc = json_pack(
		    "{s:{s:o, s:{s:o, s:s}, s:i}}", "message", "message",
		    json_text(why), "extraInfo", "py_callstack",
		    json_text(root && root->traceback ? root->traceback
						      : "<N/A>"),
		    "timestamp", ts, "errorCode", code);
	}
	if (doc == NULL)
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), "%s.crun-tmp", path);
	rc = json_dump_file(doc, tmp, 0) ? CRUN_EPROTO : 0;
	if (rc == 0 && rename(tmp, path) != 0) {
		remove(tmp);
		rc = CRUN_EPROTO;
	}
	json_decref(doc);
	return rc;
}

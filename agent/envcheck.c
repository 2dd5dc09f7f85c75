/*
 * --env_check in the agent (see envcheck.h). Workers without an interpreter
 * leave only the driver to read, from the kernel's /proc or /sys: at once.
 * Otherwise the fingerprint is computed on a thread of its own while the
 * agent opens the rendezvous store, so it is normally ready before the
 * descriptor is written; the rendezvous waits for
 * it at most --env_check_timeout. Failure modes: a fingerprint that comes
 * too late is used from the next round on; a read that never ends (a hung
 * mount on the workers' python path) is abandoned with one line, and one
 * still pending when the rendezvous goes is abandoned silently, so neither
 * holds the agent; none of this stops the job except env_check=strict,
 * which the closer of the round enforces.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/log.h"
#include "envcheck.h"

static void envcheck_on_ready(const struct crun_fingerprint *fp, int status,
			      void *data)
{
	struct envcheck *ec = data;
	char text[FP_MAX_TEXT + 1];

	ec->read = NULL;
	if (status == UV_ETIMEDOUT)
		log_say("env check: reading the fingerprint of '%s' did not "
			"end within %.1f s: going without it",
			ec->python ? ec->python : "the driver",
			ec->abandon_after);
	ec->fp = *fp;
	ec->state = 2;
	fingerprint_format(&ec->fp, text, sizeof(text));
	if (ec->rdzv)
		rdzv_set_fingerprint(ec->rdzv, text);
}

void envcheck_start(struct envcheck *ec, uv_loop_t *loop,
		    const struct crun_cfg *cfg)
{
	double t = cfg->env_check_timeout;

	memset(ec, 0, sizeof(*ec));
	if (cfg->env_check == CRUN_ENV_CHECK_OFF)
		return;
	/* The driver alone, from the kernel's /proc or /sys: at once. */
	if (fingerprint_now(cfg->python, &ec->fp) == 0) {
		ec->state = 2;
		return;
	}
	/* The interpreter gets at least a second: a late answer still
	 * serves the next rounds. The driver's files moved (CRUN_NVIDIA_PROC,
	 * CRUN_SYSFS) may lie on any mount: off the loop too. */
	t = t > 1 ? t : 1;
	if (t > 3600)
		t = 3600;
	ec->python = cfg->python;
	ec->abandon_after = t + FP_ABANDON_AFTER_MS / 1000.0;
	if (fingerprint_start(loop, cfg->python, (int)(t * 1000),
			      envcheck_on_ready, ec, &ec->read) == 0)
		ec->state = 1;
}

double envcheck_wait(const struct envcheck *ec, const struct crun_cfg *cfg)
{
	return ec->state == 1 ? cfg->env_check_timeout : 0;
}

void envcheck_attach(struct envcheck *ec, struct crun_rdzv *r)
{
	char text[FP_MAX_TEXT + 1];

	ec->rdzv = r;
	if (r == NULL && ec->read) /* going: nothing waits for it now */
		fingerprint_cancel(ec->read);
	if (r && ec->state == 2) {
		fingerprint_format(&ec->fp, text, sizeof(text));
		rdzv_set_fingerprint(r, text);
	}
}

void envcheck_report(struct events *ev, struct crun_rdzv *r,
		     const struct rdzv_result *res, int mode)
{
	json_t *lines;

	if (res == NULL) {
		if (!rdzv_env_refused(r))
			return;
		events_emit(ev, "crun.env_check",
			    json_pack("{s:s, s:b, s:[s]}", "mode", "strict",
				      "refused", 1, "differences",
				      rdzv_errmsg(r)));
		return;
	}
	if (res->env_diff == NULL || *res->env_diff == '\0')
		return;
	lines = json_array();
	for (const char *p = res->env_diff; *p;) {
		size_t n = strcspn(p, "\n");

		log_say("%.*s", (int)n, p);
		json_array_append_new(lines, json_stringn(p, n));
		p += n + (p[n] == '\n');
	}
	events_emit(ev, "crun.env_check",
		    json_pack("{s:s, s:b, s:o}", "mode",
			      mode == CRUN_ENV_CHECK_STRICT ? "strict" : "warn",
			      "refused", 0, "differences", lines));
}

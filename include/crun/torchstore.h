/*
 * Which workers' store a Python interpreter's torch accepts.
 *
 * With TORCHELASTIC_USE_AGENT_STORE=True, torch.distributed's
 * _create_c10d_store builds every worker's TCPStore client without passing
 * use_libuv, so the constructor's default (True since PyTorch 2.4) applies;
 * a build without libuv (Windows wheels, Debian 13's python3-torch) refuses
 * it, client or server: "use_libuv was requested but PyTorch was build
 * without libuv support". With the variable False, only worker rank 0 hosts
 * a server and every client takes use_libuv from USE_LIBUV, which such a
 * build accepts as 0.
 *
 * The answer comes from the interpreter itself (TORCHSTORE_PROBE: torch's
 * own _create_c10d_store against a server of its own, on loopback), once,
 * and is kept in a cache file keyed by the interpreter's path and
 * PYTHONPATH and checked against the interpreter's and torch's files on
 * every use, so a changed torch is asked again. The probe's process is the
 * caller's to run (agent/torchprobe.c runs it on the loop).
 */
#ifndef CRUN_TORCHSTORE_H
#define CRUN_TORCHSTORE_H

#include <stddef.h>

enum torchstore_kind {
	TORCHSTORE_UNKNOWN = 0,	  /* no answer: keep the agent store */
	TORCHSTORE_AGENT,	  /* the agent store's client is accepted */
	TORCHSTORE_NO_LIBUV,	  /* refused: a build without libuv */
	TORCHSTORE_NO_DIST,	  /* no torch.distributed at all */
	TORCHSTORE_NO_AGENT_STORE /* older than the agent store (before 1.9):
				     worker rank 0 always hosts the store */
};

struct torchstore {
	enum torchstore_kind kind;
	char torch_dir[1024]; /* where the probe found torch, "" if not */
	char why[256];	      /* the probe's error, for UNKNOWN */
};

/** The Python program of the probe (`python -c TORCHSTORE_PROBE`). */
extern const char TORCHSTORE_PROBE[];

/** Most bytes of the probe's output that torchstore_parse reads. */
#define TORCHSTORE_MAX_OUTPUT 4096

/**
 * Read the probe's output (len bytes, need not be NUL-terminated) into
 * *out. Never fails: what it cannot read is TORCHSTORE_UNKNOWN with why.
 */
void torchstore_parse(const char *p, size_t len, struct torchstore *out);

/** "agent", "no-libuv", "no-distributed", "no-agent-store" or "unknown". */
const char *torchstore_kind_name(enum torchstore_kind k);

/**
 * The cache file for interpreter python under PYTHONPATH pypath (NULL:
 * unset) in dir:
 * path (of len bytes) is set. 0, or -1 when it does not fit.
 */
int torchstore_cache_path(const char *dir, const char *python,
			  const char *pypath, char *path, size_t len);

/**
 * Load the answer cached at path for python (pypath as above): 0 when the
 * file is ours, well formed, names this interpreter and PYTHONPATH, and the
 * interpreter's and torch's files are unchanged since; else -1 and *out is
 * TORCHSTORE_UNKNOWN. Blocking (a stat or three and one small read).
 */
int torchstore_cache_load(const char *path, const char *python,
			  const char *pypath, struct torchstore *out);

/**
 * Keep a definite answer (any but UNKNOWN) at path, written to a
 * temporary file and renamed. 0, or a negative errno (nothing kept).
 */
int torchstore_cache_save(const char *path, const char *python,
			  const char *pypath, const struct torchstore *ts);

#endif

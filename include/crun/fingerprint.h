/*
 * A node's fingerprint: the versions that must match across the nodes of a
 * job for NCCL to work, read without loading any of them (no CUDA, no
 * torch import):
 *
 *   driver  the NVIDIA kernel driver: /proc/driver/nvidia/version, else
 *           /sys/module/nvidia/version (CRUN_NVIDIA_PROC's parent directory
 *           and CRUN_SYSFS move the roots, for tests, as in gpu.h)
 *   torch   torch/version.py's __version__ (else the dist-info METADATA or
 *           egg-info PKG-INFO "Version:") of the first torch package along
 *           the workers' interpreter's path: PYTHONPATH, a venv's
 *           site-packages, the user site, the prefix's site- and
 *           dist-packages (derived from the interpreter's real name
 *           "pythonX.Y"; only when torch is not there is the interpreter
 *           run, with -S, to print its sys.path and site directories)
 *   cuda    torch/version.py's cuda (None: a CPU build, shown "-")
 *   nccl    the first nvidia-nccl-* dist-info METADATA "Version:" along the
 *           same path, else the "NCCL version X" string of a bundled
 *           libnccl (nvidia/nccl/lib, torch/lib)
 *
 * Each value is "" (unknown: not looked for, or not ready in time), "-"
 * (looked for, absent) or 1..FP_MAX_VALUE bytes of [A-Za-z0-9._+~-]. On the
 * wire (the rendezvous descriptor) it is one blank-free field
 * "driver:535.104.05,torch:2.1.0+cu121,cuda:12.1,nccl:2.18.1" holding the
 * known items only.
 */
#ifndef CRUN_FINGERPRINT_H
#define CRUN_FINGERPRINT_H

#include <stddef.h>
#include <uv.h>

enum { FP_DRIVER, FP_TORCH, FP_CUDA, FP_NCCL, FP_NITEMS };

/* Longest value of one item. */
#define FP_MAX_VALUE 63
/* Longest formatted fingerprint (every item at its longest). */
#define FP_MAX_TEXT (FP_NITEMS * (FP_MAX_VALUE + 8))

/* --env_check: what the node that closes a round does with differences. */
enum { CRUN_ENV_CHECK_OFF, CRUN_ENV_CHECK_WARN, CRUN_ENV_CHECK_STRICT };

struct crun_fingerprint {
	char v[FP_NITEMS][FP_MAX_VALUE + 1];
};

/** The item's wire name ("driver", "torch", "cuda", "nccl"). */
const char *fingerprint_item_name(int item);

/** Format the known items as the wire field (maybe ""). */
void fingerprint_format(const struct crun_fingerprint *fp, char *buf,
			size_t len);

/**
 * Parse a wire field of len bytes (untrusted: from the store). 0, or
 * CRUN_EPROTO with why naming the item and what is wrong: an unknown or
 * repeated item, a value too long or with a byte outside the set, a field
 * longer than FP_MAX_TEXT.
 */
int fingerprint_parse(const char *p, size_t len, struct crun_fingerprint *fp,
		      char *why, size_t wlen);

/**
 * Compare the fingerprints of n nodes named hosts[]: for each item on which
 * two nodes with a known value differ, append one line (ended by '\n') to
 * out, "nodes differ in <what>: <value> on <host> <host>; <value> on
 * <host>", at most 4 hosts named per value and every line under 1 KiB.
 * Returns the number of lines; out is always NUL-terminated.
 */
int fingerprint_compare(const char *const *hosts,
			const struct crun_fingerprint *fps, int n, char *out,
			size_t len);

/* --- reading the versions (pure parsers, exposed for unit tests) --------- */

/** The driver version in /proc/driver/nvidia/version or sysfs text. */
int fingerprint_parse_driver(const char *text, char *out, size_t len);

/**
 * torch/version.py: __version__ into version and cuda into cuda ("-" for
 * None). 0 when __version__ was found.
 */
int fingerprint_parse_version_py(const char *text, char *version, size_t vlen,
				 char *cuda, size_t clen);

/** The "Version:" header of a METADATA or PKG-INFO file. */
int fingerprint_parse_metadata(const char *text, char *out, size_t len);

/** The version after "NCCL version " in bytes (a library's contents). */
int fingerprint_scan_nccl(const char *p, size_t len, char *out, size_t olen);

/**
 * Fill *fp for this node, blocking (run it off the loop): the driver, and
 * when python is not NULL the torch, cuda and nccl items of that
 * interpreter (which is run once, with -S, to print its path; killed after
 * timeout_ms). envp is the workers' environment (PYTHONPATH, the roots).
 */
void fingerprint_collect(const char *python, char **envp, int timeout_ms,
			 struct crun_fingerprint *fp);

/**
 * Fill *fp at once when nothing slow is to be read: no interpreter, and the
 * driver's files are the kernel's own (/proc, /sys: no root moved). 0, or -1
 * (nothing done) when the read belongs off the loop (fingerprint_start).
 */
int fingerprint_now(const char *python, struct crun_fingerprint *fp);

struct crun_fp_read;

/* A read still running this long after its timeout is abandoned. */
#define FP_ABANDON_AFTER_MS 1000

/**
 * Called on the loop with the fingerprint (valid during the call) and a
 * status: 0; UV_ETIMEDOUT when the read had not ended timeout_ms plus
 * FP_ABANDON_AFTER_MS after it started (it is abandoned: a hung file system);
 * or CRUN_ECANCELED (fingerprint_cancel). fp is empty unless status is 0.
 */
typedef void (*fingerprint_cb)(const struct crun_fingerprint *fp, int status,
			       void *data);

/**
 * fingerprint_collect on a thread of its own. The environment is copied
 * before this returns. Returns 0 with *out set (valid until cb runs), and cb
 * runs exactly once on the loop; or an error, and cb never runs. The loop
 * waits for the read at most until its deadline; a thread that never comes
 * back (blocked in the kernel) holds nothing of the caller's.
 */
int fingerprint_start(uv_loop_t *loop, const char *python, int timeout_ms,
		      fingerprint_cb cb, void *data, struct crun_fp_read **out);

/** Abandon a pending read: cb runs now with CRUN_ECANCELED. */
void fingerprint_cancel(struct crun_fp_read *r);

#endif

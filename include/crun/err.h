/*
 * crun's error vocabulary. Every function returns 0 or a negative code. libuv
 * codes (which are -errno on Unix) pass through unchanged; crun's own codes sit
 * below -4096, outside errno's range, so the two never collide.
 */
#ifndef CRUN_ERR_H
#define CRUN_ERR_H

#define CRUN_ERRNO_MAP(X)                                                      \
	X(EUSAGE, -5001, "invalid usage")                                      \
	X(ECONFIG, -5002, "invalid configuration")                             \
	X(EPROTO, -5003, "protocol error")                                     \
	X(ETOOBIG, -5004, "limit exceeded")                                    \
	X(ECLOSED, -5005, "closed")                                            \
	X(ECANCELED, -5006, "operation canceled")                              \
	X(ETIMEDOUT, -5007, "timed out")                                       \
	X(ERDZV_TIMEOUT, -5008, "rendezvous timed out")                        \
	X(ERDZV_CLOSED, -5009, "rendezvous closed")                            \
	X(ERDZV_MISMATCH, -5010, "rendezvous configuration mismatch")          \
	X(EWORKER, -5011, "worker failed")                                     \
	X(ENOTFOUND, -5012, "not found")                                       \
	X(EADDRINUSE_OTHER, -5013, "address in use by another program")        \
	X(EREFUSED, -5014, "connection refused until the timeout")             \
	X(EETCD, -5040, "etcd request failed")                                 \
	X(ECPUBIND, -5140, "the kernel refused the cpu binding")               \
	X(EMEMBIND, -5141, "the kernel refused the memory policy")             \
	X(EAUTH, -5091, "authentication failed")                               \
	X(ERDZV_LEFT_OUT, -5095, "the job finished without this node")

enum crun_errno {
#define X(name, val, msg) CRUN_##name = (val),
	CRUN_ERRNO_MAP(X)
#undef X
};

/** Text for any code: crun's own, libuv's, or a negative errno. */
const char *crun_strerror(int err);

/** Symbolic name ("CRUN_EPROTO", "ECONNREFUSED") for any code. */
const char *crun_err_name(int err);

#endif

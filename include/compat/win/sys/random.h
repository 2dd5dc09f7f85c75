/* <sys/random.h> on Windows: getrandom(2) over libuv's uv_random, which
 * asks the system's generator (RtlGenRandom). */
#ifndef CRUN_COMPAT_RANDOM_H
#define CRUN_COMPAT_RANDOM_H
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>
#define GRND_NONBLOCK 1
static inline ssize_t getrandom(void *buf, size_t len, unsigned flags)
{
	(void)flags;
	return uv_random(NULL, NULL, buf, len, 0, NULL) == 0 ? (ssize_t)len
							      : -1;
}
#endif

/* <sys/resource.h> on Windows: no descriptor or core limit to set (a
 * process may hold millions of handles, and writes no core): the calls
 * fail, so callers keep what they have. */
#ifndef CRUN_COMPAT_RESOURCE_H
#define CRUN_COMPAT_RESOURCE_H
#include <errno.h>
#define RLIMIT_NOFILE 7
#define RLIMIT_CORE 4
#define RLIM_INFINITY (~0ULL)
typedef unsigned long long rlim_t;
struct rlimit {
	rlim_t rlim_cur, rlim_max;
};
static inline int getrlimit(int what, struct rlimit *rl)
{
	(void)what;
	(void)rl;
	errno = ENOSYS;
	return -1;
}
static inline int setrlimit(int what, const struct rlimit *rl)
{
	(void)what;
	(void)rl;
	errno = ENOSYS;
	return -1;
}
static inline int prlimit(int pid, int what, const struct rlimit *rl,
			  struct rlimit *old)
{
	(void)pid;
	(void)what;
	(void)rl;
	(void)old;
	errno = ENOSYS;
	return -1;
}
#endif

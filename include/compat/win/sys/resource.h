/* <sys/resource.h> on Windows: no descriptor limit to raise (a process
 * may hold millions of handles); getrlimit fails, so callers keep theirs. */
#ifndef CRUN_COMPAT_RESOURCE_H
#define CRUN_COMPAT_RESOURCE_H
#include <errno.h>
#define RLIMIT_NOFILE 7
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
#endif

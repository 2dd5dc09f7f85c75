/*
 * What Windows lacks of what crun's portable files use (git's
 * compat/mingw.h, in small), put first in every unit of the Windows build
 * (scripts/windows.sh; include/compat/win/ also holds the POSIX socket
 * headers that mingw-w64 has not, each naming Winsock's). The signals
 * Windows has not get Linux's numbers, so that option parsing and messages
 * read the same; the Windows process layer (src/proc/proc_win.c) says
 * what each does there.
 */
#ifndef CRUN_COMPAT_WIN_H
#define CRUN_COMPAT_WIN_H

#include <winsock2.h>
#include <ws2tcpip.h>
#include <fcntl.h>
#include <signal.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC O_NOINHERIT
#endif
#ifndef O_NOCTTY
#define O_NOCTTY 0
#endif
#ifndef O_NONBLOCK
#define O_NONBLOCK 0
#endif
/* (Winsock's handles are not inherited by the programs crun starts.) */
#define SOCK_CLOEXEC 0

#ifndef SIGHUP
#define SIGHUP 1
#endif
#ifndef SIGQUIT
#define SIGQUIT 3
#endif
#ifndef SIGTRAP
#define SIGTRAP 5
#endif
#ifndef SIGBUS
#define SIGBUS 7
#endif
#ifndef SIGKILL
#define SIGKILL 9
#endif
#ifndef SIGUSR1
#define SIGUSR1 10
#endif
#ifndef SIGUSR2
#define SIGUSR2 12
#endif
#ifndef SIGPIPE
#define SIGPIPE 13
#endif
#ifndef SIGALRM
#define SIGALRM 14
#endif
#ifndef SIGCHLD
#define SIGCHLD 17
#endif
#ifndef SIGCONT
#define SIGCONT 18
#endif
#ifndef SIGSTOP
#define SIGSTOP 19
#endif
#ifndef SIGTSTP
#define SIGTSTP 20
#endif
#ifndef SIGXCPU
#define SIGXCPU 24
#endif
#ifndef SIGWINCH
#define SIGWINCH 28
#endif
#ifndef SIGPWR
#define SIGPWR 30
#endif
#ifndef SIGSYS
#define SIGSYS 31
#endif

/* Two GNU and POSIX calls mingw-w64 has not: the last c in s[0..n), and
 * reading a symbolic link (the /proc links crun reads on Linux are not
 * there: "no such link"). */
#include <errno.h>
#include <stddef.h>
#include <sys/types.h>
static inline void *memrchr(const void *s, int c, size_t n)
{
	const unsigned char *p = (const unsigned char *)s + n;

	while (n-- > 0)
		if (*--p == (unsigned char)c)
			return (void *)p;
	return NULL;
}
static inline ssize_t readlink(const char *path, char *buf, size_t len)
{
	(void)path;
	(void)buf;
	(void)len;
	errno = ENOENT;
	return -1;
}

/* The absolute form of a path (Windows has no symbolic links to follow in
 * the paths crun resolves). */
#include <limits.h>
#include <stdlib.h>
#define realpath(path, resolved) _fullpath((resolved), (path), PATH_MAX)

/* getaddrinfo's errors are Winsock's there: never this one. */
#ifndef EAI_SYSTEM
#define EAI_SYSTEM (-11)
#endif

/*
 * Windows' C runtime knows only its own signals; a handler for one it does
 * not know (SIGPIPE, SIGHUP...) is refused. Those never come on Windows (a
 * send to a closed socket is an error there), so there is nothing to set.
 */
static inline void (*crun_win_signal(int sig, void (*h)(int)))(int)
{
	if (sig != SIGINT && sig != SIGTERM && sig != SIGBREAK &&
	    sig != SIGABRT && sig != SIGFPE && sig != SIGILL && sig != SIGSEGV)
		return SIG_ERR;
	return signal(sig, h);
}
#define signal(sig, h) crun_win_signal((sig), (h))

#endif

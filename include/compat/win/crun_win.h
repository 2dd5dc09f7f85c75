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
static inline ssize_t readlinkat(int dir, const char *path, char *buf,
				 size_t len)
{
	(void)dir;
	return readlink(path, buf, len);
}
#define dirfd(d) ((void)(d), -1)

/* The absolute form of a path (Windows has no symbolic links to follow in
 * the paths crun resolves). */
#include <limits.h>
#include <stdlib.h>
#define realpath(path, resolved) _fullpath((resolved), (path), PATH_MAX)

/* POSIX calls with a clear meaning on Windows, as small wrappers. */
#include <direct.h>
#include <io.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#ifndef O_NOFOLLOW
#define O_NOFOLLOW 0
#endif
/* No execute bit: a file that is there may be run (the C runtime refuses
 * mode 1). */
#undef X_OK
#define X_OK 0
#ifndef PIPE_BUF
#define PIPE_BUF 512
#endif
typedef int uid_t;
/* No user ids: the private folders crun makes are in the user's profile. */
static inline uid_t geteuid(void)
{
	return 0;
}
/* (one argument there: a new folder's access is its parent's ACL) */
#define mkdir(path, mode) mkdir(path)
#define lstat(path, st) stat((path), (st))
/* No descriptor flags to read or set (a pipe there is blocking or
 * overlapped from its birth): callers keep what they have. */
#define F_GETFL 3
#define F_SETFL 4
static inline int fcntl(int fd, int cmd, ...)
{
	(void)fd;
	(void)cmd;
	errno = ENOSYS;
	return -1;
}
#ifndef S_ISSOCK
#define S_ISSOCK(m) 0
#endif
/* Wait for a signal: there, until the process is ended. */
static inline int pause(void)
{
	Sleep(INFINITE);
	return -1;
}
/* (only to compile: the watchdog that makes FIFOs refuses before) */
static inline int mkfifo(const char *path, int mode)
{
	(void)path;
	(void)mode;
	errno = ENOSYS;
	return -1;
}
static inline int setenv(const char *name, const char *value, int overwrite)
{
	if (!overwrite && getenv(name) != NULL)
		return 0;
	return _putenv_s(name, value) == 0 ? 0 : -1;
}
static inline int unsetenv(const char *name)
{
	return _putenv_s(name, "") == 0 ? 0 : -1;
}
/* No process groups: a process is its own. */
static inline pid_t getpgid(pid_t pid)
{
	return pid == 0 ? (pid_t)uv_os_getpid() : pid;
}
/* A signal to one process (libuv's: SIGTERM, SIGKILL and SIGINT end it, 0
 * asks whether it lives); a process group (pid < 0) is not there. */
static inline int kill(pid_t pid, int sig)
{
	int rc;

	if (pid <= 0) {
		errno = ESRCH;
		return -1;
	}
	rc = uv_kill((int)pid, sig);
	if (rc != 0) {
		errno = rc == UV_ESRCH ? ESRCH : EINVAL;
		return -1;
	}
	return 0;
}
#define _SC_NPROCESSORS_ONLN 84
#define _SC_CLK_TCK 2
static inline long sysconf(int name)
{
	if (name == _SC_NPROCESSORS_ONLN)
		return (long)uv_available_parallelism();
	if (name == _SC_CLK_TCK)
		return 100;
	errno = EINVAL;
	return -1;
}
/* A new folder named tmpl, its XXXXXX replaced. */
static inline char *mkdtemp(char *tmpl)
{
	size_t n = strlen(tmpl);
	unsigned char r[6];

	if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX") != 0) {
		errno = EINVAL;
		return NULL;
	}
	for (int tries = 0; tries < 100; tries++) {
		if (uv_random(NULL, NULL, r, sizeof(r), 0, NULL) != 0)
			return NULL;
		for (int i = 0; i < 6; i++)
			tmpl[n - 6 + i] =
			    "abcdefghijklmnopqrstuvwxyz0123456789"[r[i] % 36];
		if (_mkdir(tmpl) == 0)
			return tmpl;
		if (errno != EEXIST)
			return NULL;
	}
	return NULL;
}
/* The first occurrence of needle in haystack. */
static inline void *memmem(const void *hay, size_t hlen, const void *needle,
			   size_t nlen)
{
	const char *h = hay;

	if (nlen == 0)
		return (void *)h;
	for (size_t i = 0; i + nlen <= hlen; i++)
		if (h[i] == *(const char *)needle &&
		    memcmp(h + i, needle, nlen) == 0)
			return (void *)(h + i);
	return NULL;
}
/* One line of fp into *line (grown with realloc), with its newline. */
static inline ssize_t getline(char **line, size_t *cap, FILE *fp)
{
	size_t n = 0;
	int c;

	if (*line == NULL || *cap == 0) {
		*cap = 128;
		if ((*line = realloc(*line, *cap)) == NULL)
			return -1;
	}
	while ((c = getc(fp)) != EOF) {
		if (n + 2 > *cap) {
			char *p = realloc(*line, *cap * 2);

			if (p == NULL)
				return -1;
			*line = p;
			*cap *= 2;
		}
		(*line)[n++] = (char)c;
		if (c == '\n')
			break;
	}
	if (n == 0)
		return -1;
	(*line)[n] = '\0';
	return (ssize_t)n;
}

/*
 * open_memstream: a temporary file that deletes itself, read into a buffer
 * of malloc's at fclose (the callers use the text only after fclose). At
 * most CRUN_WIN_MEMSTREAMS at once in one file, on any thread.
 */
#define CRUN_WIN_MEMSTREAMS 16
struct crun_win_memstream {
	FILE *fp;
	char **ptr;
	size_t *len;
};
static struct crun_win_memstream crun_win_ms[CRUN_WIN_MEMSTREAMS]
    __attribute__((unused));
static SRWLOCK crun_win_ms_lock __attribute__((unused)) = SRWLOCK_INIT;

static inline FILE *open_memstream(char **ptr, size_t *len)
{
	wchar_t dir[MAX_PATH + 1], name[MAX_PATH + 1];
	HANDLE h;
	FILE *fp = NULL;
	int fd, i;

	*ptr = NULL;
	*len = 0;
	if (GetTempPathW(MAX_PATH + 1, dir) == 0 ||
	    GetTempFileNameW(dir, L"crn", 0, name) == 0)
		return NULL;
	h = CreateFileW(name, GENERIC_READ | GENERIC_WRITE, 0, NULL,
			CREATE_ALWAYS,
			FILE_ATTRIBUTE_TEMPORARY | FILE_FLAG_DELETE_ON_CLOSE,
			NULL);
	if (h == INVALID_HANDLE_VALUE)
		return NULL;
	fd = _open_osfhandle((intptr_t)h, 0);
	if (fd < 0 || (fp = _fdopen(fd, "w+b")) == NULL) {
		if (fd >= 0)
			_close(fd);
		else
			CloseHandle(h);
		return NULL;
	}
	AcquireSRWLockExclusive(&crun_win_ms_lock);
	for (i = 0; i < CRUN_WIN_MEMSTREAMS && crun_win_ms[i].fp; i++)
		;
	if (i < CRUN_WIN_MEMSTREAMS)
		crun_win_ms[i] = (struct crun_win_memstream){fp, ptr, len};
	ReleaseSRWLockExclusive(&crun_win_ms_lock);
	if (i == CRUN_WIN_MEMSTREAMS) {
		fclose(fp);
		return NULL;
	}
	return fp;
}

static inline int crun_win_fclose(FILE *fp)
{
	struct crun_win_memstream m = {NULL, NULL, NULL};

	AcquireSRWLockExclusive(&crun_win_ms_lock);
	for (int i = 0; i < CRUN_WIN_MEMSTREAMS; i++)
		if (crun_win_ms[i].fp == fp) {
			m = crun_win_ms[i];
			crun_win_ms[i].fp = NULL;
		}
	ReleaseSRWLockExclusive(&crun_win_ms_lock);
	if (m.fp != NULL) {
		long n;

		fflush(fp);
		n = ftell(fp);
		if (n >= 0 && (*m.ptr = malloc((size_t)n + 1)) != NULL) {
			rewind(fp);
			*m.len = fread(*m.ptr, 1, (size_t)n, fp);
			(*m.ptr)[*m.len] = '\0';
		}
	}
	return fclose(fp);
}
#define fclose(fp) crun_win_fclose(fp)

/* Threads get no signals there: a mask to set is no mask at all. */
#include <pthread.h>
#undef pthread_sigmask
typedef unsigned long long sigset_t;
static inline int sigfillset(sigset_t *set)
{
	*set = ~0ULL;
	return 0;
}
static inline int pthread_sigmask(int how, const sigset_t *set,
				  sigset_t *old)
{
	(void)how;
	(void)set;
	if (old != NULL)
		*old = 0;
	return 0;
}
#ifndef SIG_SETMASK
#define SIG_SETMASK 2
#endif
#ifndef SHUT_RDWR
#define SHUT_RDWR SD_BOTH
#endif

/* A CPU set, as a type only: binding is Linux's (binding.c refuses it). */
typedef struct {
	unsigned long long bits[1024 / 64];
} cpu_set_t;

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

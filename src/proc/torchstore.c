/*
 * Which workers' store an interpreter's torch accepts (see
 * include/crun/torchstore.h).
 *
 * Happy path: the probe prints "torch DIR" and "store agent" (or "store
 * no-libuv MESSAGE"); the answer is cached in one small file, written to a
 * temporary name and renamed, and read back on later runs after checking
 * that it names the same interpreter and PYTHONPATH and that the
 * interpreter and DIR/version.py have the size and mtime they had.
 *
 * Failure modes: anything the probe prints that is not understood is
 * UNKNOWN (the agent store stays, as before this check existed); a cache
 * file that is not a regular file of ours, is too long, malformed, or
 * stale is ignored and asked anew. Nothing here fails a job.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crun/torchstore.h"

/* Largest cache file read. */
#define MAX_CACHE 8192

/*
 * torch's own _create_c10d_store, as a worker calls it under crun's agent
 * store, against a server the probe starts itself without libuv (which
 * every build accepts; 1.13 has no use_libuv at all). A torch without
 * _create_c10d_store (1.8 and before) predates the agent store: its rank 0
 * always starts a server. Python 3.6+.
 */
const char TORCHSTORE_PROBE[] =
    "import os, sys, datetime\n"
    "os.environ['TORCHELASTIC_USE_AGENT_STORE'] = 'True'\n"
    "os.environ['TORCHELASTIC_RESTART_COUNT'] = '0'\n"
    "def one(e):\n"
    "    s = (str(e).strip().splitlines() or [type(e).__name__])[0]\n"
    "    return s[:200]\n"
    "try:\n"
    "    import torch\n"
    "except Exception as e:\n"
    "    print('store unknown cannot import torch: ' + one(e)); sys.exit()\n"
    "print('torch ' + os.path.dirname(os.path.abspath(torch.__file__)))\n"
    "import torch.distributed as d\n"
    "if not d.is_available():\n"
    "    print('store no-distributed'); sys.exit()\n"
    "import torch.distributed.rendezvous\n"
    "r = sys.modules['torch.distributed.rendezvous']\n"
    "if not hasattr(r, '_create_c10d_store'):\n"
    "    print('store no-agent-store'); sys.exit()\n"
    "t = datetime.timedelta(seconds=10)\n"
    "try:\n"
    "    try:\n"
    "        s = d.TCPStore('127.0.0.1', 0, 1, True, t, "
    "wait_for_workers=False, use_libuv=False)\n"
    "    except TypeError:\n"
    "        s = d.TCPStore('127.0.0.1', 0, 1, True, t, "
    "wait_for_workers=False)\n"
    "    r._create_c10d_store('127.0.0.1', s.port, 1, 2, t)\n"
    "    print('store agent')\n"
    "except Exception as e:\n"
    "    m = one(e)\n"
    "    print(('store no-libuv ' if 'libuv' in m else 'store unknown ') + "
    "m)\n";

static const char *const kind_names[] = {"unknown", "agent", "no-libuv",
					 "no-distributed", "no-agent-store"};

const char *torchstore_kind_name(enum torchstore_kind k)
{
	return (unsigned)k < sizeof(kind_names) / sizeof(kind_names[0])
		   ? kind_names[k]
		   : "unknown";
}

/* The line of p that starts with key and a space: its rest, length *n. */
static const char *line_of(const char *p, size_t len, const char *key,
			   size_t *n)
{
	size_t kl = strlen(key);

	for (const char *end = p + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (ll > kl && memcmp(p, key, kl) == 0 && p[kl] == ' ') {
			*n = ll - kl - 1;
			return p + kl + 1;
		}
		p += ll + (nl != NULL);
	}
	return NULL;
}

/* Copy n bytes of s, printable ones only (a '?' for others). */
static void copy_text(char *dst, size_t dlen, const char *s, size_t n)
{
	size_t k = 0;

	for (; k < n && k + 1 < dlen; k++)
		dst[k] = s[k] >= 0x20 && s[k] < 0x7f ? s[k] : '?';
	dst[k] = '\0';
}

void torchstore_parse(const char *p, size_t len, struct torchstore *out)
{
	const char *v;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (len > TORCHSTORE_MAX_OUTPUT)
		len = TORCHSTORE_MAX_OUTPUT;
	if ((v = line_of(p, len, "torch", &n)) && n < sizeof(out->torch_dir) &&
	    v[0] == '/' && memchr(v, '\0', n) == NULL)
		copy_text(out->torch_dir, sizeof(out->torch_dir), v, n);
	v = line_of(p, len, "store", &n);
	if (v == NULL) {
		snprintf(out->why, sizeof(out->why),
			 "the interpreter gave no answer");
		return;
	}
	for (int k = 1; k <= TORCHSTORE_NO_AGENT_STORE; k++) {
		size_t kl = strlen(kind_names[k]);

		if (n >= kl && memcmp(v, kind_names[k], kl) == 0 &&
		    (n == kl || v[kl] == ' ')) {
			out->kind = (enum torchstore_kind)k;
			if (n > kl)
				copy_text(out->why, sizeof(out->why),
					  v + kl + 1, n - kl - 1);
			return;
		}
	}
	if (n > 8 && memcmp(v, "unknown ", 8) == 0)
		copy_text(out->why, sizeof(out->why), v + 8, n - 8);
	else
		snprintf(out->why, sizeof(out->why),
			 "the interpreter's answer was not understood");
}

static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* PYTHONPATH's value, "" when unset. */
#define PP(v) ((v) ? (v) : "")

/*
 * python as an absolute path, as exec would find it (PATH for a bare name,
 * the working directory for a relative one, less its "./"): the cache's
 * key. 0, or -1.
 */
static int abs_python(const char *python, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char cwd[4096];
	int k;

	if (python[0] == '/') {
		k = snprintf(out, len, "%s", python);
	} else if (strchr(python, '/')) {
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return -1;
		while (python[0] == '.' && python[1] == '/')
			python += 2 + strspn(python + 2, "/");
		k = snprintf(out, len, "%s/%s", cwd, python);
	} else {
		for (k = -1; path && *path && k < 0;) {
			size_t n = strcspn(path, ":");

			k = snprintf(out, len, "%.*s/%s", (int)n, path, python);
			if (k < 0 || (size_t)k >= len || n == 0 ||
			    access(out, X_OK) != 0)
				k = -1;
			path += n + (path[n] == ':');
		}
	}
	return k < 0 || (size_t)k >= len ? -1 : 0;
}

int torchstore_cache_path(const char *dir, const char *python,
			  const char *pypath, char *path, size_t len)
{
	const char *pp = PP(pypath);
	uint64_t h = 0xcbf29ce484222325ULL;
	char abs[4096];
	int k;

	if (abs_python(python, abs, sizeof(abs)))
		return -1;
	h = fnv1a(h, abs, strlen(abs) + 1);
	h = fnv1a(h, pp, strlen(pp));
	k = snprintf(path, len, "%s/torchstore-%016llx", dir,
		     (unsigned long long)h);
	return k < 0 || (size_t)k >= len ? -1 : 0;
}

/* "MTIME_SEC.NSEC SIZE" of path (followed), or "-" when it is not there. */
static void stat_text(const char *path, char *buf, size_t len)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		snprintf(buf, len, "-");
		return;
	}
#ifdef _WIN32
	snprintf(buf, len, "%lld.%09ld %lld", (long long)st.st_mtime, 0L,
		 (long long)st.st_size);
#else
	snprintf(buf, len, "%lld.%09ld %lld", (long long)st.st_mtim.tv_sec,
		 (long)st.st_mtim.tv_nsec, (long long)st.st_size);
#endif
}

/* The cache file's text for python and ts (as it must read to be valid). */
static int cache_text(const char *python, const char *pypath,
		      const struct torchstore *ts, char *buf, size_t len)
{
	char pys[64], tvs[64], vpy[1100], abs[4096];
	int k;

	if (abs_python(python, abs, sizeof(abs)) || strchr(abs, '\n') ||
	    strchr(PP(pypath), '\n'))
		return -1;
	stat_text(abs, pys, sizeof(pys));
	snprintf(vpy, sizeof(vpy), "%s/version.py", ts->torch_dir);
	stat_text(vpy, tvs, sizeof(tvs));
	k = snprintf(buf, len,
		     "crun-torchstore 1\npython %s\npythonpath %s\npystat "
		     "%s\ntorch %s\ntstat %s\nstore %s\n",
		     abs, PP(pypath), pys, ts->torch_dir, tvs,
		     torchstore_kind_name(ts->kind));
	return k < 0 || (size_t)k >= len || strcmp(pys, "-") == 0 ||
		       strcmp(tvs, "-") == 0
		   ? -1
		   : k;
}

int torchstore_cache_load(const char *path, const char *python,
			  const char *pypath, struct torchstore *out)
{
	char *buf = malloc(MAX_CACHE + 1), *want = malloc(MAX_CACHE + 1);
	struct stat st;
	ssize_t n = -1;
	int fd, rc = -1;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (buf == NULL || want == NULL || fd < 0)
		goto done;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_size > MAX_CACHE || (st.st_mode & 022))
		goto done;
	n = read(fd, buf, MAX_CACHE);
	if (n <= 0 || n == MAX_CACHE)
		goto done;
	buf[n] = '\0';
	torchstore_parse(buf, (size_t)n, out);
	if (out->kind == TORCHSTORE_UNKNOWN || out->torch_dir[0] == '\0')
		goto done;
	/* Valid only as the text it would be written as now. */
	if (cache_text(python, pypath, out, want, MAX_CACHE + 1) == n &&
	    memcmp(buf, want, (size_t)n) == 0)
		rc = 0;
done:
	if (rc)
		memset(out, 0, sizeof(*out));
	if (fd >= 0)
		close(fd);
	free(buf);
	free(want);
	return rc;
}

int torchstore_cache_save(const char *path, const char *python,
			  const char *pypath, const struct torchstore *ts)
{
	char tmp[4200], *buf;
	int fd, k, rc = 0;

	if (ts->kind == TORCHSTORE_UNKNOWN || ts->torch_dir[0] == '\0')
		return -EINVAL;
	if ((buf = malloc(MAX_CACHE + 1)) == NULL)
		return -ENOMEM;
	k = cache_text(python, pypath, ts, buf, MAX_CACHE + 1);
	if (k < 0 || snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid()) >=
			 (int)sizeof(tmp)) {
		free(buf);
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	if (write(fd, buf, (size_t)k) != k)
		rc = errno ? -errno : -EIO;
	if (close(fd) && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	free(buf);
	return rc;
}

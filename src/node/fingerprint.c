/*
 * A node's fingerprint (see include/crun/fingerprint.h).
 *
 * Happy path: the agent calls fingerprint_start as it starts; on a thread
 * of its own the driver's version file is read, the interpreter's path is
 * derived from its real name ("python3.11") and PYTHONPATH as Python would
 * build it (no process: well under a millisecond), and along that path
 * torch/version.py and the nvidia-nccl dist-info are read; the callback
 * hands the result to the rendezvous, which writes it into this node's
 * descriptor. The closer of a round compares the descriptors.
 *
 * Failure modes: torch not found on the derived path (a pyenv shim, a
 * wrapper script, a .pth) makes the interpreter print its path (-S, about
 * 20 ms idle, killed after the timeout); a missing file is "-" (absent); an
 * interpreter that does not answer leaves the python items unknown (""),
 * and values outside the wire's character set are cut at the first bad
 * byte. Only regular files are read, opened without blocking (a FIFO named
 * torch/version.py is "-"); a read that still does not end (a hung NFS or
 * FUSE mount) is abandoned after the timeout and one more second: the
 * callback runs with UV_ETIMEDOUT, the loop no longer waits for it, and the
 * thread frees what it holds if it ever returns. Nothing here fails the job;
 * the comparison just has less to compare.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/fingerprint.h"
#include "crun/pyexec.h"

extern char **environ;

/* Most directories on the interpreter's path that are searched. */
#define MAX_DIRS 64
/* Largest text file read (version.py, METADATA, the driver's file). */
#define MAX_TEXT 65536
/* Most bytes of a libnccl scanned for its version string. */
#define MAX_LIB_SCAN (512L << 20)

static const char *const names[FP_NITEMS] = {"driver", "torch", "cuda", "nccl"};
static const char *const what[FP_NITEMS] = {
    "the NVIDIA driver", "the torch version", "torch's CUDA build",
    "the NCCL version"};

const char *fingerprint_item_name(int item)
{
	return item >= 0 && item < FP_NITEMS ? names[item] : "?";
}

static int valid_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' ||
	       c == '~' || c == '-';
}

/* Copy the leading valid bytes of s (at most FP_MAX_VALUE) as a value. */
static void set_value(char *dst, const char *s, size_t n)
{
	size_t k = 0;

	while (k < n && k < FP_MAX_VALUE && valid_byte((unsigned char)s[k]))
		k++;
	if (k == 0) {
		snprintf(dst, FP_MAX_VALUE + 1, "-");
		return;
	}
	memcpy(dst, s, k);
	dst[k] = '\0';
}

void fingerprint_format(const struct crun_fingerprint *fp, char *buf,
			size_t len)
{
	size_t n = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (int i = 0; i < FP_NITEMS; i++) {
		int k;

		if (fp->v[i][0] == '\0')
			continue;
		k = snprintf(buf + n, len - n, "%s%s:%s", n ? "," : "",
			     names[i], fp->v[i]);
		if (k < 0 || (size_t)k >= len - n) {
			buf[n] = '\0';
			return;
		}
		n += (size_t)k;
	}
}

static int why_fmt(char *why, size_t wlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int why_fmt(char *why, size_t wlen, const char *fmt, ...)
{
	va_list ap;

	if (why && wlen) {
		va_start(ap, fmt);
		vsnprintf(why, wlen, fmt, ap);
		va_end(ap);
	}
	return CRUN_EPROTO;
}

int fingerprint_parse(const char *p, size_t len, struct crun_fingerprint *fp,
		      char *why, size_t wlen)
{
	const char *end = p + len;

	memset(fp, 0, sizeof(*fp));
	if (len > FP_MAX_TEXT)
		return why_fmt(why, wlen,
			       "fingerprint of %zu bytes (at most %d)", len,
			       FP_MAX_TEXT);
	while (p < end) {
		const char *item = p, *colon, *val;
		size_t n = (size_t)(end - p), in, vn;
		const char *comma = memchr(p, ',', n);
		int i;

		if (comma)
			n = (size_t)(comma - p);
		colon = memchr(item, ':', n);
		if (colon == NULL)
			return why_fmt(why, wlen,
				       "fingerprint item '%.*s' has no ':'",
				       (int)(n > 32 ? 32 : n), item);
		in = (size_t)(colon - item);
		val = colon + 1;
		vn = n - in - 1;
		for (i = 0; i < FP_NITEMS; i++)
			if (strlen(names[i]) == in &&
			    memcmp(names[i], item, in) == 0)
				break;
		for (size_t k = 0; i == FP_NITEMS && k < in; k++)
			if (!valid_byte((unsigned char)item[k]))
				return why_fmt(why, wlen,
					       "fingerprint item name has a "
					       "byte outside [A-Za-z0-9._+~-]");
		if (i == FP_NITEMS)
			return why_fmt(why, wlen,
				       "unknown fingerprint item '%.*s'",
				       (int)(in > 32 ? 32 : in), item);
		if (fp->v[i][0])
			return why_fmt(why, wlen,
				       "fingerprint item '%s' given twice",
				       names[i]);
		if (vn == 0)
			return why_fmt(why, wlen,
				       "fingerprint item '%s' is empty",
				       names[i]);
		if (vn > FP_MAX_VALUE)
			return why_fmt(
			    why, wlen,
			    "fingerprint item '%s' longer than %d bytes",
			    names[i], FP_MAX_VALUE);
		for (size_t k = 0; k < vn; k++)
			if (!valid_byte((unsigned char)val[k]))
				return why_fmt(why, wlen,
					       "fingerprint item '%s' has a "
					       "byte outside [A-Za-z0-9._+~-]",
					       names[i]);
		memcpy(fp->v[i], val, vn);
		fp->v[i][vn] = '\0';
		p = comma ? comma + 1 : end;
		if (comma && p == end)
			return why_fmt(why, wlen,
				       "fingerprint ends with a ','");
	}
	return 0;
}

/* Append to out (at *n of len) what fits; never past a line of lmax. */
static void put(char *out, size_t len, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t len, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*n + 1 >= len)
		return;
	va_start(ap, fmt);
	k = vsnprintf(out + *n, len - *n, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	*n += (size_t)k < len - *n ? (size_t)k : len - *n - 1;
}

int fingerprint_compare(const char *const *hosts,
			const struct crun_fingerprint *fps, int n, char *out,
			size_t len)
{
	int lines = 0;
	size_t at = 0;
	int *grp = calloc((size_t)(n > 0 ? n : 1), sizeof(*grp));

	if (len)
		out[0] = '\0';
	if (grp == NULL || len == 0) {
		free(grp);
		return 0;
	}
	for (int it = 0; it < FP_NITEMS; it++) {
		int first = -1, differ = 0;
		char line[1024];
		size_t ln = 0;

		for (int i = 0; i < n; i++) {
			if (fps[i].v[it][0] == '\0')
				continue;
			if (first < 0)
				first = i;
			else if (strcmp(fps[i].v[it], fps[first].v[it]))
				differ = 1;
		}
		if (!differ)
			continue;
		/* One group per distinct value, in order of first sight. */
		memset(grp, 0, sizeof(*grp) * (size_t)n);
		put(line, sizeof(line), &ln, "nodes differ in %s:", what[it]);
		for (int i = 0, g = 0; i < n; i++) {
			int named = 0, count = 0;

			if (fps[i].v[it][0] == '\0' || grp[i])
				continue;
			g++;
			put(line, sizeof(line), &ln, "%s %s on",
			    g > 1 ? ";" : "",
			    strcmp(fps[i].v[it], "-") ? fps[i].v[it] : "none");
			for (int j = i; j < n; j++) {
				if (fps[j].v[it][0] == '\0' ||
				    strcmp(fps[j].v[it], fps[i].v[it]))
					continue;
				grp[j] = g;
				count++;
				if (named < 4) {
					put(line, sizeof(line), &ln,
					    "%s %.128s", named ? "," : "",
					    hosts[j]);
					named++;
				}
			}
			if (count > named)
				put(line, sizeof(line), &ln, " and %d more",
				    count - named);
		}
		put(out, len, &at, "%s\n", line);
		lines++;
	}
	free(grp);
	return lines;
}

int fingerprint_parse_driver(const char *text, char *out, size_t len)
{
	const char *p = text, *eol = text + strcspn(text, "\n");

	/* The first token of the first line made of digits and dots only. */
	while (p < eol) {
		size_t k = strcspn(p, " \t\n");
		int digits = 0, ok = k > 0;

		if (p + k > eol)
			k = (size_t)(eol - p);
		for (size_t i = 0; i < k && ok; i++) {
			if (p[i] >= '0' && p[i] <= '9')
				digits++;
			else if (p[i] != '.')
				ok = 0;
		}
		if (ok && digits && p[0] != '.' && k <= FP_MAX_VALUE) {
			snprintf(out, len, "%.*s", (int)k, p);
			return 0;
		}
		p += k;
		p += strspn(p, " \t");
	}
	return -1;
}

/* The quoted string (or None: "-") after "name[: type] =" on a line. */
static int py_assign(const char *text, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);

	for (const char *l = text; l && *l;
	     l = strchr(l, '\n'), l = l ? l + 1 : l) {
		const char *p = l;
		char q;
		size_t k;

		if (strncmp(p, name, nl) != 0)
			continue;
		p += nl;
		p += strspn(p, " \t");
		if (*p == ':') /* an annotation: "cuda: Optional[str] = ..." */
			p += strcspn(p, "=\n");
		if (*p != '=')
			continue;
		p++;
		p += strspn(p, " \t");
		if (strncmp(p, "None", 4) == 0) {
			snprintf(out, len, "-");
			return 0;
		}
		q = *p;
		if (q != '\'' && q != '"')
			continue;
		p++;
		k = strcspn(p, q == '\'' ? "'\n" : "\"\n");
		if (p[k] != q)
			continue;
		set_value(out, p, k < len - 1 ? k : len - 1);
		return 0;
	}
	return -1;
}

int fingerprint_parse_version_py(const char *text, char *version, size_t vlen,
				 char *cuda, size_t clen)
{
	if (py_assign(text, "__version__", version, vlen))
		return -1;
	if (py_assign(text, "cuda", cuda, clen))
		snprintf(cuda, clen, "-");
	return 0;
}

int fingerprint_parse_metadata(const char *text, char *out, size_t len)
{
	for (const char *l = text; l && *l;
	     l = strchr(l, '\n'), l = l ? l + 1 : l) {
		const char *p;
		size_t k;

		if (*l == '\n' || *l == '\r')
			return -1; /* the headers end at the first empty line */
		if (strncmp(l, "Version:", 8) != 0)
			continue;
		p = l + 8 + strspn(l + 8, " \t");
		k = strcspn(p, " \t\r\n");
		if (k == 0)
			return -1;
		set_value(out, p, k < len - 1 ? k : len - 1);
		return 0;
	}
	return -1;
}

int fingerprint_scan_nccl(const char *p, size_t len, char *out, size_t olen)
{
	static const char tag[] = "NCCL version ";
	const size_t tl = sizeof(tag) - 1;

	for (const char *s = p; len >= tl && s <= p + len - tl; s++) {
		const char *v;
		size_t k = 0;

		s = memchr(s, 'N', (size_t)(p + len - tl - s) + 1);
		if (s == NULL)
			break;
		if (memcmp(s, tag, tl) != 0)
			continue;
		v = s + tl;
		while (v + k < p + len && k < FP_MAX_VALUE &&
		       ((v[k] >= '0' && v[k] <= '9') || v[k] == '.'))
			k++;
		if (k == 0 || v[0] == '.')
			continue;
		/* "2.18.1+cuda12.1": the NCCL part alone */
		snprintf(out, olen, "%.*s", (int)k, v);
		return 0;
	}
	return -1;
}

/*
 * A regular file opened for reading, or -1: never blocks on a FIFO or a
 * device (O_NONBLOCK; S_ISREG checked on the open file).
 */
static int open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;

	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* A small file as a NUL-terminated string (malloc'd), or NULL. */
static char *slurp(const char *path)
{
	int fd = open_regular(path);
	char *buf;
	size_t got = 0;
	ssize_t k;

	if (fd < 0)
		return NULL;
	buf = malloc(MAX_TEXT + 1);
	while (buf && got < MAX_TEXT &&
	       (k = read(fd, buf + got, MAX_TEXT - got)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	if (buf)
		buf[got] = '\0';
	return buf;
}

static const char *env_of(char **envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

static void collect_driver(char **envp, struct crun_fingerprint *fp)
{
	const char *gpus = env_of(envp, "CRUN_NVIDIA_PROC");
	const char *sys = env_of(envp, "CRUN_SYSFS");
	char path[PATH_MAX], *text;

	/* CRUN_NVIDIA_PROC is .../driver/nvidia/gpus: version is beside it. */
	if (gpus && *gpus)
		snprintf(path, sizeof(path), "%s/../version", gpus);
	else
		snprintf(path, sizeof(path), "/proc/driver/nvidia/version");
	text = slurp(path);
	if (text == NULL) {
		snprintf(path, sizeof(path), "%s/module/nvidia/version",
			 sys && *sys ? sys : "/sys");
		text = slurp(path);
	}
	if (text == NULL || fingerprint_parse_driver(text, fp->v[FP_DRIVER],
						     sizeof(fp->v[FP_DRIVER])))
		snprintf(fp->v[FP_DRIVER], sizeof(fp->v[FP_DRIVER]), "-");
	free(text);
}

/* The version of the first "<prefix>*.dist-info" (or .egg-info) in dir. */
static int dist_version(const char *dir, const char *const *prefixes, char *out,
			size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc = -1;

	if (d == NULL)
		return -1;
	while (rc && (de = readdir(d)) != NULL) {
		const char *nm = de->d_name, *meta = NULL;
		size_t n = strlen(nm);
		char path[PATH_MAX], *text;
		int hit = 0;

		for (const char *const *p = prefixes; *p && !hit; p++)
			hit = strncasecmp(nm, *p, strlen(*p)) == 0;
		if (!hit)
			continue;
		if (n > 10 && strcmp(nm + n - 10, ".dist-info") == 0)
			meta = "METADATA";
		else if (n > 9 && strcmp(nm + n - 9, ".egg-info") == 0)
			meta = "PKG-INFO";
		if (meta == NULL)
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", dir, nm, meta);
		if ((text = slurp(path)) != NULL)
			rc = fingerprint_parse_metadata(text, out, len);
		free(text);
	}
	closedir(d);
	return rc;
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The first "NCCL version" string of a libnccl*.so* in dir. */
static int lib_nccl(const char *dir, char *out, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc = -1;

	if (d == NULL)
		return -1;
	while (rc && (de = readdir(d)) != NULL) {
		char path[PATH_MAX], *buf;
		int fd;
		ssize_t k;
		size_t keep = 0;
		long total = 0;

		if (strncmp(de->d_name, "libnccl", 7) ||
		    strstr(de->d_name, ".so") == NULL)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if ((fd = open_regular(path)) < 0)
			continue;
		buf = malloc((1 << 20) + 128);
		/* Chunks overlapping by 128 bytes, so no string is split. */
		while (buf && rc && total < MAX_LIB_SCAN &&
		       (k = read(fd, buf + keep, 1 << 20)) > 0) {
			size_t n = keep + (size_t)k;

			total += k;
			rc = fingerprint_scan_nccl(buf, n, out, len);
			keep = n < 128 ? n : 128;
			memmove(buf, buf + n - keep, keep);
		}
		free(buf);
		close(fd);
	}
	closedir(d);
	return rc;
}

/* The interpreter's path, split into dirs (strings in buf). */
static int python_dirs(const char *python, char **envp, int timeout_ms,
		       char *buf, size_t len, char **dirs)
{
	static const char code[] =
	    "import sys, site\n"
	    "p = [d for d in sys.path if d]\n"
	    "try:\n p.append(site.getusersitepackages())\n"
	    "except Exception:\n pass\n"
	    "try:\n p += site.getsitepackages()\n"
	    "except Exception:\n pass\n"
	    "sys.stdout.write('\\n'.join(p))\n";
	char *argv[] = {(char *)python, (char *)"-S", (char *)"-c",
			(char *)code, NULL};
	int n = 0;

	if (pyexec_output(python, argv, envp, timeout_ms, buf, len))
		return -1;
	for (char *s = buf; *s && n < MAX_DIRS;) {
		size_t k = strcspn(s, "\n");
		int end = s[k] == '\0';

		s[k] = '\0';
		if (k > 0 && s[0] == '/')
			dirs[n++] = s;
		if (end)
			break;
		s += k + 1;
	}
	return n;
}

/* torch, cuda and nccl along dirs, in order; 1 when torch was found. */
static int scan_dirs(char **dirs, int n, struct crun_fingerprint *fp)
{
	static const char *const torch_pfx[] = {"torch-", NULL};
	static const char *const nccl_pfx[] = {"nvidia_nccl", "nvidia-nccl",
					       NULL};

	memset(fp->v[FP_TORCH], 0, sizeof(fp->v[FP_TORCH]));
	memset(fp->v[FP_CUDA], 0, sizeof(fp->v[FP_CUDA]));
	memset(fp->v[FP_NCCL], 0, sizeof(fp->v[FP_NCCL]));
	for (int i = 0; i < n && !fp->v[FP_TORCH][0]; i++) {
		char path[PATH_MAX], *text;

		snprintf(path, sizeof(path), "%s/torch", dirs[i]);
		if (!is_dir(path))
			continue;
		snprintf(path, sizeof(path), "%s/torch/version.py", dirs[i]);
		text = slurp(path);
		if (text == NULL ||
		    fingerprint_parse_version_py(
			text, fp->v[FP_TORCH], sizeof(fp->v[FP_TORCH]),
			fp->v[FP_CUDA], sizeof(fp->v[FP_CUDA]))) {
			/* No version.py: the distribution's metadata (the
			 * CUDA build stays unknown). */
			fp->v[FP_TORCH][0] = fp->v[FP_CUDA][0] = '\0';
			if (dist_version(dirs[i], torch_pfx, fp->v[FP_TORCH],
					 sizeof(fp->v[FP_TORCH])))
				snprintf(fp->v[FP_TORCH],
					 sizeof(fp->v[FP_TORCH]), "-");
		}
		free(text);
	}
	for (int i = 0; i < n && !fp->v[FP_NCCL][0]; i++) {
		char path[PATH_MAX];

		if (dist_version(dirs[i], nccl_pfx, fp->v[FP_NCCL],
				 sizeof(fp->v[FP_NCCL])) == 0)
			break;
		fp->v[FP_NCCL][0] = '\0';
		snprintf(path, sizeof(path), "%s/nvidia/nccl/lib", dirs[i]);
		if (lib_nccl(path, fp->v[FP_NCCL], sizeof(fp->v[FP_NCCL])) == 0)
			break;
		fp->v[FP_NCCL][0] = '\0';
		snprintf(path, sizeof(path), "%s/torch/lib", dirs[i]);
		if (lib_nccl(path, fp->v[FP_NCCL], sizeof(fp->v[FP_NCCL])) == 0)
			break;
		fp->v[FP_NCCL][0] = '\0';
	}
	if (fp->v[FP_TORCH][0] == '\0')
		return 0;
	if (fp->v[FP_NCCL][0] == '\0')
		snprintf(fp->v[FP_NCCL], sizeof(fp->v[FP_NCCL]), "-");
	return 1;
}

/* Append "fmt..." to the list (strings in buf at *used) if it is a dir. */
static void add_dir(char *buf, size_t len, size_t *used, char **dirs, int *n,
		    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void add_dir(char *buf, size_t len, size_t *used, char **dirs, int *n,
		    const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*n >= MAX_DIRS || *used >= len)
		return;
	va_start(ap, fmt);
	k = vsnprintf(buf + *used, len - *used, fmt, ap);
	va_end(ap);
	if (k <= 0 || (size_t)k >= len - *used || !is_dir(buf + *used))
		return;
	dirs[(*n)++] = buf + *used;
	*used += (size_t)k + 1;
}

/*
 * The interpreter's path as Python builds it, without running it:
 * PYTHONPATH, then (from the interpreter's real name "pythonX.Y" and its
 * prefix) a venv's site-packages, the user site, and the prefix's site- and
 * Debian dist-packages. Returns -1 when the version cannot be told from the
 * name (a pyenv shim, a wrapper script), with the PYTHONPATH dirs listed.
 */
static int static_dirs(const char *python, char **envp, char *buf, size_t len,
		       char **dirs, int *n)
{
	const char *pp = env_of(envp, "PYTHONPATH"),
		   *home = env_of(envp, "HOME");
	char real[PATH_MAX], given[PATH_MAX], cfg[PATH_MAX + 16], *text;
	const char *base;
	size_t used = 0;
	int major, minor, venv = 0, system = 1;

	*n = 0;
	while (pp && *pp) {
		size_t k = strcspn(pp, ":");

		if (k > 0 && k < PATH_MAX)
			add_dir(buf, len, &used, dirs, n, "%.*s", (int)k, pp);
		pp += k + (pp[k] == ':');
	}
	if (strchr(python, '/') == NULL || realpath(python, real) == NULL)
		return -1;
	base = strrchr(real, '/') + 1;
	if (sscanf(base, "python%d.%d", &major, &minor) != 2)
		return -1;
	/* A venv: <venv>/bin/python beside <venv>/pyvenv.cfg. */
	snprintf(given, sizeof(given), "%s", python);
	if (strrchr(given, '/'))
		*strrchr(given, '/') = '\0';
	snprintf(cfg, sizeof(cfg), "%s/../pyvenv.cfg", given);
	if ((text = slurp(cfg)) != NULL) {
		venv = 1;
		system =
		    strstr(text, "include-system-site-packages = true") != NULL;
		free(text);
		add_dir(buf, len, &used, dirs, n,
			"%s/../lib/python%d.%d/site-packages", given, major,
			minor);
	}
	*strrchr(real, '/') = '\0'; /* <prefix>/bin */
	if (strrchr(real, '/'))
		*strrchr(real, '/') = '\0'; /* <prefix> */
	if (home && *home && (!venv || system))
		add_dir(buf, len, &used, dirs, n,
			"%s/.local/lib/python%d.%d/site-packages", home, major,
			minor);
	if (!system)
		return 0;
	add_dir(buf, len, &used, dirs, n, "%s/lib/python%d.%d/site-packages",
		real, major, minor);
	add_dir(buf, len, &used, dirs, n,
		"%s/local/lib/python%d.%d/dist-packages", real, major, minor);
	add_dir(buf, len, &used, dirs, n, "%s/lib/python%d/dist-packages", real,
		major);
	add_dir(buf, len, &used, dirs, n, "%s/lib/python%d.%d/dist-packages",
		real, major, minor);
	return 0;
}

static void collect_python(const char *python, char **envp, int timeout_ms,
			   struct crun_fingerprint *fp)
{
	char *buf = malloc(PATH_MAX * 8), *dirs[MAX_DIRS];
	int n;

	if (buf == NULL)
		return;
	/* Fast (no process): where torch normally lives. */
	static_dirs(python, envp, buf, PATH_MAX * 8, dirs, &n);
	if (scan_dirs(dirs, n, fp))
		goto out;
	/* Not there: ask the interpreter for its path (-S: no site hooks). */
	n = python_dirs(python, envp, timeout_ms, buf, PATH_MAX * 8, dirs);
	if (n < 0) /* it did not answer: unknown */
		goto out;
	if (!scan_dirs(dirs, n, fp)) {
		snprintf(fp->v[FP_TORCH], sizeof(fp->v[FP_TORCH]), "-");
		snprintf(fp->v[FP_NCCL], sizeof(fp->v[FP_NCCL]), "-");
	}
out:
	free(buf);
}

void fingerprint_collect(const char *python, char **envp, int timeout_ms,
			 struct crun_fingerprint *fp)
{
	memset(fp, 0, sizeof(*fp));
	collect_driver(envp, fp);
	if (python && *python)
		collect_python(python, envp, timeout_ms, fp);
}

int fingerprint_now(const char *python, struct crun_fingerprint *fp)
{
	const char *gpus = getenv("CRUN_NVIDIA_PROC"),
		   *sys = getenv("CRUN_SYSFS");

	if ((python && *python) || (gpus && *gpus) || (sys && *sys))
		return -1;
	fingerprint_collect(NULL, environ, 0, fp);
	return 0;
}

/* --- on a thread of its own -------------------------------------------- */

/*
 * What the thread and the loop share. Each holds a reference; the last to
 * let go frees it. The loop side sets abandoned (under mu) before it closes
 * the async handle, so the thread never signals a closed handle.
 */
struct fp_shared {
	pthread_mutex_t mu;
	int refs;
	int abandoned;
	char *python;
	char **envp; /* a copy: the loop thread may setenv meanwhile */
	int timeout_ms;
	struct crun_fingerprint fp;
	uv_async_t *async;
};

struct crun_fp_read {
	uv_async_t async;
	uv_timer_t timer;
	int handles; /* open: freed when 0 */
	int reported;
	struct fp_shared *sh;
	fingerprint_cb cb;
	void *data;
};

static void fp_shared_unref(struct fp_shared *sh)
{
	int last;

	pthread_mutex_lock(&sh->mu);
	last = --sh->refs == 0;
	pthread_mutex_unlock(&sh->mu);
	if (!last)
		return;
	for (char **e = sh->envp; e && *e; e++)
		free(*e);
	free(sh->envp);
	free(sh->python);
	pthread_mutex_destroy(&sh->mu);
	free(sh);
}

static void *fingerprint_thread(void *arg)
{
	struct fp_shared *sh = arg;
	struct crun_fingerprint fp;

	fingerprint_collect(sh->python, sh->envp, sh->timeout_ms, &fp);
	pthread_mutex_lock(&sh->mu);
	if (!sh->abandoned) {
		sh->fp = fp;
		uv_async_send(sh->async);
	}
	pthread_mutex_unlock(&sh->mu);
	fp_shared_unref(sh);
	return NULL;
}

static void fp_read_on_close(uv_handle_t *h)
{
	struct crun_fp_read *r = h->data;

	if (--r->handles == 0)
		free(r);
}

/* Report status once (fp when 0), let go of the thread, close the handles. */
static void fp_read_end(struct crun_fp_read *r, int status)
{
	struct crun_fingerprint fp;

	if (r->reported)
		return;
	r->reported = 1;
	pthread_mutex_lock(&r->sh->mu);
	r->sh->abandoned = 1;
	fp = r->sh->fp;
	pthread_mutex_unlock(&r->sh->mu);
	fp_shared_unref(r->sh);
	r->sh = NULL;
	uv_close((uv_handle_t *)&r->async, fp_read_on_close);
	uv_close((uv_handle_t *)&r->timer, fp_read_on_close);
	if (status)
		memset(&fp, 0, sizeof(fp));
	r->cb(&fp, status, r->data);
}

static void fp_read_on_async(uv_async_t *h)
{
	fp_read_end(h->data, 0);
}

static void fp_read_on_timeout(uv_timer_t *t)
{
	fp_read_end(t->data, UV_ETIMEDOUT);
}

void fingerprint_cancel(struct crun_fp_read *r)
{
	fp_read_end(r, CRUN_ECANCELED);
}

/* The thread, detached, with every signal blocked (the loop takes them;
 * on Windows no thread gets signals). */
static int fp_thread_start(struct fp_shared *sh)
{
	pthread_attr_t attr;
	pthread_t tid;
	int rc;
#ifndef _WIN32
	sigset_t all, old;
#endif

	if ((rc = pthread_attr_init(&attr)))
		return -rc;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
#ifdef _WIN32
	rc = pthread_create(&tid, &attr, fingerprint_thread, sh);
#else
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&tid, &attr, fingerprint_thread, sh);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
#endif
	pthread_attr_destroy(&attr);
	return -rc;
}

int fingerprint_start(uv_loop_t *loop, const char *python, int timeout_ms,
		      fingerprint_cb cb, void *data, struct crun_fp_read **out)
{
	struct crun_fp_read *r = calloc(1, sizeof(*r));
	struct fp_shared *sh = calloc(1, sizeof(*sh));
	size_t n = 0;
	int rc = UV_ENOMEM;

	if (sh) {
		pthread_mutex_init(&sh->mu, NULL);
		sh->refs = 1;
	}
	if (r == NULL || sh == NULL)
		goto fail;
	while (environ && environ[n])
		n++;
	sh->envp = calloc(n + 1, sizeof(*sh->envp));
	sh->python = python ? strdup(python) : NULL;
	if (sh->envp == NULL || (python && sh->python == NULL))
		goto fail;
	for (size_t i = 0; i < n; i++)
		if ((sh->envp[i] = strdup(environ[i])) == NULL)
			goto fail;
	sh->timeout_ms = timeout_ms;
	sh->async = &r->async;
	if ((rc = uv_async_init(loop, &r->async, fp_read_on_async)))
		goto fail;
	r->handles++;
	r->async.data = r;
	r->sh = sh;
	r->cb = cb;
	r->data = data;
	if ((rc = uv_timer_init(loop, &r->timer)))
		goto fail_handles;
	r->handles++;
	r->timer.data = r;
	sh->refs++; /* the thread's */
	if ((rc = fp_thread_start(sh))) {
		sh->refs--;
		goto fail_handles;
	}
	uv_timer_start(&r->timer, fp_read_on_timeout,
		       (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) +
			   FP_ABANDON_AFTER_MS,
		       0);
	*out = r;
	return 0;
fail_handles:
	/* Handles are open: close them; the callback never runs. */
	r->reported = 1;
	uv_close((uv_handle_t *)&r->async, fp_read_on_close);
	if (r->handles == 2)
		uv_close((uv_handle_t *)&r->timer, fp_read_on_close);
	fp_shared_unref(sh);
	return rc;
fail:
	if (sh)
		fp_shared_unref(sh);
	free(r);
	return rc;
}

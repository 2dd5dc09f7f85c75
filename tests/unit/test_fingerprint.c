/*
 * The node fingerprint (src/node/fingerprint.c): the parsers of the files the
 * versions come from, the wire field (untrusted: it comes from the store),
 * the comparison the closer of a round makes, and a collection over a fake
 * driver tree and fake site-packages.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crun/err.h"
#include "crun/fingerprint.h"
#include "crun/rdzv_records.h"

#define S(x) x, strlen(x)

Test(fingerprint, driver_files, .timeout = 10)
{
	char v[64];

	cr_assert_eq(fingerprint_parse_driver(
			 "NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
			 "535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
			 "GCC version:  gcc version 12.2.0\n",
			 v, sizeof(v)),
		     0);
	cr_assert_str_eq(v, "535.104.05");
	cr_assert_eq(fingerprint_parse_driver(
			 "NVRM version: NVIDIA UNIX Open Kernel Module for "
			 "x86_64  550.54.14  Release Build  (dvs-builder@U16)",
			 v, sizeof(v)),
		     0);
	cr_assert_str_eq(v, "550.54.14");
	/* /sys/module/nvidia/version holds the number alone */
	cr_assert_eq(fingerprint_parse_driver("470.223.02\n", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "470.223.02");
	/* the GCC version on line 2 is not the driver's */
	cr_assert_eq(
	    fingerprint_parse_driver("NVRM version: none\n12.2.0\n", v,
				     sizeof(v)),
	    -1);
	cr_assert_eq(fingerprint_parse_driver("", v, sizeof(v)), -1);
	cr_assert_eq(fingerprint_parse_driver("...\n", v, sizeof(v)), -1);
}

Test(fingerprint, version_py, .timeout = 10)
{
	char v[64], c[64];

	/* torch 1.x */
	cr_assert_eq(fingerprint_parse_version_py(
			 "__version__ = '1.13.1+cu117'\ndebug = False\n"
			 "cuda = '11.7'\ngit_version = 'abc'\nhip = None\n",
			 v, sizeof(v), c, sizeof(c)),
		     0);
	cr_assert_str_eq(v, "1.13.1+cu117");
	cr_assert_str_eq(c, "11.7");
	/* torch 2.x: annotations, double quotes */
	cr_assert_eq(fingerprint_parse_version_py(
			 "from typing import Optional\n"
			 "__all__ = ['__version__', 'cuda']\n"
			 "__version__ = \"2.1.0+cu121\"\n"
			 "cuda: Optional[str] = \"12.1\"\n",
			 v, sizeof(v), c, sizeof(c)),
		     0);
	cr_assert_str_eq(v, "2.1.0+cu121");
	cr_assert_str_eq(c, "12.1");
	/* a CPU build: cuda = None */
	cr_assert_eq(fingerprint_parse_version_py(
			 "__version__ = '1.13.0a0'\ncuda = None\n", v,
			 sizeof(v), c, sizeof(c)),
		     0);
	cr_assert_str_eq(v, "1.13.0a0");
	cr_assert_str_eq(c, "-");
	/* no __version__; an unterminated string; "cudax" is not "cuda" */
	cr_assert_eq(fingerprint_parse_version_py("cuda = '12.1'\n", v,
						  sizeof(v), c, sizeof(c)),
		     -1);
	cr_assert_eq(fingerprint_parse_version_py("__version__ = '2.1\n", v,
						  sizeof(v), c, sizeof(c)),
		     -1);
	cr_assert_eq(fingerprint_parse_version_py(
			 "__version__ = '2.2'\ncudax = '9'\n", v, sizeof(v),
			 c, sizeof(c)),
		     0);
	cr_assert_str_eq(c, "-");
	/* bytes outside the wire's set are cut, never carried */
	cr_assert_eq(fingerprint_parse_version_py("__version__ = '2.1 evil'\n",
						  v, sizeof(v), c, sizeof(c)),
		     0);
	cr_assert_str_eq(v, "2.1");
}

Test(fingerprint, metadata, .timeout = 10)
{
	char v[64];

	cr_assert_eq(fingerprint_parse_metadata(
			 "Metadata-Version: 2.1\nName: nvidia-nccl-cu12\n"
			 "Version: 2.18.1\nSummary: NCCL\n\nVersion: 9\n",
			 v, sizeof(v)),
		     0);
	cr_assert_str_eq(v, "2.18.1");
	/* a "Version:" in the body (after the blank line) is not a header */
	cr_assert_eq(fingerprint_parse_metadata("Name: x\n\nVersion: 1.0\n", v,
						sizeof(v)),
		     -1);
	cr_assert_eq(fingerprint_parse_metadata("Version:\n", v, sizeof(v)),
		     -1);
}

Test(fingerprint, nccl_library_string, .timeout = 10)
{
	char lib[256], v[64];

	memset(lib, 0, sizeof(lib));
	memcpy(lib + 3, "NCCL", 4); /* a false start */
	memcpy(lib + 40, "NCCL version 2.18.1+cuda12.1", 28);
	cr_assert_eq(fingerprint_scan_nccl(lib, sizeof(lib), v, sizeof(v)),
		     0);
	cr_assert_str_eq(v, "2.18.1");
	cr_assert_eq(fingerprint_scan_nccl(lib, 52, v, sizeof(v)), -1);
	cr_assert_eq(fingerprint_scan_nccl(S("NCCL version x"), v, sizeof(v)),
		     -1);
}

Test(fingerprint, wire_round_trip, .timeout = 10)
{
	struct crun_fingerprint a, b;
	char text[FP_MAX_TEXT + 1], why[200];

	memset(&a, 0, sizeof(a));
	strcpy(a.v[FP_DRIVER], "535.104.05");
	strcpy(a.v[FP_TORCH], "2.1.0+cu121");
	strcpy(a.v[FP_NCCL], "-");
	fingerprint_format(&a, text, sizeof(text));
	cr_assert_str_eq(text, "driver:535.104.05,torch:2.1.0+cu121,nccl:-");
	cr_assert_eq(fingerprint_parse(S(text), &b, why, sizeof(why)), 0, "%s",
		     why);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
	/* every item at its longest fits the bound */
	for (int i = 0; i < FP_NITEMS; i++)
		memset(a.v[i], '9', FP_MAX_VALUE);
	fingerprint_format(&a, text, sizeof(text));
	cr_assert_eq(fingerprint_parse(S(text), &b, why, sizeof(why)), 0, "%s",
		     why);
	cr_assert_eq(fingerprint_parse("", 0, &b, why, sizeof(why)), 0);
}

Test(fingerprint, wire_hostile, .timeout = 10)
{
	struct crun_fingerprint f;
	char why[200], big[2048];

#define BAD(s, want)                                                           \
	do {                                                                   \
		why[0] = '\0';                                                 \
		cr_assert_eq(fingerprint_parse(S(s), &f, why, sizeof(why)),    \
			     CRUN_EPROTO, "%s", s);                            \
		cr_assert(strstr(why, want) != NULL, "%s: %s", s, why);        \
	} while (0)
	BAD("torch:2.1,torch:2.2", "'torch' given twice");
	BAD("python:3.11", "unknown fingerprint item 'python'");
	BAD("torch", "has no ':'");
	BAD("torch:", "'torch' is empty");
	BAD("torch:2.1,", "ends with a ','");
	BAD("nccl:2.18\"", "'nccl' has a byte outside");
	BAD("cuda:12;rm", "'cuda' has a byte outside");
	BAD("to\001ch:1", "item name has a byte outside");
	memset(big, '7', sizeof(big));
	memcpy(big, "driver:", 7);
	big[7 + FP_MAX_VALUE + 1] = '\0';
	BAD(big, "'driver' longer than 63 bytes");
	big[7 + FP_MAX_VALUE + 1] = '7';
	big[sizeof(big) - 1] = '\0';
	BAD(big, "fingerprint of 2047 bytes");
#undef BAD
}

Test(fingerprint, compare, .timeout = 10)
{
	struct crun_fingerprint f[6];
	const char *hosts[6] = {"n1", "n2", "n3", "n4", "n5", "n6"};
	char out[4096];

	memset(f, 0, sizeof(f));
	for (int i = 0; i < 6; i++) {
		strcpy(f[i].v[FP_DRIVER], "535.104.05");
		strcpy(f[i].v[FP_TORCH], "2.1.0");
	}
	cr_assert_eq(fingerprint_compare(hosts, f, 6, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "");
	/* unknown ("") never differs; absent ("-") does, shown as "none" */
	f[5].v[FP_TORCH][0] = '\0';
	strcpy(f[1].v[FP_DRIVER], "-");
	cr_assert_eq(fingerprint_compare(hosts, f, 6, out, sizeof(out)), 1);
	cr_assert_str_eq(out, "nodes differ in the NVIDIA driver: 535.104.05 "
			      "on n1, n3, n4, n5 and 1 more; none on n2\n");
	strcpy(f[2].v[FP_TORCH], "2.0.1");
	strcpy(f[3].v[FP_NCCL], "2.18.1");
	strcpy(f[4].v[FP_NCCL], "2.19.3");
	cr_assert_eq(fingerprint_compare(hosts, f, 6, out, sizeof(out)), 3);
	cr_assert(strstr(out, "nodes differ in the torch version: 2.1.0 on "
			      "n1, n2, n4, n5; 2.0.1 on n3\n") != NULL,
		  "%s", out);
	cr_assert(strstr(out, "nodes differ in the NCCL version: 2.18.1 on "
			      "n4; 2.19.3 on n5\n") != NULL,
		  "%s", out);
	/* a small buffer: cut, still terminated */
	fingerprint_compare(hosts, f, 6, out, 20);
	cr_assert_eq(strlen(out), 19);
}

Test(fingerprint, descriptor_field, .timeout = 10)
{
	struct rdzv_descr d;
	char why[300];

	cr_assert_eq(rdzv_parse_descr(S("1 0 4 123 node-a 10.0.0.1 trainer "
					"env=driver:535.104.05,torch:2.1.0"),
				      8, &d, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_str_eq(d.fp.v[FP_DRIVER], "535.104.05");
	cr_assert_str_eq(d.fp.v[FP_TORCH], "2.1.0");
	cr_assert_str_eq(d.fp.v[FP_NCCL], "");
	/* without the field: all unknown */
	cr_assert_eq(rdzv_parse_descr(S("1 0 4 123 node-a 10.0.0.1 trainer"),
				      8, &d, why, sizeof(why)),
		     0);
	cr_assert_str_eq(d.fp.v[FP_DRIVER], "");
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 1 evil a r env=torch:\033[2J"),
				      8, &d, why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "'torch' has a byte outside") != NULL, "%s",
		  why);
	cr_assert_str_eq(d.host, "evil");
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 1 h a r env=torch:1 x"), 8, &d,
				      why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_descr(S("0 0 1 1 h a r fp=torch:1"), 8, &d,
				      why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "not env=") != NULL, "%s", why);
}

Test(fingerprint, envcheck_record, .timeout = 10)
{
	char text[RDZV_MAX_ENVCHECK + 1], why[200], big[RDZV_MAX_ENVCHECK + 2];

	cr_assert_eq(rdzv_parse_envcheck(S("-"), text, sizeof(text), why,
					 sizeof(why)),
		     0);
	cr_assert_str_eq(text, "");
	cr_assert_eq(rdzv_parse_envcheck(S("a: 1 on x; 2 on y\nb\n"), text,
					 sizeof(text), why, sizeof(why)),
		     0);
	cr_assert_str_eq(text, "a: 1 on x; 2 on y\nb\n");
	cr_assert_eq(rdzv_parse_envcheck(S("a\033[2J\n"), text, sizeof(text),
					 why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_envcheck(S("a"), text, sizeof(text), why,
					 sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_envcheck(S("a\n\n"), text, sizeof(text), why,
					 sizeof(why)),
		     CRUN_EPROTO);
	cr_assert_eq(rdzv_parse_envcheck("", 0, text, sizeof(text), why,
					 sizeof(why)),
		     CRUN_EPROTO);
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	cr_assert_eq(rdzv_parse_envcheck(big, sizeof(big), text, sizeof(text),
					 why, sizeof(why)),
		     CRUN_EPROTO);
	cr_assert(strstr(why, "at most 4096") != NULL, "%s", why);
}

/* Write len bytes to root/rel, making rel's directories first. */
static void put_at(const char *root, const char *rel, const void *data, size_t len)
{
	char p[512];
	FILE *f;
	int n = snprintf(p, sizeof(p), "%s/%s", root, rel);

	cr_assert(n > 0 && (size_t)n < sizeof(p));
	for (char *q = p + strlen(root) + 1; (q = strchr(q, '/')) != NULL; q++) {
		*q = '\0';
		mkdir(p, 0755);
		*q = '/';
	}
	f = fopen(p, "wb");
	cr_assert_not_null(f, "%s", p);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

#define PUT_TEXT(root, rel, text) put_at(root, rel, text, strlen(text))

/* A fake driver tree and site-packages, read through a real interpreter. */
Test(fingerprint, collect_fake_trees, .timeout = 10)
{
	const char *py = getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
	char root[] = "/tmp/crun-fp-XXXXXX", p[512], e1[600], e2[600], e3[600];
	char *envp[] = {e1, e2, e3, NULL};
	struct crun_fingerprint fp;
	char lib[300], cmd[4096];

	if (access(py, X_OK) != 0)
		cr_skip_test("no %s", py);
	cr_assert_not_null(mkdtemp(root));
	PUT_TEXT(root, "proc/version",
		 "NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
		 "535.104.05  Sat Aug 19 01:15:15 UTC 2023\n");
	snprintf(p, sizeof(p), "%s/proc/gpus", root);
	mkdir(p, 0755);
	PUT_TEXT(root, "site/torch/version.py",
		 "__version__ = '2.3.1+cu121'\ncuda: Optional[str] = '12.1'\n");
	memset(lib, 0, sizeof(lib));
	memcpy(lib + 100, "NCCL version 2.20.5+cuda12.4", 28);
	put_at(root, "site/nvidia/nccl/lib/libnccl.so.2", lib, sizeof(lib));
	snprintf(e1, sizeof(e1), "PYTHONPATH=%s/site", root);
	snprintf(e2, sizeof(e2), "CRUN_NVIDIA_PROC=%s/proc/gpus", root);
	snprintf(e3, sizeof(e3), "CRUN_SYSFS=%s/nosys", root);

	fingerprint_collect(py, envp, 10000, &fp);
	cr_assert_str_eq(fp.v[FP_DRIVER], "535.104.05");
	cr_assert_str_eq(fp.v[FP_TORCH], "2.3.1+cu121");
	cr_assert_str_eq(fp.v[FP_CUDA], "12.1");
	cr_assert_str_eq(fp.v[FP_NCCL], "2.20.5");

	/* the dist-info METADATA wins over the library's string */
	PUT_TEXT(root, "site/nvidia_nccl_cu12-2.21.5.dist-info/METADATA",
		 "Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.21.5\n");
	fingerprint_collect(py, envp, 10000, &fp);
	cr_assert_str_eq(fp.v[FP_NCCL], "2.21.5");

	/* no python entrypoint: the driver only; no driver: "-" */
	snprintf(e2, sizeof(e2), "CRUN_NVIDIA_PROC=%s/none/gpus", root);
	fingerprint_collect(NULL, envp, 10000, &fp);
	cr_assert_str_eq(fp.v[FP_DRIVER], "-");
	cr_assert_str_eq(fp.v[FP_TORCH], "");
	/* torch not where the path is derived from, and an interpreter that
	 * cannot run: the python items stay unknown */
	e1[0] = 'X';
	fingerprint_collect("/nonexistent/python3", envp, 10000, &fp);
	cr_assert_str_eq(fp.v[FP_TORCH], "");
	cr_assert_str_eq(fp.v[FP_NCCL], "");
	e1[0] = 'P';

	/*
	 * A venv whose interpreter never answers (it exits 1): its path is
	 * derived from the names alone, so torch is found without running it.
	 */
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/bin' "
		 "'%s/venv/bin' '%s/venv/lib/python3.42/site-packages/torch' && "
		 "printf '#!/bin/sh\nexit 1\n' >'%s/bin/python3.42' && "
		 "chmod +x '%s/bin/python3.42' && "
		 "ln -s '%s/bin/python3.42' '%s/venv/bin/python3' && "
		 "printf 'home = %s/bin\n' >'%s/venv/pyvenv.cfg' && "
		 "printf \"__version__ = '9.9.9'\\ncuda = None\\n\" "
		 ">'%s/venv/lib/python3.42/site-packages/torch/version.py'",
		 root, root, root, root, root, root, root, root, root, root);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	e1[0] = 'X'; /* no PYTHONPATH */
	snprintf(p, sizeof(p), "%s/venv/bin/python3", root);
	fingerprint_collect(p, envp, 10000, &fp);
	cr_assert_str_eq(fp.v[FP_TORCH], "9.9.9");
	cr_assert_str_eq(fp.v[FP_CUDA], "-");
	cr_assert_str_eq(fp.v[FP_NCCL], "-");

	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	cr_assert_eq(system(p), 0);
}

/*
 * torch/version.py on the path is a FIFO nobody writes (a hung mount does
 * the same to a read): the collection neither blocks on it nor reads it,
 * and the torch found there has no version ("-").
 */
Test(fingerprint, fifo_on_the_path_is_not_waited_for, .timeout = 10)
{
	char root[] = "/tmp/crun-fp-XXXXXX", p[512], e1[600], e2[600];
	char *envp[] = {e1, e2, NULL};
	struct crun_fingerprint fp;

	cr_assert_not_null(mkdtemp(root));
	snprintf(p, sizeof(p), "%s/site", root);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/site/torch", root);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/site/torch/version.py", root);
	cr_assert_eq(mkfifo(p, 0644), 0);
	snprintf(e1, sizeof(e1), "PYTHONPATH=%s/site", root);
	snprintf(e2, sizeof(e2), "CRUN_NVIDIA_PROC=%s/site/torch/x", root);
	/* the driver's file is that FIFO too */
	snprintf(p, sizeof(p), "%s/site/torch/version", root);
	cr_assert_eq(mkfifo(p, 0644), 0);

	fingerprint_collect("/nonexistent/python3", envp, 10000, &fp);
	cr_assert_str_eq(fp.v[FP_TORCH], "-");
	cr_assert_str_eq(fp.v[FP_DRIVER], "-");

	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	cr_assert_eq(system(p), 0);
}

static int fp_status = 1;
static struct crun_fingerprint fp_got;

static void on_fp(const struct crun_fingerprint *fp, int status, void *data)
{
	(void)data;
	fp_got = *fp;
	fp_status = status;
}

/* fingerprint_start reports once on the loop, which then closes cleanly. */
Test(fingerprint, start_reports_on_the_loop, .timeout = 10)
{
	struct crun_fp_read *r;
	uv_loop_t loop;

	setenv("CRUN_NVIDIA_PROC", "/nonexistent/gpus", 1);
	setenv("CRUN_SYSFS", "/nonexistent", 1);
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(fingerprint_start(&loop, NULL, 1000, on_fp, NULL, &r), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(fp_status, 0);
	cr_assert_str_eq(fp_got.v[FP_DRIVER], "-");
	cr_assert_eq(uv_loop_close(&loop), 0);

	/* canceled at once: the callback says so, and the loop closes */
	fp_status = 1;
	cr_assert_eq(uv_loop_init(&loop), 0);
	cr_assert_eq(fingerprint_start(&loop, NULL, 1000, on_fp, NULL, &r), 0);
	fingerprint_cancel(r);
	cr_assert_eq(fp_status, CRUN_ECANCELED);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}

/* Only the kernel's own driver files to read: at once; anything else waits
 * for a thread. */
Test(fingerprint, now_only_for_the_kernel_s_files, .timeout = 10)
{
	struct crun_fingerprint fp;

	unsetenv("CRUN_NVIDIA_PROC");
	unsetenv("CRUN_SYSFS");
	memset(&fp, 'x', sizeof(fp));
	cr_assert_eq(fingerprint_now(NULL, &fp), 0);
	cr_assert_str_eq(fp.v[FP_TORCH], "");
	cr_assert(*fp.v[FP_DRIVER] != '\0' && *fp.v[FP_DRIVER] != 'x', "driver '%s'",
		  fp.v[FP_DRIVER]);
	cr_assert_eq(fingerprint_now("/usr/bin/python3", &fp), -1);
	setenv("CRUN_NVIDIA_PROC", "/nonexistent/gpus", 1);
	cr_assert_eq(fingerprint_now(NULL, &fp), -1);
	unsetenv("CRUN_NVIDIA_PROC");
	setenv("CRUN_SYSFS", "/nonexistent", 1);
	cr_assert_eq(fingerprint_now(NULL, &fp), -1);
	unsetenv("CRUN_SYSFS");
}

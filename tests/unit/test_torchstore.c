/*
 * Which workers' store a torch accepts (torchstore.h): the probe's answers
 * read, nonsense read as "unknown", and the cache: a round trip, a key per
 * interpreter and PYTHONPATH, an answer for a changed torch or interpreter
 * not believed, and files that are not ours (a link, open to others, too
 * long, another format) ignored.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "crun/torchstore.h"

#define S(s) (s), strlen(s)

Test(torchstore, parse_answers)
{
	struct torchstore ts;

	torchstore_parse(S("torch /x/torch\nstore agent\n"), &ts);
	cr_assert_eq(ts.kind, TORCHSTORE_AGENT);
	cr_assert_str_eq(ts.torch_dir, "/x/torch");
	torchstore_parse(S("torch /x/torch\nstore no-libuv use_libuv was "
			   "requested but PyTorch was build without libuv "
			   "support\n"),
			 &ts);
	cr_assert_eq(ts.kind, TORCHSTORE_NO_LIBUV);
	cr_assert(strstr(ts.why, "without libuv") != NULL);
	torchstore_parse(S("torch /x/torch\nstore no-distributed"), &ts);
	cr_assert_eq(ts.kind, TORCHSTORE_NO_DIST);
	torchstore_parse(S("torch /x/torch\nstore no-agent-store\n"), &ts);
	cr_assert_eq(ts.kind, TORCHSTORE_NO_AGENT_STORE);
	cr_assert_str_eq(torchstore_kind_name(ts.kind), "no-agent-store");
	torchstore_parse(S("store unknown cannot import torch: No module"), &ts);
	cr_assert_eq(ts.kind, TORCHSTORE_UNKNOWN);
	cr_assert_str_eq(ts.torch_dir, "");
	cr_assert_str_eq(ts.why, "cannot import torch: No module");
}

Test(torchstore, parse_nonsense_is_unknown)
{
	static const char *const bad[] = {
	    "", "store", "store agents", "store no-libuvx", "stores agent",
	    "store no-agent-storex",
	    "torch relative/dir\nstore magic", "\x01\xff store agent"};
	struct torchstore ts;
	char big[TORCHSTORE_MAX_OUTPUT + 64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		torchstore_parse(S(bad[i]), &ts);
		cr_assert_eq(ts.kind, TORCHSTORE_UNKNOWN, "%zu", i);
		cr_assert(ts.why[0] != '\0', "%zu", i);
	}
	/* A relative or NUL-bearing directory is not taken. */
	torchstore_parse("torch a/b\nstore agent", 21, &ts);
	cr_assert_str_eq(ts.torch_dir, "");
	torchstore_parse("torch /a\0b\nstore agent", 22, &ts);
	cr_assert_str_eq(ts.torch_dir, "");
	/* Control bytes of the message are shown as '?'. */
	torchstore_parse(S("store unknown a\tb"), &ts);
	cr_assert_str_eq(ts.why, "a?b");
	/* Past the cap nothing is read. */
	memset(big, 'x', sizeof(big));
	memcpy(big + TORCHSTORE_MAX_OUTPUT, "\nstore agent", 12);
	torchstore_parse(big, sizeof(big), &ts);
	cr_assert_eq(ts.kind, TORCHSTORE_UNKNOWN);
}

static char dir[64], python[128], torch_dir[128], version_py[160];

static void touch(const char *path, long sec)
{
	struct timeval tv[2] = {{sec, 0}, {sec, 0}};
	int fd = open(path, O_WRONLY | O_CREAT, 0755);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "x", 1), 1);
	close(fd);
	cr_assert_eq(utimes(path, tv), 0);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_torchstore_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(python, sizeof(python), "%s/python", dir);
	snprintf(torch_dir, sizeof(torch_dir), "%s/torch", dir);
	snprintf(version_py, sizeof(version_py), "%s/version.py", torch_dir);
	cr_assert_eq(mkdir(torch_dir, 0755), 0);
	touch(python, 1000);
	touch(version_py, 2000);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static struct torchstore answer(enum torchstore_kind k)
{
	struct torchstore ts;

	memset(&ts, 0, sizeof(ts));
	ts.kind = k;
	snprintf(ts.torch_dir, sizeof(ts.torch_dir), "%s", torch_dir);
	return ts;
}

TestSuite(torchstore_cache, .init = setup, .fini = teardown);

Test(torchstore_cache, round_trip_per_key)
{
	struct torchstore ts = answer(TORCHSTORE_NO_LIBUV), got;
	char path[512], other[512];

	cr_assert_eq(torchstore_cache_path(dir, python, "/p", path,
					   sizeof(path)),
		     0);
	cr_assert_eq(torchstore_cache_load(path, python, "/p", &got), -1);
	cr_assert_eq(torchstore_cache_save(path, python, "/p", &ts), 0);
	cr_assert_eq(torchstore_cache_load(path, python, "/p", &got), 0);
	cr_assert_eq(got.kind, TORCHSTORE_NO_LIBUV);
	cr_assert_str_eq(got.torch_dir, torch_dir);
	/* Another PYTHONPATH is another file, and this one is not its. */
	cr_assert_eq(torchstore_cache_path(dir, python, NULL, other,
					   sizeof(other)),
		     0);
	cr_assert_str_neq(path, other);
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), -1);
	cr_assert_eq(got.kind, TORCHSTORE_UNKNOWN);
	/* Unknown answers are not kept. */
	ts.kind = TORCHSTORE_UNKNOWN;
	cr_assert_lt(torchstore_cache_save(other, python, NULL, &ts), 0);
	cr_assert_neq(access(other, F_OK), 0);
}

Test(torchstore_cache, changed_torch_or_interpreter_is_asked_again)
{
	struct torchstore ts = answer(TORCHSTORE_AGENT), got;
	char path[512];

	cr_assert_eq(torchstore_cache_path(dir, python, NULL, path,
					   sizeof(path)),
		     0);
	cr_assert_eq(torchstore_cache_save(path, python, NULL, &ts), 0);
	touch(version_py, 3000); /* torch upgraded */
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), -1);
	cr_assert_eq(torchstore_cache_save(path, python, NULL, &ts), 0);
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), 0);
	touch(python, 4000); /* the interpreter replaced */
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), -1);
	/* torch gone: nothing to check the answer against, nothing kept */
	cr_assert_eq(unlink(version_py), 0);
	cr_assert_lt(torchstore_cache_save(path, python, NULL, &ts), 0);
}

Test(torchstore_cache, files_not_ours_are_ignored)
{
	struct torchstore ts = answer(TORCHSTORE_AGENT), got;
	char path[512], real[600];
	FILE *f;

	cr_assert_eq(torchstore_cache_path(dir, python, NULL, path,
					   sizeof(path)),
		     0);
	cr_assert_eq(torchstore_cache_save(path, python, NULL, &ts), 0);
	/* open to others' writes */
	cr_assert_eq(chmod(path, 0666), 0);
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), -1);
	cr_assert_eq(chmod(path, 0600), 0);
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), 0);
	/* a link to a valid answer */
	snprintf(real, sizeof(real), "%s.real", path);
	cr_assert_eq(rename(path, real), 0);
	cr_assert_eq(symlink(real, path), 0);
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), -1);
	cr_assert_eq(unlink(path), 0);
	/* another format, then trailing bytes past a valid answer */
	cr_assert_not_null(f = fopen(path, "w"));
	fprintf(f, "crun-torchstore 2\nstore agent\n");
	fclose(f);
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), -1);
	cr_assert_eq(torchstore_cache_save(path, python, NULL, &ts), 0);
	cr_assert_not_null(f = fopen(path, "a"));
	fprintf(f, "more\n");
	fclose(f);
	cr_assert_eq(torchstore_cache_load(path, python, NULL, &got), -1);
	/* a relative interpreter names the same file as its absolute path */
	{
		char rel[512], abs[512], cwd[512];

		cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
		cr_assert_eq(chdir(dir), 0);
		cr_assert_eq(torchstore_cache_path(dir, "./python", NULL, rel,
						   sizeof(rel)),
			     0);
		cr_assert_eq(torchstore_cache_path(dir, python, NULL, abs,
						   sizeof(abs)),
			     0);
		cr_assert_eq(chdir(cwd), 0);
		cr_assert_str_eq(rel, abs);
	}
}

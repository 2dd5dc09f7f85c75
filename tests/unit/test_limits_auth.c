/*
 * The secret file's size (src/store/auth.c) at its edge: a file of
 * CRUN_AUTH_MAX_SECRET bytes is a key (the same as the bytes given to
 * auth_key_from), one byte more is refused naming the bound.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crun/auth.h"
#include "crun/err.h"

static void write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, p, n), (ssize_t)n);
	close(fd);
}

Test(limits_auth, secret_size, .timeout = 10)
{
	static char big[CRUN_AUTH_MAX_SECRET + 1];
	char dir[] = "/tmp/crun-limits-auth-XXXXXX", path[300], err[400];
	struct crun_auth_key k1, k2;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s", dir);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	write_file(path, big, CRUN_AUTH_MAX_SECRET);
	cr_assert_eq(auth_key_load(path, &k1, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(auth_key_from(big, CRUN_AUTH_MAX_SECRET, &k2), 0);
	cr_assert_eq(memcmp(k1.k, k2.k, sizeof(k1.k)), 0);
	write_file(path, big, CRUN_AUTH_MAX_SECRET + 1);
	cr_assert_eq(auth_key_load(path, &k1, err, sizeof(err)), CRUN_ETOOBIG);
	cr_assert_not_null(strstr(err, "is larger than 4096 bytes"), "%s", err);
	/* One byte of secret is enough. */
	write_file(path, "x", 1);
	cr_assert_eq(auth_key_load(path, &k1, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	rmdir(dir);
}

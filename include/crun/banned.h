/*
 * Functions crun never calls, after git's banned.h: each has a bounded or
 * checked replacement (snprintf, memcpy with a known length, strtol).
 *
 * The Makefile puts it before every unit of src/, agent/ and launcher/
 * (-include): the C library's headers that declare these come first, so
 * the macros below never meet their prototypes.
 */
#ifndef CRUN_BANNED_H
#define CRUN_BANNED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef atoi
#define atoi(x) BANNED(atoi)

#endif

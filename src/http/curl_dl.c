/*
 * libcurl, loaded the first time it is used (only the etcd backend uses it).
 *
 * Linked in, libcurl and the libraries it needs (gnutls, nettle, krb5,
 * ldap, ssh2, rtmp, ... 30 of them) cost every crun process their loading
 * and relocation at exec: on this 2-core machine about 3.5x the start-up
 * CPU of crun's own libraries, the largest share of an agent's CPU in a
 * 1024-agent job. These definitions carry libcurl's own names and forward
 * to the library opened with dlopen, so src/http/etcd.c and src/http/curl_uv.c
 * stay written against curl.h and nothing links libcurl.
 *
 * Happy path: the first call opens libcurl (libcurl.so.4; on Windows
 * curl's own libcurl-x64.dll, or MSYS2's libcurl-4.dll, through libuv's
 * uv_dlopen) and resolves every function below. Failure modes: the
 * library or a symbol is missing: the call fails as libcurl itself reports
 * failure (CURLE_FAILED_INIT, NULL, CURLM_*), and one line on stderr says
 * why.
 */
#define CURL_DISABLE_TYPECHECK 1
#include <stdarg.h>
#include <stdio.h>
#include <uv.h>

#include <curl/curl.h>

#include "crun/log.h"

typedef void (*curl_fn)(void);

#ifdef _WIN32
static const char *const curl_dl_names[] = {"libcurl-x64.dll", "libcurl-4.dll",
					    "libcurl.dll"};
#else
static const char *const curl_dl_names[] = {"libcurl.so.4"};
#endif

static struct {
	int tried;
	int open;
	uv_lib_t lib;
	const char *name; /* the file opened */
	char err[256];
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	CURLcode (*easy_pause)(CURL *, int);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_cleanup)(CURLM *);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
	CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
} dl;

/* Resolve name into *slot; 0 or -1 (dl.err says which). */
static int curl_dl_sym(void *slot, const char *name)
{
	void *p = NULL;

	if (uv_dlsym(&dl.lib, name, &p) != 0 || p == NULL) {
		snprintf(dl.err, sizeof(dl.err), "%s lacks '%s'", dl.name,
			 name);
		return -1;
	}
	*(void **)slot = p;
	return 0;
}

/* Open libcurl once; 0 when every function is there. */
static int curl_dl_load(void)
{
	size_t i;

	if (dl.tried)
		return dl.open ? 0 : -1;
	dl.tried = 1;
	for (i = 0; i < sizeof(curl_dl_names) / sizeof(curl_dl_names[0]); i++) {
		if (uv_dlopen(curl_dl_names[i], &dl.lib) == 0) {
			dl.name = curl_dl_names[i];
			dl.open = 1;
			break;
		}
		if (i == 0)
			snprintf(dl.err, sizeof(dl.err),
				 "cannot load libcurl: %s",
				 uv_dlerror(&dl.lib));
		uv_dlclose(&dl.lib);
	}
	if (!dl.open) {
		log_say("%s (the etcd backend needs libcurl)", dl.err);
		return -1;
	}
	if (curl_dl_sym(&dl.global_init, "curl_global_init") ||
	    curl_dl_sym(&dl.easy_init, "curl_easy_init") ||
	    curl_dl_sym(&dl.easy_cleanup, "curl_easy_cleanup") ||
	    curl_dl_sym(&dl.easy_setopt, "curl_easy_setopt") ||
	    curl_dl_sym(&dl.easy_getinfo, "curl_easy_getinfo") ||
	    curl_dl_sym(&dl.easy_strerror, "curl_easy_strerror") ||
	    curl_dl_sym(&dl.easy_pause, "curl_easy_pause") ||
	    curl_dl_sym(&dl.multi_init, "curl_multi_init") ||
	    curl_dl_sym(&dl.multi_cleanup, "curl_multi_cleanup") ||
	    curl_dl_sym(&dl.multi_add_handle, "curl_multi_add_handle") ||
	    curl_dl_sym(&dl.multi_remove_handle, "curl_multi_remove_handle") ||
	    curl_dl_sym(&dl.multi_assign, "curl_multi_assign") ||
	    curl_dl_sym(&dl.multi_info_read, "curl_multi_info_read") ||
	    curl_dl_sym(&dl.multi_setopt, "curl_multi_setopt") ||
	    curl_dl_sym(&dl.multi_socket_action, "curl_multi_socket_action") ||
	    curl_dl_sym(&dl.slist_append, "curl_slist_append") ||
	    curl_dl_sym(&dl.slist_free_all, "curl_slist_free_all")) {
		uv_dlclose(&dl.lib);
		dl.open = 0;
	}
	if (!dl.open)
		log_say("%s (the etcd backend needs libcurl)", dl.err);
	return dl.open ? 0 : -1;
}

CURLcode curl_global_init(long flags)
{
	return curl_dl_load() ? CURLE_FAILED_INIT : dl.global_init(flags);
}

CURL *curl_easy_init(void)
{
	return curl_dl_load() ? NULL : dl.easy_init();
}

void curl_easy_cleanup(CURL *h)
{
	if (dl.open)
		dl.easy_cleanup(h);
}

/*
 * rc = fn(h, opt, the variadic argument of ap): its type follows from the
 * option's number, as in libcurl itself (easy and multi options alike):
 * long, object or function pointer, curl_off_t, blob.
 */
#define CURL_DL_SETOPT(rc, fn, h, opt, ap)                                     \
	do {                                                                   \
		if ((opt) < CURLOPTTYPE_OBJECTPOINT)                           \
			rc = fn(h, opt, va_arg(ap, long));                     \
		else if ((opt) < CURLOPTTYPE_FUNCTIONPOINT)                    \
			rc = fn(h, opt, va_arg(ap, void *));                   \
		else if ((opt) < CURLOPTTYPE_OFF_T)                            \
			rc = fn(h, opt, va_arg(ap, curl_fn));                  \
		else if ((opt) < CURLOPTTYPE_BLOB)                             \
			rc = fn(h, opt, va_arg(ap, curl_off_t));               \
		else                                                           \
			rc = fn(h, opt, va_arg(ap, void *));                   \
	} while (0)

CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
	va_list ap;
	CURLcode rc;

	if (!dl.open)
		return CURLE_FAILED_INIT;
	va_start(ap, opt);
	CURL_DL_SETOPT(rc, dl.easy_setopt, h, opt, ap);
	va_end(ap);
	return rc;
}

/* Every CURLINFO takes a pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *h, CURLINFO info, ...)
{
	va_list ap;
	CURLcode rc;

	if (!dl.open)
		return CURLE_FAILED_INIT;
	va_start(ap, info);
	rc = dl.easy_getinfo(h, info, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

const char *curl_easy_strerror(CURLcode rc)
{
	return dl.open ? dl.easy_strerror(rc) : dl.err;
}

CURLcode curl_easy_pause(CURL *h, int bitmask)
{
	return dl.open ? dl.easy_pause(h, bitmask) : CURLE_FAILED_INIT;
}

CURLM *curl_multi_init(void)
{
	return curl_dl_load() ? NULL : dl.multi_init();
}

CURLMcode curl_multi_cleanup(CURLM *m)
{
	return dl.open ? dl.multi_cleanup(m) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_add_handle(CURLM *m, CURL *h)
{
	return dl.open ? dl.multi_add_handle(m, h) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_remove_handle(CURLM *m, CURL *h)
{
	return dl.open ? dl.multi_remove_handle(m, h) : CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_assign(CURLM *m, curl_socket_t s, void *p)
{
	return dl.open ? dl.multi_assign(m, s, p) : CURLM_BAD_HANDLE;
}

CURLMsg *curl_multi_info_read(CURLM *m, int *left)
{
	if (!dl.open) {
		*left = 0;
		return NULL;
	}
	return dl.multi_info_read(m, left);
}

CURLMcode curl_multi_setopt(CURLM *m, CURLMoption opt, ...)
{
	va_list ap;
	CURLMcode rc;

	if (!dl.open)
		return CURLM_BAD_HANDLE;
	va_start(ap, opt);
	CURL_DL_SETOPT(rc, dl.multi_setopt, m, opt, ap);
	va_end(ap);
	return rc;
}

CURLMcode curl_multi_socket_action(CURLM *m, curl_socket_t s, int ev,
				   int *running)
{
	return dl.open ? dl.multi_socket_action(m, s, ev, running)
		       : CURLM_BAD_HANDLE;
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
	return curl_dl_load() ? NULL : dl.slist_append(l, s);
}

void curl_slist_free_all(struct curl_slist *l)
{
	if (dl.open)
		dl.slist_free_all(l);
}

/*
 * libmicrohttpd, loaded the first time it is used (only --metrics_port
 * starts its server), like libcurl in curl_dl.c.
 *
 * Linked in, libmicrohttpd brings gnutls and eight more libraries that
 * every crun process would load and relocate at exec: about 4 ms of
 * start-up CPU each, which a 1024-agent job pays 1024 times. These
 * definitions carry the library's own names and forward to the library
 * opened with dlopen, so agent/metrics.c stays written against
 * microhttpd.h and nothing links libmicrohttpd.
 *
 * Happy path: MHD_start_daemon opens libmicrohttpd (libmicrohttpd.so.12;
 * on Windows the project's libmicrohttpd-dll.dll or MSYS2's
 * libmicrohttpd-12.dll, through libuv's uv_dlopen) and resolves every
 * function below. Failure modes: the library or a symbol is missing:
 * MHD_start_daemon returns NULL, as the library does when it cannot start,
 * and one line on stderr says why; the other calls only follow a started
 * daemon.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <uv.h>

#include <microhttpd.h>

#include "crun/log.h"

#ifdef _WIN32
static const char *const mhd_dl_names[] = {"libmicrohttpd-dll.dll",
					   "libmicrohttpd-12.dll"};
#else
static const char *const mhd_dl_names[] = {"libmicrohttpd.so.12"};
#endif

static struct {
	int tried;
	int open;
	uv_lib_t lib;
	const char *name; /* the file opened */
	struct MHD_Daemon *(*start_daemon_va)(unsigned int, uint16_t,
					      MHD_AcceptPolicyCallback, void *,
					      MHD_AccessHandlerCallback, void *,
					      va_list);
	void (*stop_daemon)(struct MHD_Daemon *);
	struct MHD_Response *(*create_response_from_buffer)(
	    size_t, void *, enum MHD_ResponseMemoryMode);
	enum MHD_Result (*add_response_header)(struct MHD_Response *,
					       const char *, const char *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
	void (*destroy_response)(struct MHD_Response *);
	const union MHD_ConnectionInfo *(*get_connection_info)(
	    struct MHD_Connection *, enum MHD_ConnectionInfoType, ...);
} dl;

/* Resolve name into *slot; 0 or -1 (and one line saying which). */
static int mhd_dl_sym(void *slot, const char *name)
{
	void *p = NULL;

	if (uv_dlsym(&dl.lib, name, &p) != 0 || p == NULL) {
		log_say("%s lacks '%s'", dl.name, name);
		return -1;
	}
	*(void **)slot = p;
	return 0;
}

/* Open libmicrohttpd once; 0 when every function is there. */
static int mhd_dl_load(void)
{
	char err[256] = "";
	size_t i;

	if (dl.tried)
		return dl.open ? 0 : -1;
	dl.tried = 1;
	for (i = 0; i < sizeof(mhd_dl_names) / sizeof(mhd_dl_names[0]); i++) {
		if (uv_dlopen(mhd_dl_names[i], &dl.lib) == 0) {
			dl.name = mhd_dl_names[i];
			dl.open = 1;
			break;
		}
		if (i == 0)
			snprintf(err, sizeof(err), "%s", uv_dlerror(&dl.lib));
		uv_dlclose(&dl.lib);
	}
	if (!dl.open) {
		log_say("cannot load libmicrohttpd: %s (the metrics server "
			"needs it)",
			err);
		return -1;
	}
	if (mhd_dl_sym(&dl.start_daemon_va, "MHD_start_daemon_va") ||
	    mhd_dl_sym(&dl.stop_daemon, "MHD_stop_daemon") ||
	    mhd_dl_sym(&dl.create_response_from_buffer,
		       "MHD_create_response_from_buffer") ||
	    mhd_dl_sym(&dl.add_response_header, "MHD_add_response_header") ||
	    mhd_dl_sym(&dl.queue_response, "MHD_queue_response") ||
	    mhd_dl_sym(&dl.destroy_response, "MHD_destroy_response") ||
	    mhd_dl_sym(&dl.get_connection_info, "MHD_get_connection_info")) {
		uv_dlclose(&dl.lib);
		dl.open = 0;
		return -1;
	}
	return 0;
}

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port,
				    MHD_AcceptPolicyCallback apc, void *apc_cls,
				    MHD_AccessHandlerCallback dh, void *dh_cls,
				    ...)
{
	struct MHD_Daemon *d;
	va_list ap;

	if (mhd_dl_load())
		return NULL;
	va_start(ap, dh_cls);
	d = dl.start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

void MHD_stop_daemon(struct MHD_Daemon *daemon)
{
	if (dl.open)
		dl.stop_daemon(daemon);
}

struct MHD_Response *
MHD_create_response_from_buffer(size_t size, void *buffer,
				enum MHD_ResponseMemoryMode mode)
{
	return dl.open ? dl.create_response_from_buffer(size, buffer, mode)
		       : NULL;
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *response,
					const char *header, const char *content)
{
	return dl.open ? dl.add_response_header(response, header, content)
		       : MHD_NO;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection,
				   unsigned int status_code,
				   struct MHD_Response *response)
{
	return dl.open ? dl.queue_response(connection, status_code, response)
		       : MHD_NO;
}

void MHD_destroy_response(struct MHD_Response *response)
{
	if (dl.open)
		dl.destroy_response(response);
}

/* Only the kinds that take no further argument (CONNECTION_FD,
 * SOCKET_CONTEXT, ...): the wrapper passes none on. */
const union MHD_ConnectionInfo *
MHD_get_connection_info(struct MHD_Connection *connection,
			enum MHD_ConnectionInfoType info_type, ...)
{
	return dl.open ? dl.get_connection_info(connection, info_type) : NULL;
}

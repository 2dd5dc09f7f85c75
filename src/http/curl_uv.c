/*
 * libcurl on the libuv loop.
 *
 * Happy path: curl_uv_add hands an easy handle to the multi handle; curl
 * asks (socket callback) for a uv_poll_t on each socket it uses and (timer
 * callback) for a timeout; poll events and timer expiry go back to curl
 * through curl_multi_socket_action, and every finished transfer found by
 * curl_multi_info_read is removed and reported to its done callback.
 *
 * Failure modes: curl reports every transfer error (resolve, connect,
 * timeout, TLS) as the transfer's result; a poll that cannot start is
 * reported to curl as an error event so the transfer fails rather than
 * hangs. Closing removes every transfer without calling back.
 */
#include <assert.h>
#include <stdlib.h>

#include "crun/curl_uv.h"

struct cu_sock;

struct curl_uv {
	uv_loop_t *loop;
	CURLM *multi;
	uv_timer_t timer;
	struct cu_sock *socks; /* every socket with a poll handle */
	int open; /* handles not yet closed (the timer and polls) */
	int closing;
	curl_uv_close_cb close_cb;
	void *close_data;
};

/* One socket curl uses: its poll handle. */
struct cu_sock {
	uv_poll_t poll;
	curl_socket_t fd;
	struct curl_uv *cu;
	struct cu_sock *next, **pprev;
};

/* What a transfer reports to (CURLOPT_PRIVATE). */
struct cu_xfer {
	curl_uv_done_cb done;
	void *arg;
};

static void cu_handle_closed(struct curl_uv *cu)
{
	if (--cu->open == 0 && cu->closing && cu->close_cb)
		cu->close_cb(cu->close_data);
}

static void cu_on_sock_closed(uv_handle_t *h)
{
	struct cu_sock *s = h->data;
	struct curl_uv *cu = s->cu;

	free(s);
	cu_handle_closed(cu);
}

/* Report every finished transfer. */
static void cu_check_done(struct curl_uv *cu)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(cu->multi, &left)) != NULL) {
		struct cu_xfer *x = NULL;
		CURL *easy = m->easy_handle;
		CURLcode res = m->data.result;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
		curl_multi_remove_handle(cu->multi, easy);
		curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
		if (x) {
			curl_uv_done_cb done = x->done;
			void *arg = x->arg;

			free(x);
			done(easy, res, arg);
		}
	}
}

static void cu_on_poll(uv_poll_t *p, int status, int events)
{
	struct cu_sock *s = p->data;
	struct curl_uv *cu = s->cu;
	int flags = 0, running;

	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(cu->multi, s->fd, flags, &running);
	cu_check_done(cu);
}

static void cu_on_timer(uv_timer_t *t)
{
	struct curl_uv *cu = t->data;
	int running;

	curl_multi_socket_action(cu->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	cu_check_done(cu);
}

static int cu_timer_cb(CURLM *multi, long ms, void *userp)
{
	struct curl_uv *cu = userp;

	(void)multi;
	if (ms < 0)
		uv_timer_stop(&cu->timer);
	else
		uv_timer_start(&cu->timer, cu_on_timer, (uint64_t)ms, 0);
	return 0;
}

static void cu_sock_close(struct cu_sock *s)
{
	uv_poll_stop(&s->poll);
	*s->pprev = s->next;
	if (s->next)
		s->next->pprev = s->pprev;
	uv_close((uv_handle_t *)&s->poll, cu_on_sock_closed);
}

static int cu_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp,
			void *sockp)
{
	struct curl_uv *cu = userp;
	struct cu_sock *s = sockp;
	int events = 0;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (s) {
			curl_multi_assign(cu->multi, fd, NULL);
			cu_sock_close(s);
		}
		return 0;
	}
	if (s == NULL) {
		s = calloc(1, sizeof(*s));
		if (s == NULL)
			return -1;
		s->fd = fd;
		s->cu = cu;
		if (uv_poll_init_socket(cu->loop, &s->poll, fd)) {
			free(s);
			return -1;
		}
		s->poll.data = s;
		s->next = cu->socks;
		s->pprev = &cu->socks;
		if (cu->socks)
			cu->socks->pprev = &s->next;
		cu->socks = s;
		cu->open++;
		curl_multi_assign(cu->multi, fd, s);
	}
	if (what & CURL_POLL_IN)
		events |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		events |= UV_WRITABLE;
	return uv_poll_start(&s->poll, events, cu_on_poll) ? -1 : 0;
}

int curl_uv_new(uv_loop_t *loop, struct curl_uv **out)
{
	struct curl_uv *cu = calloc(1, sizeof(*cu));

	if (cu == NULL)
		return UV_ENOMEM;
	cu->loop = loop;
	cu->multi = curl_multi_init();
	if (cu->multi == NULL) {
		free(cu);
		return UV_ENOMEM;
	}
	curl_multi_setopt(cu->multi, CURLMOPT_SOCKETFUNCTION, cu_socket_cb);
	curl_multi_setopt(cu->multi, CURLMOPT_SOCKETDATA, cu);
	curl_multi_setopt(cu->multi, CURLMOPT_TIMERFUNCTION, cu_timer_cb);
	curl_multi_setopt(cu->multi, CURLMOPT_TIMERDATA, cu);
	uv_timer_init(loop, &cu->timer);
	cu->timer.data = cu;
	cu->open = 1;
	*out = cu;
	return 0;
}

int curl_uv_add(struct curl_uv *cu, CURL *easy, curl_uv_done_cb done, void *arg)
{
	struct cu_xfer *x;

	if (cu->closing)
		return UV_ECANCELED;
	x = malloc(sizeof(*x));
	if (x == NULL)
		return UV_ENOMEM;
	x->done = done;
	x->arg = arg;
	curl_easy_setopt(easy, CURLOPT_PRIVATE, x);
	if (curl_multi_add_handle(cu->multi, easy) != CURLM_OK) {
		curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
		free(x);
		return UV_EINVAL;
	}
	return 0;
}

void curl_uv_remove(struct curl_uv *cu, CURL *easy)
{
	struct cu_xfer *x = NULL;

	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
	if (x == NULL)
		return; /* not running */
	curl_multi_remove_handle(cu->multi, easy);
	curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
	free(x);
}

static void cu_on_timer_closed(uv_handle_t *h)
{
	cu_handle_closed(h->data);
}

void curl_uv_close(struct curl_uv *cu, curl_uv_close_cb cb, void *data)
{
	assert(!cu->closing);
	cu->closing = 1;
	cu->close_cb = cb;
	cu->close_data = data;
	/* Transfers still running belong to their owners, who remove them
	 * before closing. Sockets curl keeps (its connection cache) stop
	 * being polled before curl closes them. */
	for (struct cu_sock *s = cu->socks; s; s = s->next)
		uv_poll_stop(&s->poll);
	curl_multi_cleanup(cu->multi);
	while (cu->socks)
		cu_sock_close(cu->socks);
	cu->multi = NULL;
	uv_close((uv_handle_t *)&cu->timer, cu_on_timer_closed);
}

void curl_uv_free(struct curl_uv *cu)
{
	free(cu);
}

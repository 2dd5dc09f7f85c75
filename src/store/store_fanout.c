/*
 * Parallel sends for the store's mass wake-ups (see store_fanout.h).
 *
 * Happy path: the first call with a second CPU starts one helper thread;
 * each call hands it the second half of the items (semaphore "go"), sends
 * the first half itself, and waits for the helper ("done"). The helper
 * touches only its items' fds and buffers, which the caller does not touch
 * until "done", so no lock guards anything else.
 *
 * Failure modes: no second CPU, or the thread or a semaphore cannot be
 * made: every send on the calling thread, one after the other.
 * A send error is the item's rc; the caller closes that connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <uv.h>
#ifndef _WIN32
#include <sys/socket.h>
#endif

#include "store_fanout.h"

struct store_fanout {
	int state; /* 0 not tried, 1 helper running, -1 one thread only */
	int quit;
	uv_thread_t tid;
	uv_sem_t go, done;
	struct store_fan_item *items; /* the helper's share */
	size_t n;
};

#ifdef _WIN32
void store_fanout_send(struct store_fanout **fp, struct store_fan_item *items,
		       size_t n)
{
	for (size_t i = 0; i < n; i++)
		items[i].rc = 0;
}

void store_fanout_free(struct store_fanout *f)
{
}
#else
static void store_fan_send(struct store_fan_item *it, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ssize_t r;

		do
			r = send(it[i].fd, it[i].data, it[i].len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		while (r < 0 && errno == EINTR);
		if (r >= 0)
			it[i].rc = (int)r;
		else if (errno == EAGAIN || errno == EWOULDBLOCK)
			it[i].rc = UV_EAGAIN;
		else
			it[i].rc = -errno;
	}
}

static void store_fan_main(void *arg)
{
	struct store_fanout *f = arg;

	for (;;) {
		uv_sem_wait(&f->go);
		if (f->quit)
			return;
		store_fan_send(f->items, f->n);
		uv_sem_post(&f->done);
	}
}

/* Start the helper; f->state says whether it runs. */
static void store_fan_start(struct store_fanout *f)
{
	f->state = -1;
	if (uv_available_parallelism() < 2 || uv_sem_init(&f->go, 0) != 0)
		return;
	if (uv_sem_init(&f->done, 0) != 0) {
		uv_sem_destroy(&f->go);
		return;
	}
	if (uv_thread_create(&f->tid, store_fan_main, f) != 0) {
		uv_sem_destroy(&f->go);
		uv_sem_destroy(&f->done);
		return;
	}
	f->state = 1;
}

void store_fanout_send(struct store_fanout **fp, struct store_fan_item *items,
		       size_t n)
{
	struct store_fanout *f = *fp;
	size_t half = n / 2;

	if (n >= STORE_FANOUT_MIN && f == NULL && (f = calloc(1, sizeof(*f))))
		*fp = f;
	if (f != NULL && f->state == 0 && n >= STORE_FANOUT_MIN)
		store_fan_start(f);
	if (n < STORE_FANOUT_MIN || f == NULL || f->state != 1) {
		store_fan_send(items, n);
		return;
	}
	f->items = items + half;
	f->n = n - half;
	uv_sem_post(&f->go);
	store_fan_send(items, half);
	uv_sem_wait(&f->done);
}

void store_fanout_free(struct store_fanout *f)
{
	if (f == NULL)
		return;
	if (f->state == 1) {
		f->quit = 1;
		uv_sem_post(&f->go);
		uv_thread_join(&f->tid);
		uv_sem_destroy(&f->go);
		uv_sem_destroy(&f->done);
	}
	free(f);
}
#endif

/*
 * Many small replies sent at once on two threads (store_fanout.c): when a
 * key that thousands of clients wait on is set (the barrier of a job's
 * start), the store answers every waiter in one pass, and each send(2) is
 * a few microseconds of the kernel's TCP work. Private to libcrun.
 */
#ifndef CRUN_STORE_FANOUT_H
#define CRUN_STORE_FANOUT_H

#include <stddef.h>
#include <uv.h>

/* Below this many sends, one thread does them (a hand-over costs more). */
#define STORE_FANOUT_MIN 256

/* One send: len bytes at data on socket fd; rc is what it did. */
struct store_fan_item {
	void *conn; /* the caller's, untouched */
	uv_os_fd_t fd;
	const void *data;
	size_t len;
	int rc; /* bytes sent (maybe fewer than len), UV_EAGAIN, or a UV error
		 */
};

struct store_fanout;

/**
 * Send every item once (non-blocking, MSG_NOSIGNAL), the second half on a
 * helper thread started on first use, and return when all are done: the
 * caller's loop never runs concurrently with the helper. Fewer than
 * STORE_FANOUT_MIN items, no second CPU, or no memory or thread for the
 * helper: all on the calling thread. *f is created on first use (NULL
 * before). On Windows nothing is sent here (rc 0 for every item): libuv
 * writes to its sockets through completion ports, which a send beside
 * them would bypass, so every reply goes out through the loop's writes.
 */
void store_fanout_send(struct store_fanout **f, struct store_fan_item *items,
		       size_t n);

/** Stop the helper thread and free f (NULL is fine). */
void store_fanout_free(struct store_fanout *f);

#endif

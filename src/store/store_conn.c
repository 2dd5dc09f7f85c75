/*
 * The store's connections: accept (max_conns, the allowed addresses), the
 * rendezvous secret's handshake (auth.h), reading requests into bounded
 * buffers, running them (store_cmd.c), and writing replies with
 * backpressure and an idle timeout.
 *
 * Reading: libuv reads into one shared 64 KiB buffer and requests are
 * decoded in place; only an unfinished frame is copied into the connection's
 * own buffer, which is bounded (a frame larger than 2 * max_value + max_key +
 * 64 closes the connection). A list frame arriving in pieces keeps its parse
 * position (store_wire_resume), so it is walked once, not once per read.
 *
 * Writing: replies accumulate in each connection's output buffer while one
 * read callback runs (a SET can wake thousands of waiters), and every
 * connection touched is flushed once at the end of the callback with
 * uv_try_write, the rest going through uv_write. Before a request runs, the
 * size of its reply is known (MULTI_GET and LIST_KEYS add up their values and
 * keys first): a reply larger than max_output is refused, and a connection
 * whose unsent replies would pass its share stops being read (backpressure:
 * its unparsed bytes wait in its input buffer) until the kernel has taken
 * half of them. A connection's share is max_output, but at most half of
 * max_memory divided among the connections that have unsent replies, so
 * that clients which pipeline without reading leave room for everyone
 * else's replies; a connection with nothing unsent may always take one
 * reply. Pushed output (WATCH_KEY notifications) that would pass a
 * connection's share closes that connection instead.
 *
 * Memory: srv->mem counts everything a client can make the process hold:
 * keys, values, queue items, entries, input and output buffers (by their
 * capacity, including buffers handed to uv_write), waiters and watches; none
 * grows past max_memory. A connection that holds a partial frame or unsent
 * replies while nothing moves (no byte read, no write completed) for
 * idle_timeout seconds is closed (one periodic timer looks). Every refusal
 * closes the connection and logs one line naming the peer and the limit, at
 * most STORE_LOG_BURST lines a second (the rest are counted). No path scans all
 * keys except LIST_KEYS and closing the server; the timer scans connections
 * once a second.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "crun/auth.h"
#include "crun/err.h"
#include "store_fanout.h"
#include "store_internal.h"

/* Lines about closed connections logged per second, at most. */
#define STORE_LOG_BURST 10
/* Idle buffers larger than this are freed. */
#define STORE_KEEP_BUF 16384

/* ---- Closing ----------------------------------------------------------- */

/* Free c once its handle is closed (its writes have been cancelled). */
static void store_on_conn_close(uv_handle_t *h)
{
	struct store_conn *c = h->data;
	struct crun_store_server *srv = c->srv;

	store_buf_release(&c->in);
	store_buf_release(&c->out);
	store__conn_account(c);
	free(c);
	srv->handle_closed(srv);
}

/* Tell the owner which keys a vanishing client was still waiting on. */
static void store_conn_report_vanished(struct store_conn *c)
{
	struct crun_store_server *srv = c->srv;
	struct store_waiter *w;

	for (w = c->waiters; w != NULL; w = w->next)
		for (size_t i = 0; i < w->nregs; i++)
			if (w->regs[i].e != NULL)
				srv->vanish_cb(srv->vanish_data,
					       (const char *)w->regs[i].e->key,
					       w->regs[i].e->klen);
}

/* c's peer address as text ("?" if unknown). */
static void store_conn_peer(struct store_conn *c, char *addr, size_t len)
{
	struct sockaddr_storage ss;
	int sl = sizeof(ss);

	snprintf(addr, len, "?");
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET6)
		uv_ip6_name((struct sockaddr_in6 *)&ss, addr, len);
	else
		uv_ip4_name((struct sockaddr_in *)&ss, addr, len);
	/* An IPv4 peer of a dual-stack socket reads better without ::ffff:. */
	if (strncmp(addr, "::ffff:", 7) == 0 && strchr(addr + 7, '.') != NULL)
		memmove(addr, addr + 7, strlen(addr + 7) + 1);
}

/* Close the handles of the connections closed since the last poll. */
static void store_reap(struct crun_store_server *srv)
{
	struct store_conn *c;

	while ((c = srv->reap) != NULL) {
		srv->reap = c->reap_next;
		uv_close((uv_handle_t *)&c->tcp, store_on_conn_close);
	}
}

static void store_on_reaper_close(uv_handle_t *h)
{
	struct crun_store_server *srv = h->data;

	srv->handle_closed(srv);
}

static void store_on_reap(uv_check_t *h)
{
	struct crun_store_server *srv = h->data;

	store_reap(srv);
	uv_check_stop(h);
	if (srv->closing)
		uv_close((uv_handle_t *)h, store_on_reaper_close);
}

/*
 * Close c, logging why unless reason is NULL. At most STORE_LOG_BURST lines
 * a second are logged (a flood of hostile connections must not flood the
 * log); the next line logged says how many were not.
 */
void store__conn_close(struct store_conn *c, const char *reason)
{
	struct crun_store_server *srv = c->srv;
	char addr[INET6_ADDRSTRLEN];
	uint64_t now;

	if (c->closing)
		return;
	c->closing = 1;
	store__conn_account(c); /* no longer busy */
	if (reason != NULL && !srv->quiet) {
		now = uv_now(srv->loop);
		if (srv->log_at == 0 || now - srv->log_at >= 1000) {
			srv->log_at = now != 0 ? now : 1;
			srv->log_lines = 0;
		}
		if (srv->log_lines < STORE_LOG_BURST) {
			store_conn_peer(c, addr, sizeof(addr));
			if (srv->log_skipped > 0)
				store__log(srv,
					   "closing connection from %s: %s "
					   "(and %lu more not logged)",
					   addr, reason, srv->log_skipped);
			else
				store__log(srv,
					   "closing connection from %s: %s",
					   addr, reason);
			srv->log_lines++;
			srv->log_skipped = 0;
		} else {
			srv->log_skipped++;
		}
	}
	if (srv->vanish_cb != NULL && !srv->closing)
		store_conn_report_vanished(c);
	store__conn_cancel_waits(c);
	store__conn_unwatch(c);
	uv_read_stop((uv_stream_t *)&c->tcp);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	srv->nconns--;
	/* The handle itself is closed after this poll (store_on_reap):
	 * libuv's uv_close in the middle of a poll walks that poll's whole
	 * event array, which made a mass disconnect quadratic. */
	c->reap_next = srv->reap;
	srv->reap = c;
	uv_check_start(&srv->reaper, store_on_reap);
}

/* ---- Running requests -------------------------------------------------- */

/* Stop reading c until its replies drain (see store_conn_resume). */
static void store_conn_pause(struct store_conn *c)
{
	if (c->paused)
		return;
	c->paused = 1;
	uv_read_stop((uv_stream_t *)&c->tcp);
}

/* The outcomes of store_conn_room besides "no" (0). */
#define STORE_ROOM_RUN 1
#define STORE_ROOM_REFUSED 2

/*
 * Whether req may run on c now. No if its reply alone passes max_output or
 * max_memory (c is closed), or if c must first drain what it has (c is
 * paused: the request stays in its input). On a relay's (tagged)
 * connection a reply refused is answered with an error mark instead
 * (STORE_ROOM_REFUSED: the request is done), so that the relay closes the
 * one client that asked, not every client of its node.
 */
static int store_conn_room(struct store_conn *c, const struct store_req *req,
			   struct store_entry **hit)
{
	struct crun_store_server *srv = c->srv;
	size_t r = store__reply_size(c, req, hit);
	size_t pending = c->out.len + c->queued;
	char msg[200];

	if (store__conn_fits(c, r))
		return STORE_ROOM_RUN;
	if (pending > 0 && !(c->tagged && r > srv->lim.max_output)) {
		store_conn_pause(c);
		return 0;
	}
	if (r > srv->lim.max_output)
		snprintf(msg, sizeof(msg),
			 "%s reply of %zu bytes exceeds max-output %zu",
			 store__cmds[req->op].name, r, srv->lim.max_output);
	else
		snprintf(msg, sizeof(msg),
			 "%s reply of %zu bytes would pass max-memory %zu "
			 "(%zu bytes used)",
			 store__cmds[req->op].name, r, srv->lim.max_memory,
			 srv->mem);
	if (c->tagged) {
		if (req->op == STORE_OP_WAIT_TAG) {
			store_buf_u8(&c->out, STORE_TAG_FAILED);
			store_buf_u64(&c->out, (uint64_t)req->num);
		} else {
			store_buf_u8(&c->out, STORE_TAG_ERROR);
		}
		store__log(srv, "%s failed for a relayed client: %s",
			   store__cmds[req->op].name, msg);
		return STORE_ROOM_REFUSED;
	}
	store__conn_close(c, msg);
	return 0;
}

static int store_conn_gate(struct store_conn *c, const struct store_req *req,
			   char *errmsg, size_t errlen);

/*
 * Decode and run requests in buf[0..len) while c has room for their
 * replies; returns the bytes consumed.
 */
static size_t store_conn_parse(struct store_conn *c, const unsigned char *buf,
			       size_t len)
{
	struct store_req req;
	char errmsg[256];
	size_t off = 0, used;
	int rc;

	while (!c->closing && !c->paused && c->doom == NULL && off < len) {
		struct store_entry *hit = NULL;

		errmsg[0] = '\0';
		rc = store_wire_decode(buf + off, len - off, &c->gen,
				       &c->srv->lim, &c->rs, &req, &used,
				       errmsg, sizeof(errmsg));
		if (rc == STORE_WIRE_NEED_MORE)
			break;
		if (rc < 0) {
			store__conn_close(c, errmsg);
			break;
		}
		/* Per-request gates (room for the reply; an auth check
		 * before a connection's first command) sit here, before
		 * anything runs. */
		rc = store_conn_room(c, &req, &hit);
		if (rc == 0)
			break;
		if (rc == STORE_ROOM_REFUSED) {
			off += used;
			continue;
		}
		/* With a secret, nothing runs before the client proves it. */
		rc = store_conn_gate(c, &req, errmsg, sizeof(errmsg));
		if (rc == 0)
			rc = store__exec(c, &req, hit, errmsg, sizeof(errmsg));
		store__conn_account(c);
		if (rc < 0) {
			store__conn_close(c, rc == CRUN_EAUTH ? NULL : errmsg);
			break;
		}
		off += used;
	}
	if (off > 0)
		c->since = uv_now(c->srv->loop);
	if (!c->closing && c->out.len > 0)
		store__conn_dirty(c);
	return off;
}

/* Drop the first used bytes of c's input buffer. */
static void store_conn_consume(struct store_conn *c, size_t used)
{
	if (used > 0) {
		memmove(c->in.data, c->in.data + used, c->in.len - used);
		c->in.len -= used;
	}
	if (c->in.len == 0 && c->in.cap > STORE_KEEP_BUF)
		store_buf_release(&c->in);
}

static void store_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void store_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* ---- Writing ----------------------------------------------------------- */

/*
 * c's replies have drained (their buffers to half of its share): run the
 * requests waiting
 * in its input, and read again unless that paused it anew.
 */
static void store_conn_resume(struct store_conn *c)
{
	size_t used;

	if (!c->paused || c->closing ||
	    (c->out.len + c->queued > 0 &&
	     c->out.cap + c->qcap > store__conn_share(c) / 2))
		return;
	c->paused = 0;
	used = store_conn_parse(c, c->in.data, c->in.len);
	store_conn_consume(c, used);
	store__conn_account(c);
	if (!c->closing && !c->paused &&
	    uv_read_start((uv_stream_t *)&c->tcp, store_on_alloc,
			  store_on_read) != 0)
		store__conn_close(c, "cannot read from connection");
}

/* A queued write finished: free it; close c on error, else maybe resume. */
static void store_on_write(uv_write_t *req, int status)
{
	struct store_wreq *w = (struct store_wreq *)req;
	struct store_conn *c = w->c;
	struct crun_store_server *srv = c->srv;

	c->queued -= w->len;
	c->qcap -= w->cap;
	free(w->data);
	free(w);
	store__conn_account(c);
	if (c->closing)
		return;
	if (status < 0) {
		store__conn_close(c, NULL);
		return;
	}
	c->since = uv_now(srv->loop);
	store_conn_resume(c);
	store__flush_dirty(srv);
}

/*
 * Hand c's output to the kernel: try_write, then uv_write for the rest.
 * Lengths stay size_t throughout; a buffer is split into pieces below 4 GiB.
 */
static void store_conn_flush(struct store_conn *c)
{
	uv_buf_t small[4], *bufs = small;
	struct store_wreq *w;
	size_t nb, off = 0;
	int n;

	if (c->closing)
		return;
	if (c->doom != NULL) {
		store__conn_close(c, c->doom);
		return;
	}
	if (c->out.len == 0)
		goto done;
	if (c->out.oom) {
		store__conn_close(c, "out of memory for replies");
		return;
	}
	nb = store_wire_npieces(c->out.len);
	if (nb > 4 && (bufs = malloc(nb * sizeof(*bufs))) == NULL) {
		store__conn_close(c, "out of memory for replies");
		return;
	}
	if (c->queued == 0) {
		store_wire_slices(bufs, nb, c->out.data, c->out.len);
		n = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)nb);
		if (n < 0 && n != UV_EAGAIN) {
			if (bufs != small)
				free(bufs);
			store__conn_close(c, NULL);
			return;
		}
		off = n > 0 ? (size_t)n : 0;
		if (off == c->out.len) {
			if (bufs != small)
				free(bufs);
			c->out.len = 0;
			if (c->out.cap > STORE_KEEP_BUF)
				store_buf_release(&c->out);
			c->since = uv_now(c->srv->loop);
			goto done;
		}
		nb = store_wire_npieces(c->out.len - off);
	}
	w = malloc(sizeof(*w));
	if (w == NULL) {
		if (bufs != small)
			free(bufs);
		store__conn_close(c, "out of memory for replies");
		return;
	}
	w->c = c;
	w->len = c->out.len - off;
	w->cap = c->out.cap;
	w->data = c->out.data;
	store_buf_init(&c->out);
	store_wire_slices(bufs, nb, w->data + off, w->len);
	n = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, (unsigned)nb,
		     store_on_write);
	if (bufs != small)
		free(bufs);
	if (n != 0) {
		free(w->data);
		free(w);
		store__conn_account(c);
		store__conn_close(c, NULL);
		return;
	}
	c->queued += w->len;
	c->qcap += w->cap;
done:
	store__conn_account(c);
	store_conn_resume(c);
}

/* n bytes of c's output went out (store_fanout): drop them from it. */
static void store_conn_sent(struct store_conn *c, size_t n)
{
	memmove(c->out.data, c->out.data + n, c->out.len - n);
	c->out.len -= n;
	c->since = uv_now(c->srv->loop);
	if (c->out.len == 0 && c->out.cap > STORE_KEEP_BUF)
		store_buf_release(&c->out);
}

/*
 * Flush every connection that got output during this callback. Many at
 * once (a key thousands wait on was set): the first sends of those with
 * nothing queued are spread over two threads (store_fanout.c). Nothing
 * runs a callback until every one of those sends is done and taken off
 * its connection's output, so a close (and whatever its callbacks do to
 * other connections) only ever sees consistent buffers.
 */
void store__flush_dirty(struct crun_store_server *srv)
{
	struct store_fan_item *it = NULL;
	struct store_conn *c, *rest = NULL;
	size_t n = 0, cap = srv->ndirty;
	uv_os_fd_t fd;

	if (cap >= STORE_FANOUT_MIN && (it = malloc(cap * sizeof(*it)))) {
		while ((c = srv->dirty) != NULL && n < cap) {
			srv->dirty = c->dirty_next;
			if (!c->closing && c->doom == NULL && !c->out.oom &&
			    c->out.len > 0 && c->queued == 0 &&
			    c->out.len <= STORE_WIRE_PIECE &&
			    uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
				c->dirty = 0;
				it[n++] =
				    (struct store_fan_item){.conn = c,
							    .fd = fd,
							    .data = c->out.data,
							    .len = c->out.len};
			} else {
				c->dirty_next = rest;
				rest = c;
			}
		}
		while ((c = rest) != NULL) {
			rest = c->dirty_next;
			c->dirty_next = srv->dirty;
			srv->dirty = c;
		}
		store_fanout_send(&srv->fanout, it, n);
		for (size_t i = 0; i < n; i++)
			if (it[i].rc > 0)
				store_conn_sent(it[i].conn, (size_t)it[i].rc);
		for (size_t i = 0; i < n; i++) {
			c = it[i].conn;
			if (it[i].rc < 0 && it[i].rc != UV_EAGAIN)
				store__conn_close(c, NULL);
			else
				store_conn_flush(c);
		}
		free(it);
	}
	while ((c = srv->dirty) != NULL) {
		srv->dirty = c->dirty_next;
		c->dirty = 0;
		store_conn_flush(c);
	}
	srv->ndirty = 0;
}

static int store_conn_auth(struct store_conn *c, const struct store_req *req,
			   char *errmsg, size_t errlen);

/* ---- The secret and the allowed peers ---------------------------------- */

/*
 * One line naming a peer turned away by the secret or the allowed
 * addresses, even from a quiet store: the first 20, then every 1000th.
 */
static void store_log_refusal(struct store_conn *c, const char *why)
{
	char addr[INET6_ADDRSTRLEN];
	unsigned long n = c->srv->turned_away++;

	if (n >= 20 && n % 1000 != 0)
		return;
	store_conn_peer(c, addr, sizeof(addr));
	store__log(NULL, "refusing connection from %s: %s (%lu so far)", addr,
		   why, n + 1);
}

/*
 * The gate before a request is dispatched (auth.h): with a secret, only
 * VALIDATE and the AUTH exchange pass until the client has proved it.
 * Returns 0 to dispatch req, 1 if handled here, or CRUN_EAUTH (logged
 * here) to close c.
 */
static int store_conn_gate(struct store_conn *c, const struct store_req *req,
			   char *errmsg, size_t errlen)
{
	int rc = store_conn_auth(c, req, errmsg, errlen);

	if (rc < 0)
		store_log_refusal(c, errmsg);
	return rc;
}

static int store_conn_auth(struct store_conn *c, const struct store_req *req,
			   char *errmsg, size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	unsigned char out[CRUN_AUTH_CHALLENGE_LEN];

	if (req->op != STORE_OP_AUTH) {
		if (!srv->has_key || c->authed ||
		    (store__cmds[req->op].flags & STORE_CMD_PREAUTH))
			return 0;
		if (req->op == STORE_OP_PING) { /* best effort, see auth.h */
			unsigned char m[4] = {CRUN_AUTH_NEEDED & 0xff,
					      (CRUN_AUTH_NEEDED >> 8) & 0xff,
					      (CRUN_AUTH_NEEDED >> 16) & 0xff,
					      CRUN_AUTH_NEEDED >> 24};
			uv_buf_t b = uv_buf_init((char *)m, sizeof(m));

			uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
		}
		snprintf(errmsg, errlen,
			 "%s before authentication: refused (this store needs "
			 "the rendezvous secret)",
			 store__cmds[req->op].name);
		return CRUN_EAUTH;
	}
	if (!srv->has_key) {
		snprintf(errmsg, errlen,
			 "client offers the rendezvous secret, but this store "
			 "has none");
		return CRUN_EAUTH;
	}
	if (c->hs.step == 0 &&
	    auth_server_challenge(&srv->key, &c->hs, req->val, req->val_len,
				  out) == 0) {
		store_buf_put(&c->out, out, sizeof(out));
		return 1;
	}
	if (c->hs.step == 1 &&
	    auth_server_check(&srv->key, &c->hs, req->val, req->val_len) == 0) {
		c->authed = 1;
		return 1;
	}
	snprintf(errmsg, errlen,
		 "authentication failed: the client does not know the "
		 "rendezvous secret");
	return CRUN_EAUTH;
}

void store_server_set_auth(struct crun_store_server *srv,
			   const struct crun_auth_key *key)
{
	srv->has_key = key != NULL;
	if (key != NULL)
		srv->key = *key;
}

void store_server_set_allow(struct crun_store_server *srv, store_allow_cb cb,
			    void *data)
{
	srv->allow = cb;
	srv->allow_data = data;
}

/* ---- Reading and accepting --------------------------------------------- */

/*
 * libuv wants a buffer: the shared one, or the tail of c's partial frame
 * (none if growing it would pass max_memory: the read then fails ENOBUFS).
 */
static void store_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct store_conn *c = h->data;
	struct crun_store_server *srv = c->srv;
	size_t cap, room;

	if (c->in.len == 0) {
		*buf = uv_buf_init((char *)srv->rbuf, STORE_RBUF_SIZE);
		return;
	}
	cap = store_buf_grown_cap(&c->in, STORE_RBUF_SIZE);
	if (cap == SIZE_MAX ||
	    srv->mem + (cap - c->in.cap) > srv->lim.max_memory ||
	    store_buf_reserve(&c->in, STORE_RBUF_SIZE) != 0) {
		c->nobufs = cap == SIZE_MAX || !c->in.oom;
		*buf = uv_buf_init(NULL, 0);
		return;
	}
	store__conn_account(c);
	room = c->in.cap - c->in.len;
	*buf = uv_buf_init(
	    (char *)c->in.data + c->in.len,
	    (unsigned int)(room < STORE_WIRE_PIECE ? room : STORE_WIRE_PIECE));
}

/* Keep the unparsed tail rest[0..n) of a shared-buffer read in c->in. */
static void store_conn_keep(struct store_conn *c, const unsigned char *rest,
			    size_t n)
{
	struct crun_store_server *srv = c->srv;
	char msg[160];
	size_t cap = store_buf_grown_cap(&c->in, n);

	if (cap == SIZE_MAX ||
	    srv->mem + (cap - c->in.cap) > srv->lim.max_memory) {
		snprintf(msg, sizeof(msg),
			 "a partial request would pass max-memory %zu (%zu "
			 "bytes used)",
			 srv->lim.max_memory, srv->mem);
		store__conn_close(c, msg);
		return;
	}
	store_buf_put(&c->in, rest, n);
	store__conn_account(c);
}

/* Bytes arrived on c: parse whole frames, keep the rest, flush replies. */
static void store_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct store_conn *c = s->data;
	struct crun_store_server *srv = c->srv;
	char msg[160];
	size_t used;

	if (nread == UV_ENOBUFS) {
		if (c->nobufs)
			snprintf(msg, sizeof(msg),
				 "a partial request would pass max-memory %zu "
				 "(%zu bytes used)",
				 srv->lim.max_memory, srv->mem);
		else
			snprintf(msg, sizeof(msg),
				 "out of memory for a request");
		store__conn_close(c, msg);
		store__flush_dirty(srv);
		return;
	}
	if (nread < 0) {
		if (srv->has_key && !c->authed && c->hs.step == 1)
			store_log_refusal(c, "left during authentication "
					     "(it does not know the secret)");
		store__conn_close(c,
				  NULL); /* EOF or reset: clients just leave */
		store__flush_dirty(srv);
		return;
	}
	if (nread == 0)
		return;
	c->since = uv_now(srv->loop); /* bytes in: not stalled */
	if (buf->base == (char *)srv->rbuf) {
		used = store_conn_parse(c, srv->rbuf, (size_t)nread);
		if (!c->closing && used < (size_t)nread)
			store_conn_keep(c, srv->rbuf + used,
					(size_t)nread - used);
	} else {
		c->in.len += (size_t)nread;
		used = store_conn_parse(c, c->in.data, c->in.len);
		store_conn_consume(c, used);
		store__conn_account(c);
	}
	if (!c->closing && c->in.oom)
		store__conn_close(c, "out of memory for a request");
	if (!c->closing && !c->paused && c->in.len > srv->max_frame) {
		snprintf(msg, sizeof(msg),
			 "request larger than %zu bytes (2 * max-value + "
			 "max-key-size + 64)",
			 srv->max_frame);
		store__conn_close(c, msg);
	}
	store__flush_dirty(srv);
}

/*
 * The idle check: close connections that have held a partial frame or
 * unsent replies for idle_timeout seconds without progress (no byte read,
 * no write completed): a stalled peer, or one that does not read. Parked
 * WAITs and watches alone are not idleness.
 */
void store__on_tick(uv_timer_t *t)
{
	struct crun_store_server *srv = t->data;
	uint64_t now = uv_now(srv->loop);
	uint64_t limit = (uint64_t)srv->lim.idle_timeout * 1000;
	struct store_conn *c, *next;
	char msg[128];

	for (c = srv->conns; c != NULL; c = next) {
		/* With a secret, a silent connection that never proved it
		 * would otherwise hold a connection slot for ever. */
		int unproven = srv->has_key && !c->authed;

		next = c->next;
		if (!unproven && c->in.len == 0 && c->out.len == 0 &&
		    c->queued == 0)
			continue;
		if (now - c->since < limit)
			continue;
		if (unproven)
			snprintf(msg, sizeof(msg),
				 "not authenticated within idle-timeout %zu s",
				 srv->lim.idle_timeout);
		else
			snprintf(msg, sizeof(msg),
				 "no progress for idle-timeout %zu s with %s "
				 "pending",
				 srv->lim.idle_timeout,
				 c->in.len > 0 && !c->paused
				     ? "a partial request"
				     : "unsent replies");
		store__conn_close(c, msg);
	}
	store__flush_dirty(srv);
}

/* A client connected: accept it (or turn it away past max_conns). */
void store__on_connection(uv_stream_t *ls, int status)
{
	struct crun_store_server *srv = ls->data;
	struct store_conn *c;
	int rc;

	if (status < 0) {
		store__log(srv, "accept failed: %s", uv_strerror(status));
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return;
	c->srv = srv;
	c->since = uv_now(srv->loop);
	store_buf_init(&c->in);
	store_buf_init(&c->out);
	uv_tcp_init(srv->loop, &c->tcp);
	c->tcp.data = c;
	srv->nhandles++;
	/* Link first so that store__conn_close can unlink on any path. */
	c->next = srv->conns;
	if (srv->conns != NULL)
		srv->conns->prev = c;
	srv->conns = c;
	srv->nconns++;
	rc = uv_accept(ls, (uv_stream_t *)&c->tcp);
	if (rc != 0) {
		store__log(srv, "accept failed: %s", uv_strerror(rc));
		store__conn_close(c, NULL);
		return;
	}
	/* Accept-time checks (max_conns, an address filter) close c here. */
	if (srv->nconns > srv->lim.max_conns) {
		if (srv->refused++ % 1000 == 0)
			store__log(srv,
				   "refusing connections beyond max-conns %zu "
				   "(%lu so far)",
				   srv->lim.max_conns, srv->refused);
		store__conn_close(c, NULL);
		return;
	}
	if (srv->allow != NULL) {
		struct sockaddr_storage ss;
		int n = sizeof(ss);

		if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &n) !=
			0 ||
		    !srv->allow(srv->allow_data,
				(const struct sockaddr *)&ss)) {
			store_log_refusal(c, "not a node of this round");
			store__conn_close(c, NULL);
			return;
		}
	}
	uv_tcp_nodelay(&c->tcp, 1);
	rc = uv_read_start((uv_stream_t *)&c->tcp, store_on_alloc,
			   store_on_read);
	if (rc != 0)
		store__conn_close(c, "cannot read from connection");
}

/*
 * The store's operations: one function per operation, in a table indexed
 * by opcode (redis's command table). Each row names the operation (for
 * messages and metrics), runs it, bounds its reply's size before it runs
 * (so that fan-out replies, MULTI_GET and LIST_KEYS, are counted before
 * they are built: store_conn.c refuses or pauses on it), and says whether
 * it runs before authentication. Each request's fields were checked by the
 * wire decoder (store_wire.c), which yields known kinds only; the server
 * counts the requests run of each kind (srv->ops, for metrics).
 *
 * Errors on the wire have no reply: like PyTorch's servers, a bad request
 * closes that one connection, here with a logged reason. Where PyTorch's
 * legacy and libuv servers differ, this one behaves like libuv: GET of a
 * missing key answers an empty value, and COMPARE_SET wakes the key's waiters
 * (whenever the key exists afterwards; libuv also wakes them when nothing was
 * stored, which would end a WAIT on a key that is still missing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "store_internal.h"

/* ---- Reply sizes ------------------------------------------------------- */

/* GET: its entry is left in *hit, so that running it looks nothing up
 * again. */
static size_t store_size_get(struct store_conn *c, const struct store_req *req,
			     struct store_entry **hit)
{
	*hit = store__conn_find(c, req->key, req->key_len);
	return 8 + (*hit != NULL ? (*hit)->vlen : 0);
}

static size_t store_size_compare_set(struct store_conn *c,
				     const struct store_req *req,
				     struct store_entry **hit)
{
	const struct store_entry *e =
	    store__find(c->srv, req->key, req->key_len);
	size_t n = e != NULL ? e->vlen : 0;

	n = n > req->val_len ? n : req->val_len;
	return 8 + (n > req->val2_len ? n : req->val2_len);
}

static size_t store_size_multi_get(struct store_conn *c,
				   const struct store_req *req,
				   struct store_entry **hit)
{
	return store__values_size(c->srv, req->list, req->list_len);
}

/* WAIT_GET, WAIT_FIRST_GET: answered now or, parked, checked then. */
static size_t store_size_wait_get(struct store_conn *c,
				  const struct store_req *req,
				  struct store_entry **hit)
{
	return 1 + store__values_size(c->srv, req->list, req->list_len);
}

static size_t store_size_queue_pop(struct store_conn *c,
				   const struct store_req *req,
				   struct store_entry **hit)
{
	const struct store_entry *e =
	    store__find(c->srv, req->key, req->key_len);

	return 16 + (e != NULL && e->qhead != NULL ? e->qhead->len : 0);
}

static size_t store_size_list_keys(struct store_conn *c,
				   const struct store_req *req,
				   struct store_entry **hit)
{
	return 8 + 8 * c->srv->nkeys + c->srv->keybytes;
}

/* ---- Operations -------------------------------------------------------- */

/* VALIDATE: the decoder checked the magic. */
static int store_cmd_validate(struct store_conn *c, const struct store_req *req,
			      struct store_entry *hit, char *errmsg,
			      size_t errlen)
{
	return 0;
}

static int store_cmd_ping(struct store_conn *c, const struct store_req *req,
			  struct store_entry *hit, char *errmsg, size_t errlen)
{
	store_buf_u32(&c->out, req->u32);
	return 0;
}

/* SET and APPEND. */
static int store_cmd_set(struct store_conn *c, const struct store_req *req,
			 struct store_entry *hit, char *errmsg, size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	struct store_entry *e;
	int err = 0;

	if (srv->sink_cb && req->key_len >= strlen(srv->sink_prefix) &&
	    memcmp(req->key, srv->sink_prefix, strlen(srv->sink_prefix)) == 0) {
		srv->sink_cb(srv->sink_data, (const char *)req->key,
			     req->key_len, req->val, req->val_len);
		return 0;
	}
	e = store__conn_get_entry(c, req->key, req->key_len, &err);
	if (e == NULL)
		return err;
	if (req->op == STORE_OP_APPEND && e->has_value)
		err = store__entry_set(srv, e, e->val, e->vlen, req->val,
				       req->val_len);
	else
		err = store__entry_set(srv, e, req->val, req->val_len, NULL, 0);
	if (err != 0) {
		store__entry_gc(srv, e);
		return err;
	}
	store__wake(e);
	return 0;
}

static int store_cmd_get(struct store_conn *c, const struct store_req *req,
			 struct store_entry *hit, char *errmsg, size_t errlen)
{
	store__reply_value(c, hit);
	return 0;
}

static int store_cmd_add(struct store_conn *c, const struct store_req *req,
			 struct store_entry *hit, char *errmsg, size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	struct store_entry *e;
	int64_t num;
	int err = 0;

	e = store__conn_get_entry(c, req->key, req->key_len, &err);
	if (e == NULL)
		return err;
	err = store__do_add(srv, e, req->num, &num, errmsg, errlen);
	if (err != 0) {
		store__entry_gc(srv, e);
		return err;
	}
	store_buf_u64(&c->out, (uint64_t)num);
	store__wake(e);
	return 0;
}

static int store_cmd_compare_set(struct store_conn *c,
				 const struct store_req *req,
				 struct store_entry *hit, char *errmsg,
				 size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	struct store_entry *e = store__find(srv, req->key, req->key_len);
	int err = 0;

	if (!(e != NULL && e->has_value) && req->val_len > 0) {
		/* Missing key, expected not empty: PyTorch echoes it. */
		store_buf_str(&c->out, req->val, req->val_len);
		return 0;
	}
	if (e == NULL || !e->has_value ||
	    (e->vlen == req->val_len &&
	     (e->vlen == 0 || memcmp(e->val, req->val, e->vlen) == 0))) {
		if (e == NULL)
			e = store__get_entry(srv, req->key, req->key_len, &err);
		if (e != NULL)
			err = store__entry_set(srv, e, req->val2, req->val2_len,
					       NULL, 0);
		if (err != 0) {
			if (e != NULL)
				store__entry_gc(srv, e);
			return err;
		}
	}
	store__reply_value(c, e);
	store__wake(e);
	return 0;
}

/* CHECK, WAIT, WAIT_GET and WAIT_FIRST_GET: answered now, or parked. */
static int store_cmd_wait(struct store_conn *c, const struct store_req *req,
			  struct store_entry *hit, char *errmsg, size_t errlen)
{
	const unsigned char *p = req->list, *end = req->list + req->list_len;
	const unsigned char *k;
	size_t klen, missing = 0;

	while (store_wire_next_str(&p, end, &k, &klen)) {
		if (!store__present(store__conn_find(c, k, klen)))
			missing++;
		if (req->op == STORE_OP_WAIT_FIRST_GET)
			break;
	}
	if (req->op == STORE_OP_CHECK) {
		store_buf_u8(&c->out, missing ? STORE_NOT_READY : STORE_READY);
		return 0;
	}
	if (missing == 0 && req->op != STORE_OP_WAIT) {
		store__reply_wait_get(c, req->list, req->list_len);
		return 0;
	}
	if (missing == 0) {
		store_buf_u8(&c->out, STORE_STOP_WAITING);
		return 0;
	}
	return store__park(c, req, missing, 0);
}

/* WAIT_TAG: a WAIT answered with its tag; it marks c's replies from now on.
 */
static int store_cmd_wait_tag(struct store_conn *c, const struct store_req *req,
			      struct store_entry *hit, char *errmsg,
			      size_t errlen)
{
	const unsigned char *p = req->list, *end = req->list + req->list_len;
	const unsigned char *k;
	size_t klen, missing = 0;

	c->tagged = 1;
	while (store_wire_next_str(&p, end, &k, &klen))
		if (!store__present(store__conn_find(c, k, klen)))
			missing++;
	if (missing > 0)
		return store__park(c, req, missing, 0);
	store_buf_u8(&c->out, STORE_TAG_ANSWER); /* all of them, at once */
	store_buf_u64(&c->out, (uint64_t)req->num);
	return 0;
}

static int store_cmd_cancel_tag(struct store_conn *c,
				const struct store_req *req,
				struct store_entry *hit, char *errmsg,
				size_t errlen)
{
	store__conn_cancel_tag(c, (uint64_t)req->num, req->u32);
	return 0;
}

static int store_cmd_num_keys(struct store_conn *c, const struct store_req *req,
			      struct store_entry *hit, char *errmsg,
			      size_t errlen)
{
	store_buf_u64(&c->out, (uint64_t)c->srv->nkeys);
	return 0;
}

static int store_cmd_delete_key(struct store_conn *c,
				const struct store_req *req,
				struct store_entry *hit, char *errmsg,
				size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	struct store_entry *e = store__find(srv, req->key, req->key_len);

	if (e == NULL || !e->has_value) {
		store_buf_u64(&c->out, 0);
		return 0;
	}
	if (e->watches != NULL)
		store__notify(e, STORE_WATCH_DELETED, e->val, e->vlen, NULL, 0);
	srv->mem -= e->vlen;
	srv->nkeys--;
	srv->keybytes -= e->klen;
	free(e->val);
	e->val = NULL;
	e->vlen = 0;
	e->has_value = 0;
	store__entry_gc(srv, e);
	store_buf_u64(&c->out, 1);
	return 0;
}

static int store_cmd_watch_key(struct store_conn *c,
			       const struct store_req *req,
			       struct store_entry *hit, char *errmsg,
			       size_t errlen)
{
	return store__watch(c, req);
}

static int store_cmd_multi_get(struct store_conn *c,
			       const struct store_req *req,
			       struct store_entry *hit, char *errmsg,
			       size_t errlen)
{
	store__reply_values(c, req->list, req->list_len);
	return 0;
}

static int store_cmd_multi_set(struct store_conn *c,
			       const struct store_req *req,
			       struct store_entry *hit, char *errmsg,
			       size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	const unsigned char *p = req->list, *end = req->list + req->list_len;
	const unsigned char *k, *v;
	struct store_entry *e;
	size_t klen, vlen;
	int err = 0;

	while (err == 0 && store_wire_next_str(&p, end, &k, &klen)) {
		store_wire_next_str(&p, end, &v, &vlen);
		e = store__get_entry(srv, k, klen, &err);
		if (e == NULL)
			break;
		err = store__entry_set(srv, e, v, vlen, NULL, 0);
		if (err != 0)
			store__entry_gc(srv, e);
		else
			store__wake(e);
	}
	return err;
}

static int store_cmd_cancel_wait(struct store_conn *c,
				 const struct store_req *req,
				 struct store_entry *hit, char *errmsg,
				 size_t errlen)
{
	store__conn_cancel_waits(c);
	store_buf_u8(&c->out, STORE_WAIT_CANCELED);
	return 0;
}

static int store_cmd_queue_push(struct store_conn *c,
				const struct store_req *req,
				struct store_entry *hit, char *errmsg,
				size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	struct store_entry *e;
	struct store_qitem *q;
	int err = 0;

	e = store__get_entry(srv, req->key, req->key_len, &err);
	if (e == NULL)
		return err;
	if (srv->mem + req->val_len + sizeof(*q) > srv->lim.max_memory ||
	    (q = malloc(sizeof(*q) + req->val_len)) == NULL) {
		err = srv->mem + req->val_len + sizeof(*q) > srv->lim.max_memory
			  ? CRUN_ETOOBIG
			  : UV_ENOMEM;
		store__entry_gc(srv, e);
		return err;
	}
	q->next = NULL;
	q->len = req->val_len;
	if (req->val_len > 0)
		memcpy(q->data, req->val, req->val_len);
	if (e->qtail != NULL)
		e->qtail->next = q;
	else
		e->qhead = q;
	e->qtail = q;
	e->qlen++;
	srv->mem += req->val_len + sizeof(*q);
	/* Present for one waiter: the oldest one it completes. */
	if (e->waiters.head != NULL)
		store__wake_list(&e->waiters, 1);
	return 0;
}

static int store_cmd_queue_pop(struct store_conn *c,
			       const struct store_req *req,
			       struct store_entry *hit, char *errmsg,
			       size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	struct store_entry *e = store__find(srv, req->key, req->key_len);
	struct store_qitem *q;

	store_buf_u64(&c->out, e != NULL ? e->qlen : 0);
	if (e == NULL || e->qlen == 0)
		return 0;
	q = e->qhead;
	e->qhead = q->next;
	if (e->qhead == NULL)
		e->qtail = NULL;
	e->qlen--;
	srv->mem -= q->len + sizeof(*q);
	store_buf_str(&c->out, q->data, q->len);
	free(q);
	store__entry_gc(srv, e);
	return 0;
}

static int store_cmd_queue_len(struct store_conn *c,
			       const struct store_req *req,
			       struct store_entry *hit, char *errmsg,
			       size_t errlen)
{
	struct store_entry *e = store__find(c->srv, req->key, req->key_len);

	store_buf_u64(&c->out, e != NULL ? e->qlen : 0);
	return 0;
}

static int store_cmd_list_keys(struct store_conn *c,
			       const struct store_req *req,
			       struct store_entry *hit, char *errmsg,
			       size_t errlen)
{
	struct map_iter it = {0};
	struct map_node *n;

	store_buf_u64(&c->out, c->srv->nkeys);
	while ((n = map_next(&c->srv->map, &it)) != NULL)
		if (((struct store_entry *)n)->has_value)
			store_buf_str(&c->out, n->key, n->klen);
	return 0;
}

static int store_cmd_barrier(struct store_conn *c, const struct store_req *req,
			     struct store_entry *hit, char *errmsg,
			     size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	struct store_entry *e;
	int64_t num;
	int err = 0;

	e = store__get_entry(srv, req->key, req->key_len, &err);
	if (e == NULL)
		return err;
	err = store__do_add(srv, e, 1, &num, errmsg, errlen);
	if (err != 0) {
		store__entry_gc(srv, e);
		return err;
	}
	store__wake(e);
	if (num >= req->num) {
		store_buf_u8(&c->out, STORE_STOP_WAITING);
		if (e->bwaiters.head != NULL)
			store__wake_list(&e->bwaiters, 0);
		return 0;
	}
	return store__park(c, req, 1, 1);
}

/* ---- The table --------------------------------------------------------- */

/*
 * AUTH has no function: store_conn.c's gate answers it before dispatch (a
 * row without one fails the request, as an unknown kind would).
 */
const struct store_cmd store__cmds[STORE_OP__COUNT] = {
    [STORE_OP_VALIDATE] = {"validate", store_cmd_validate, NULL,
			   STORE_CMD_PREAUTH},
    [STORE_OP_SET] = {"set", store_cmd_set, NULL, 0},
    [STORE_OP_COMPARE_SET] = {"compare_set", store_cmd_compare_set,
			      store_size_compare_set, 0},
    [STORE_OP_GET] = {"get", store_cmd_get, store_size_get, 0},
    [STORE_OP_ADD] = {"add", store_cmd_add, NULL, 0},
    [STORE_OP_CHECK] = {"check", store_cmd_wait, NULL, 0},
    [STORE_OP_WAIT] = {"wait", store_cmd_wait, NULL, 0},
    [STORE_OP_GETNUMKEYS] = {"getnumkeys", store_cmd_num_keys, NULL, 0},
    [STORE_OP_WATCH_KEY] = {"watch_key", store_cmd_watch_key, NULL, 0},
    [STORE_OP_DELETE_KEY] = {"delete_key", store_cmd_delete_key, NULL, 0},
    [STORE_OP_APPEND] = {"append", store_cmd_set, NULL, 0},
    [STORE_OP_MULTI_GET] = {"multi_get", store_cmd_multi_get,
			    store_size_multi_get, 0},
    [STORE_OP_MULTI_SET] = {"multi_set", store_cmd_multi_set, NULL, 0},
    [STORE_OP_CANCEL_WAIT] = {"cancel_wait", store_cmd_cancel_wait, NULL, 0},
    [STORE_OP_PING] = {"ping", store_cmd_ping, NULL, 0},
    [STORE_OP_QUEUE_PUSH] = {"queue_push", store_cmd_queue_push, NULL, 0},
    [STORE_OP_QUEUE_POP] = {"queue_pop", store_cmd_queue_pop,
			    store_size_queue_pop, 0},
    [STORE_OP_QUEUE_LEN] = {"queue_len", store_cmd_queue_len, NULL, 0},
    [STORE_OP_LIST_KEYS] = {"list_keys", store_cmd_list_keys,
			    store_size_list_keys, 0},
    [STORE_OP_BARRIER] = {"barrier", store_cmd_barrier, NULL, 0},
    [STORE_OP_AUTH] = {"auth", NULL, NULL, STORE_CMD_PREAUTH},
    [STORE_OP_WAIT_GET] = {"wait_get", store_cmd_wait, store_size_wait_get, 0},
    [STORE_OP_WAIT_FIRST_GET] = {"wait_first_get", store_cmd_wait,
				 store_size_wait_get, 0},
    [STORE_OP_WAIT_TAG] = {"wait_tag", store_cmd_wait_tag, NULL, 0},
    [STORE_OP_CANCEL_TAG] = {"cancel_tag", store_cmd_cancel_tag, NULL, 0},
};

/*
 * The size of req's reply (an upper bound), known before it runs: 8 unless
 * its row says (a number, a status byte, a ping's nonce, nothing).
 */
size_t store__reply_size(struct store_conn *c, const struct store_req *req,
			 struct store_entry **hit)
{
	const struct store_cmd *cmd = &store__cmds[req->op];

	size_t n = cmd->size != NULL ? cmd->size(c, req, hit) : 8;

	/* A tagged connection's mark, or a tagged answer's 9 bytes. */
	if (c->tagged || req->op == STORE_OP_WAIT_TAG)
		n += 9;
	return n;
}

/* Handle one decoded request from c; a negative return closes c. */
int store__exec(struct store_conn *c, const struct store_req *req,
		struct store_entry *hit, char *errmsg, size_t errlen)
{
	struct crun_store_server *srv = c->srv;
	const struct store_cmd *cmd = &store__cmds[req->op];
	int err;

	size_t mark = c->out.len;
	int wtag = req->op == STORE_OP_WAIT_TAG;
	int tagged = c->tagged || wtag;

	srv->ops[req->op]++; /* the decoder yields known kinds only */
	if (tagged && !wtag)
		store_buf_u8(&c->out, STORE_TAG_REPLY);
	err = cmd->proc != NULL ? cmd->proc(c, req, hit, errmsg, errlen)
				: CRUN_EPROTO;
	if (err < 0 && tagged && err != CRUN_EAUTH) {
		/* A relay's connection stays: the error is its client's. */
		c->out.len = mark;
		store_buf_u8(&c->out,
			     wtag ? STORE_TAG_FAILED : STORE_TAG_ERROR);
		if (wtag)
			store_buf_u64(&c->out, (uint64_t)req->num);
		store__log(srv, "%s failed for a relayed client: %s", cmd->name,
			   errmsg[0] != '\0' ? errmsg : crun_strerror(err));
		return 0;
	}
	if (err >= 0 || errmsg[0] != '\0')
		return err;
	if (err == CRUN_ETOOBIG)
		snprintf(errmsg, errlen,
			 "%s refused: it would pass max-memory %zu (%zu bytes "
			 "used) or max-value %zu",
			 cmd->name, srv->lim.max_memory, srv->mem,
			 srv->lim.max_value);
	else
		snprintf(errmsg, errlen, "%s failed: %s", cmd->name,
			 crun_strerror(err));
	return err;
}

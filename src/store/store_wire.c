/*
 * The TCPStore wire format, with no I/O. A request is a 1-byte opcode and
 * fields: u64/i64 (8 bytes little-endian), u32 (4 bytes), strings (u64
 * length + bytes) and lists (u64 count + strings); replies carry no header.
 * Opcode numbers depend on the generation: G0 (PyTorch <= 1.13, with 2.0's
 * APPEND..CANCEL_WAIT accepted as 9..12) and G3 (2.2+, VALIDATE = 0 shifts
 * every code by one and WATCH_KEY is gone). A connection's first five bytes
 * tell them apart: a G3 client always starts with VALIDATE, 00 ce f7 85 3c,
 * which as a G0 SET would announce a key of about 1 GiB.
 *
 * The decoder is restartable from the start of the buffer: it returns
 * NEED_MORE until a whole frame is present, so callers simply keep unparsed
 * bytes and call it again with more. A list frame (up to max_keys strings)
 * would then be walked from its start on every read, quadratic in its
 * pieces; a struct store_wire_resume carries the walk's position between
 * calls instead. It checks limits as soon as a length is known, so a peer
 * cannot make the server buffer a frame it would refuse.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <assert.h>
#include <endian.h>
#include <uv.h>

#include "crun/err.h"
#include "store_wire.h"

/* op -> opcode, per generation (-1: absent). */
static const signed char store_wire_g0_codes[STORE_OP__COUNT] = {
    [STORE_OP_VALIDATE] = -1,	[STORE_OP_SET] = 0,
    [STORE_OP_COMPARE_SET] = 1, [STORE_OP_GET] = 2,
    [STORE_OP_ADD] = 3,		[STORE_OP_CHECK] = 4,
    [STORE_OP_WAIT] = 5,	[STORE_OP_GETNUMKEYS] = 6,
    [STORE_OP_WATCH_KEY] = 7,	[STORE_OP_DELETE_KEY] = 8,
    [STORE_OP_APPEND] = 9,	[STORE_OP_MULTI_GET] = 10,
    [STORE_OP_MULTI_SET] = 11,	[STORE_OP_CANCEL_WAIT] = 12,
    [STORE_OP_PING] = -1,	[STORE_OP_QUEUE_PUSH] = -1,
    [STORE_OP_QUEUE_POP] = -1,	[STORE_OP_QUEUE_LEN] = -1,
    [STORE_OP_LIST_KEYS] = -1,	[STORE_OP_BARRIER] = -1,
};

static const signed char store_wire_g3_codes[STORE_OP__COUNT] = {
    [STORE_OP_VALIDATE] = 0,	[STORE_OP_SET] = 1,
    [STORE_OP_COMPARE_SET] = 2, [STORE_OP_GET] = 3,
    [STORE_OP_ADD] = 4,		[STORE_OP_CHECK] = 5,
    [STORE_OP_WAIT] = 6,	[STORE_OP_GETNUMKEYS] = 7,
    [STORE_OP_WATCH_KEY] = -1,	[STORE_OP_DELETE_KEY] = 8,
    [STORE_OP_APPEND] = 9,	[STORE_OP_MULTI_GET] = 10,
    [STORE_OP_MULTI_SET] = 11,	[STORE_OP_CANCEL_WAIT] = 12,
    [STORE_OP_PING] = 13,	[STORE_OP_QUEUE_PUSH] = 14,
    [STORE_OP_QUEUE_POP] = 15,	[STORE_OP_QUEUE_LEN] = 16,
    [STORE_OP_LIST_KEYS] = 17,	[STORE_OP_BARRIER] = 18,
};

static const char *const store_wire_names[STORE_OP__COUNT] = {
    "validate",	  "set",       "compare_set",	 "get",		"add",
    "check",	  "wait",      "getnumkeys",	 "watch_key",	"delete_key",
    "append",	  "multi_get", "multi_set",	 "cancel_wait", "ping",
    "queue_push", "queue_pop", "queue_len",	 "list_keys",	"barrier",
    "auth",	  "wait_get",  "wait_first_get", "wait_tag",	"cancel_tag",
};

static const unsigned char store_wire_magic[5] = {0x00, 0xce, 0xf7, 0x85, 0x3c};

/* A read cursor over the frame being decoded. */
struct store_cur {
	const unsigned char *p;
	const unsigned char *end;
	const struct crun_store_limits *lim;
	char *errmsg;
	size_t errlen;
	const unsigned char *start; /* the frame's first byte */
	struct store_wire_resume *rs;
};

uint64_t store_wire_u64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

uint32_t store_wire_u32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

int store_wire_opcode(enum store_gen gen, enum store_op op)
{
	/* crun's own, the same in every generation */
	if (op == STORE_OP_AUTH)
		return STORE_WIRE_AUTH_CODE;
	if (op == STORE_OP_WAIT_GET)
		return STORE_WIRE_WAIT_GET_CODE;
	if (op == STORE_OP_WAIT_FIRST_GET)
		return STORE_WIRE_WAIT_FIRST_GET_CODE;
	if (op == STORE_OP_WAIT_TAG)
		return STORE_WIRE_WAIT_TAG_CODE;
	if (op == STORE_OP_CANCEL_TAG)
		return STORE_WIRE_CANCEL_TAG_CODE;
	if ((unsigned)op >= STORE_OP__COUNT)
		return -1;
	return gen == STORE_GEN_G3 ? store_wire_g3_codes[op]
				   : store_wire_g0_codes[op];
}

const char *store_wire_op_name(enum store_op op)
{
	return (unsigned)op < STORE_OP__COUNT ? store_wire_names[op] : "?";
}

/* Format a decoder error into the cursor's errmsg and return err. */
static int store_wire_err(struct store_cur *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int store_wire_err(struct store_cur *c, int err, const char *fmt, ...)
{
	va_list ap;

	if (c->errmsg != NULL && c->errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(c->errmsg, c->errlen, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* Take a u64: 1, or NEED_MORE. */
static int store_cur_u64(struct store_cur *c, uint64_t *v)
{
	if ((size_t)(c->end - c->p) < 8)
		return STORE_WIRE_NEED_MORE;
	*v = store_wire_u64(c->p);
	c->p += 8;
	return 1;
}

/* Take a u32: 1, or NEED_MORE. */
static int store_cur_u32(struct store_cur *c, uint32_t *v)
{
	if ((size_t)(c->end - c->p) < 4)
		return STORE_WIRE_NEED_MORE;
	*v = store_wire_u32(c->p);
	c->p += 4;
	return 1;
}

/* Take a string of at most max bytes: 1, NEED_MORE or ETOOBIG. */
static int store_cur_str(struct store_cur *c, size_t max, const char *what,
			 const unsigned char **s, size_t *slen)
{
	uint64_t n;
	int rc;

	rc = store_cur_u64(c, &n);
	if (rc != 1)
		return rc;
	if (n > max)
		return store_wire_err(
		    c, CRUN_ETOOBIG,
		    "%s of %llu bytes exceeds the limit of %zu", what,
		    (unsigned long long)n, max);
	if ((uint64_t)(c->end - c->p) < n)
		return STORE_WIRE_NEED_MORE;
	*s = c->p;
	*slen = (size_t)n;
	c->p += n;
	return 1;
}

/* Take a list of n keys (pairs: key and value each): 1, NEED_MORE or error. */
static int store_cur_list(struct store_cur *c, int pairs, struct store_req *r)
{
	const unsigned char *s;
	size_t slen, maxk, maxv;
	uint64_t i;
	int rc;

	maxk = c->lim != NULL ? c->lim->max_key : SIZE_MAX;
	maxv = c->lim != NULL ? c->lim->max_value : SIZE_MAX;
	rc = store_cur_u64(c, &r->n);
	if (rc != 1)
		return rc;
	if (c->lim != NULL && r->n > c->lim->max_keys)
		return store_wire_err(
		    c, CRUN_ETOOBIG,
		    "%llu keys in one request exceed the limit of %zu",
		    (unsigned long long)r->n, c->lim->max_keys);
	r->list = c->p;
	i = 0;
	if (c->rs != NULL && c->rs->off > 0) {
		/* Items before rs->off were checked by an earlier call. */
		c->p = c->start + c->rs->off;
		i = c->rs->i;
	}
	for (; i < r->n; i++) {
		const unsigned char *item = c->p;

		/* Each string needs 8 bytes at least: fail before looping long.
		 */
		if ((uint64_t)(c->end - c->p) / 8 < r->n - i)
			rc = STORE_WIRE_NEED_MORE;
		else
			rc = store_cur_str(c, maxk, "key", &s, &slen);
		if (rc == 1 && pairs)
			rc = store_cur_str(c, maxv, "value", &s, &slen);
		if (rc == STORE_WIRE_NEED_MORE && c->rs != NULL) {
			c->rs->off = (size_t)(item - c->start);
			c->rs->i = i;
		}
		if (rc != 1)
			return rc;
	}
	r->list_len = (size_t)(c->p - r->list);
	return 1;
}

/* opcode -> op, per generation: the tables above inverted (test_store_wire
 * checks that they agree). */
static const signed char store_wire_g0_ops[] = {
    STORE_OP_SET,	  STORE_OP_COMPARE_SET, STORE_OP_GET,
    STORE_OP_ADD,	  STORE_OP_CHECK,	STORE_OP_WAIT,
    STORE_OP_GETNUMKEYS,  STORE_OP_WATCH_KEY,	STORE_OP_DELETE_KEY,
    STORE_OP_APPEND,	  STORE_OP_MULTI_GET,	STORE_OP_MULTI_SET,
    STORE_OP_CANCEL_WAIT,
};

static const signed char store_wire_g3_ops[] = {
    STORE_OP_VALIDATE,	  STORE_OP_SET,	       STORE_OP_COMPARE_SET,
    STORE_OP_GET,	  STORE_OP_ADD,	       STORE_OP_CHECK,
    STORE_OP_WAIT,	  STORE_OP_GETNUMKEYS, STORE_OP_DELETE_KEY,
    STORE_OP_APPEND,	  STORE_OP_MULTI_GET,  STORE_OP_MULTI_SET,
    STORE_OP_CANCEL_WAIT, STORE_OP_PING,       STORE_OP_QUEUE_PUSH,
    STORE_OP_QUEUE_POP,	  STORE_OP_QUEUE_LEN,  STORE_OP_LIST_KEYS,
    STORE_OP_BARRIER,
};

/* The op of a G0 or G3 opcode, or -1. */
int store_wire_op_of(enum store_gen gen, unsigned code)
{
	if (code == STORE_WIRE_AUTH_CODE)
		return STORE_OP_AUTH;
	if (code == STORE_WIRE_WAIT_GET_CODE)
		return STORE_OP_WAIT_GET;
	if (code == STORE_WIRE_WAIT_FIRST_GET_CODE)
		return STORE_OP_WAIT_FIRST_GET;
	if (code == STORE_WIRE_WAIT_TAG_CODE)
		return STORE_OP_WAIT_TAG;
	if (code == STORE_WIRE_CANCEL_TAG_CODE)
		return STORE_OP_CANCEL_TAG;
	if (gen == STORE_GEN_G3)
		return code < sizeof(store_wire_g3_ops)
			   ? store_wire_g3_ops[code]
			   : -1;
	return code < sizeof(store_wire_g0_ops) ? store_wire_g0_ops[code] : -1;
}

/*
 * The first frame of a connection began 00 but not with the VALIDATE magic,
 * and as a G0 SET it is absurd: it was almost certainly a G3 VALIDATE with a
 * wrong magic (another program, another protocol version). Say that rather
 * than reporting a giant key.
 */
static int store_wire_bad_magic(struct store_cur *c, const unsigned char *buf)
{
	return store_wire_err(c, CRUN_EPROTO,
			      "first request is a validate with a wrong magic "
			      "0x%08x (want 0x%08x), not a pytorch store "
			      "client",
			      (unsigned)store_wire_u32(buf + 1),
			      (unsigned)STORE_WIRE_MAGIC);
}

int store_wire_decode(const unsigned char *buf, size_t len, enum store_gen *gen,
		      const struct crun_store_limits *lim,
		      struct store_wire_resume *rs, struct store_req *req,
		      size_t *used, char *errmsg, size_t errlen)
{
	struct store_cur c = {buf, buf + len, lim, errmsg, errlen, buf, rs};
	size_t maxk = lim != NULL ? lim->max_key : SIZE_MAX;
	size_t maxv = lim != NULL ? lim->max_value : SIZE_MAX;
	uint64_t n = 0;
	int op, rc, first = 0;

	if (len == 0)
		return STORE_WIRE_NEED_MORE;
	if (*gen == STORE_GEN_UNKNOWN) {
		size_t k = len < 5 ? len : 5;

		if (memcmp(buf, store_wire_magic, k) != 0)
			first = 1;
		else if (k < 5)
			return STORE_WIRE_NEED_MORE;
		else
			*gen = STORE_GEN_G3;
	}
	if (first) {
		/* As a G0 SET, a first frame whose key length (bytes 1-8) is
		 * past 4 GiB is a VALIDATE with a wrong magic followed by the
		 * client's next request (a G3 client sends both at once).
		 * Undecided until those bytes are in, so that the verdict
		 * does not depend on how the bytes arrive. */
		if (buf[0] == 0 && len < 9)
			return STORE_WIRE_NEED_MORE;
		*gen = STORE_GEN_G0;
		if (buf[0] == 0 && store_wire_u64(buf + 1) > (uint64_t)maxk &&
		    store_wire_u64(buf + 1) > UINT32_MAX)
			return store_wire_bad_magic(&c, buf);
	}
	op = store_wire_op_of(*gen, buf[0]);
	if (op < 0)
		return store_wire_err(&c, CRUN_EPROTO,
				      "unknown opcode 0x%02x (%s)", buf[0],
				      *gen == STORE_GEN_G3 ? "g3" : "g0");
	memset(req, 0, sizeof(*req));
	req->op = (enum store_op)op;
	c.p++;
	switch (req->op) {
	case STORE_OP_VALIDATE:
	case STORE_OP_PING:
		rc = store_cur_u32(&c, &req->u32);
		if (rc == 1 && req->op == STORE_OP_VALIDATE &&
		    req->u32 != STORE_WIRE_MAGIC)
			return store_wire_err(&c, CRUN_EPROTO,
					      "bad validate magic 0x%08x",
					      (unsigned)req->u32);
		break;
	case STORE_OP_SET:
	case STORE_OP_APPEND:
	case STORE_OP_QUEUE_PUSH:
		rc = store_cur_str(&c, maxk, "key", &req->key, &req->key_len);
		if (rc == 1)
			rc = store_cur_str(&c, maxv, "value", &req->val,
					   &req->val_len);
		break;
	case STORE_OP_COMPARE_SET:
		rc = store_cur_str(&c, maxk, "key", &req->key, &req->key_len);
		if (rc == 1)
			rc = store_cur_str(&c, maxv, "value", &req->val,
					   &req->val_len);
		if (rc == 1)
			rc = store_cur_str(&c, maxv, "value", &req->val2,
					   &req->val2_len);
		break;
	case STORE_OP_GET:
	case STORE_OP_DELETE_KEY:
	case STORE_OP_WATCH_KEY:
	case STORE_OP_QUEUE_POP:
	case STORE_OP_QUEUE_LEN:
		rc = store_cur_str(&c, maxk, "key", &req->key, &req->key_len);
		break;
	case STORE_OP_ADD:
	case STORE_OP_BARRIER:
		rc = store_cur_str(&c, maxk, "key", &req->key, &req->key_len);
		if (rc == 1) {
			rc = store_cur_u64(&c, &n);
			req->num = (int64_t)n;
		}
		break;
	case STORE_OP_AUTH:
		rc = store_cur_str(&c, STORE_WIRE_AUTH_MAX, "auth message",
				   &req->val, &req->val_len);
		break;
	case STORE_OP_CHECK:
	case STORE_OP_WAIT:
	case STORE_OP_WAIT_GET:
	case STORE_OP_WAIT_FIRST_GET:
	case STORE_OP_MULTI_GET:
		rc = store_cur_list(&c, 0, req);
		break;
	case STORE_OP_MULTI_SET:
		rc = store_cur_list(&c, 1, req);
		break;
	case STORE_OP_WAIT_TAG:
	case STORE_OP_CANCEL_TAG:
		rc = store_cur_u64(&c, &n);
		req->num = (int64_t)n;
		if (rc == 1)
			rc = store_cur_u64(&c, &n);
		if (rc == 1 && (n == 0 || n > UINT32_MAX))
			return store_wire_err(&c, CRUN_EPROTO,
					      "tagged wait count %llu",
					      (unsigned long long)n);
		req->u32 = (uint32_t)n;
		if (rc == 1 && req->op == STORE_OP_WAIT_TAG)
			rc = store_cur_list(&c, 0, req);
		break;
	case STORE_OP_GETNUMKEYS:
	case STORE_OP_CANCEL_WAIT:
	case STORE_OP_LIST_KEYS:
	default:
		rc = 1;
		break;
	}
	if (rc != 1 && rs != NULL && rc != STORE_WIRE_NEED_MORE)
		rs->off = 0;
	if (rc != 1)
		return rc;
	if (rs != NULL)
		rs->off = 0;
	*used = (size_t)(c.p - buf);
	return STORE_WIRE_OK;
}

int store_wire_next_str(const unsigned char **p, const unsigned char *end,
			const unsigned char **s, size_t *slen)
{
	uint64_t n;

	if ((size_t)(end - *p) < 8)
		return 0;
	n = store_wire_u64(*p);
	assert(n <= (uint64_t)(end - *p) - 8);
	*s = *p + 8;
	*slen = (size_t)n;
	*p += 8 + n;
	return 1;
}

int store_wire_parse_int(const void *p, size_t len, int64_t *out)
{
	const unsigned char *s = p, *end = s + len;
	uint64_t v = 0, lim;
	int neg = 0, digits = 0;

	while (s < end && (*s == ' ' || (*s >= '\t' && *s <= '\r')))
		s++;
	if (s < end && (*s == '+' || *s == '-'))
		neg = *s++ == '-';
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; s < end && *s >= '0' && *s <= '9'; s++, digits++) {
		if (v > (lim - (uint64_t)(*s - '0')) / 10)
			return CRUN_EPROTO;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (digits == 0)
		return CRUN_EPROTO;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

void store_buf_init(struct store_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->oom = 0;
}

void store_buf_release(struct store_buf *b)
{
	free(b->data);
	store_buf_init(b);
}

size_t store_wire_npieces(size_t len)
{
	return len / STORE_WIRE_PIECE + (len % STORE_WIRE_PIECE != 0);
}

void store_wire_slices(uv_buf_t *bufs, size_t n, unsigned char *p, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		size_t k = len < STORE_WIRE_PIECE ? len : STORE_WIRE_PIECE;

		bufs[i] = uv_buf_init((char *)p, (unsigned int)k);
		p += k;
		len -= k;
	}
}

size_t store_buf_grown_cap(const struct store_buf *b, size_t n)
{
	size_t cap;

	if (b->cap - b->len >= n)
		return b->cap;
	cap = b->cap != 0 ? b->cap : 64;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2)
			return SIZE_MAX;
		cap *= 2;
	}
	return cap;
}

int store_buf_reserve(struct store_buf *b, size_t n)
{
	unsigned char *d;
	size_t cap;

	if (b->oom)
		return UV_ENOMEM;
	if (b->cap - b->len >= n)
		return 0;
	cap = b->cap != 0 ? b->cap : 64;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2) {
			b->oom = 1;
			return UV_ENOMEM;
		}
		cap *= 2;
	}
	d = realloc(b->data, cap);
	if (d == NULL) {
		b->oom = 1;
		return UV_ENOMEM;
	}
	b->data = d;
	b->cap = cap;
	return 0;
}

void store_buf_put(struct store_buf *b, const void *p, size_t n)
{
	if (n == 0 || store_buf_reserve(b, n) != 0)
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void store_buf_u8(struct store_buf *b, unsigned v)
{
	unsigned char c = (unsigned char)v;

	store_buf_put(b, &c, 1);
}

void store_buf_u32(struct store_buf *b, uint32_t v)
{
	unsigned char t[4];
	int i;

	for (i = 0; i < 4; i++)
		t[i] = (unsigned char)(v >> (8 * i));
	store_buf_put(b, t, 4);
}

void store_buf_u64(struct store_buf *b, uint64_t v)
{
	unsigned char t[8];
	int i;

	for (i = 0; i < 8; i++)
		t[i] = (unsigned char)(v >> (8 * i));
	store_buf_put(b, t, 8);
}

void store_buf_str(struct store_buf *b, const void *p, size_t n)
{
	store_buf_u64(b, n);
	store_buf_put(b, p, n);
}

void store_buf_op(struct store_buf *b, enum store_gen gen, enum store_op op)
{
	int code = store_wire_opcode(gen, op);

	assert(code >= 0);
	store_buf_u8(b, (unsigned)code);
}

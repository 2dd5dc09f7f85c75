/*
 * The TCPStore wire format (docs: the spec in the repository's history,
 * summarised in store_wire.c): a pure, allocation-free frame decoder and the
 * encoders, shared by the server, both clients, the tests and the fuzzer.
 * Private to libcrun; not installed.
 */
#ifndef CRUN_STORE_WIRE_H
#define CRUN_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "crun/cfg.h"

#define STORE_WIRE_MAGIC 0x3C85F7CEu

/* Protocol generation of one connection. */
enum store_gen {
	STORE_GEN_UNKNOWN = 0, /* nothing decided yet (server side) */
	STORE_GEN_G0,	       /* PyTorch <= 1.13 (and 2.0's G1 extras) */
	STORE_GEN_G3	       /* PyTorch >= 2.2: VALIDATE first */
};

/* Operations, independent of their generation's opcode numbers. */
enum store_op {
	STORE_OP_VALIDATE,
	STORE_OP_SET,
	STORE_OP_COMPARE_SET,
	STORE_OP_GET,
	STORE_OP_ADD,
	STORE_OP_CHECK,
	STORE_OP_WAIT,
	STORE_OP_GETNUMKEYS,
	STORE_OP_WATCH_KEY,
	STORE_OP_DELETE_KEY,
	STORE_OP_APPEND,
	STORE_OP_MULTI_GET,
	STORE_OP_MULTI_SET,
	STORE_OP_CANCEL_WAIT,
	STORE_OP_PING,
	STORE_OP_QUEUE_PUSH,
	STORE_OP_QUEUE_POP,
	STORE_OP_QUEUE_LEN,
	STORE_OP_LIST_KEYS,
	STORE_OP_BARRIER,
	STORE_OP_AUTH,	   /* crun only: the rendezvous secret (auth.h) */
	STORE_OP_WAIT_GET, /* crun only: WAIT, then MULTI_GET, one reply */
	STORE_OP_WAIT_FIRST_GET, /* crun only: the same, waiting on key 1 */
	STORE_OP_WAIT_TAG,	 /* crun only: a WAIT answered with its tag */
	STORE_OP_CANCEL_TAG,	 /* crun only: drop one tagged WAIT */
	STORE_OP__COUNT
};

/* crun's AUTH opcode, in both generations: above every PyTorch opcode. */
#define STORE_WIRE_AUTH_CODE 0x63
/*
 * crun's WAIT_GET opcode, in both generations: a WAIT on a list of keys whose
 * reply, once they all exist, is STOP_WAITING followed by the MULTI_GET reply
 * of the same keys (one request and one round trip instead of two). Only a
 * crun store knows it: a PyTorch server closes the connection.
 */
#define STORE_WIRE_WAIT_GET_CODE 0x64
/*
 * crun's WAIT_FIRST_GET: a WAIT_GET that waits for the first key of its list
 * only; the others are read as they are then (a missing key empty).
 */
#define STORE_WIRE_WAIT_FIRST_GET_CODE 0x65
/*
 * crun's tagged waits, for a relay that multiplexes many clients over one
 * connection (store_relay.c). WAIT_TAG (op, u64 tag, u64 count, keys) is
 * count identical WAITs, for every key, in one waiter (a relay's clients
 * that asked at once); its answer, whenever it comes, is STORE_TAG_ANSWER
 * and the u64 tag for all of them, STORE_TAG_ANSWER_ONE and the tag for one
 * when a QUEUE_PUSH woke it (present for one waiter: the others keep their
 * place), or STORE_TAG_FAILED and the tag when it could not park.
 * CANCEL_TAG (op, u64 tag, u64 count) takes count of them back. A connection's first WAIT_TAG makes it
 * "tagged" for good: every later request other than WAIT_TAG is answered
 * STORE_TAG_REPLY followed by its usual reply (if any), or STORE_TAG_ERROR
 * alone where the request failed, instead of a closed connection (so that
 * one relayed client's bad ADD does not cut off all the others). Only a
 * crun store knows them.
 */
#define STORE_WIRE_WAIT_TAG_CODE 0x66
#define STORE_WIRE_CANCEL_TAG_CODE 0x67
#define STORE_TAG_REPLY 0x00
#define STORE_TAG_ANSWER 0x01
#define STORE_TAG_ERROR 0x02
#define STORE_TAG_FAILED 0x03
#define STORE_TAG_ANSWER_ONE 0x04
/* Largest AUTH message (a nonce or a MAC). */
#define STORE_WIRE_AUTH_MAX 64

/* Reply enums. */
#define STORE_READY 0
#define STORE_NOT_READY 1
#define STORE_STOP_WAITING 0
#define STORE_WAIT_CANCELED 1
#define STORE_WATCH_UPDATED 0
#define STORE_WATCH_CREATED 1
#define STORE_WATCH_DELETED 2
#define STORE_WATCH_REGISTERED 3

/*
 * One decoded request. Pointers point into the decoder's input buffer. For
 * CHECK, WAIT, MULTI_GET and MULTI_SET, list/list_len is the raw region after
 * the count (n strings, or n key/value pairs), already checked: walk it with
 * store_wire_next_str.
 */
struct store_req {
	enum store_op op;
	const unsigned char *key;	/* key, or NULL */
	size_t key_len;
	const unsigned char *val;	/* value, expected (COMPARE_SET) */
	size_t val_len;
	const unsigned char *val2;	/* desired (COMPARE_SET) */
	size_t val2_len;
	int64_t num;			/* ADD delta, BARRIER world size */
	uint32_t u32;			/* VALIDATE magic, PING nonce */
	uint64_t n;			/* list count */
	const unsigned char *list;
	size_t list_len;
};

/*
 * How far the decoder got into an unfinished list frame (CHECK, WAIT,
 * MULTI_GET, MULTI_SET), so that a frame arriving in pieces is walked once,
 * not from its start on every read. Zero it before the first call for a
 * frame; the decoder resets it when the frame is done (or refused). Offsets
 * are from the frame's first byte, so the caller may move the frame's bytes
 * between calls as long as it keeps them.
 */
struct store_wire_resume {
	size_t off;  /* next unchecked item, or 0: none checked yet */
	uint64_t i;  /* items checked before off */
};

/* Results of store_wire_decode besides a negative error. */
#define STORE_WIRE_NEED_MORE 0
#define STORE_WIRE_OK 1

/**
 * Decode the request at the start of buf[0..len). *gen is the connection's
 * generation; STORE_GEN_UNKNOWN makes the first 5 bytes decide (the VALIDATE
 * magic means G3, anything else G0) and updates *gen. Returns STORE_WIRE_OK
 * with *req filled and *used set to the frame's length, STORE_WIRE_NEED_MORE
 * when buf holds only a prefix of a valid frame, or CRUN_EPROTO / CRUN_ETOOBIG
 * with a lower-case reason in errmsg (lim may be NULL: no limits). A limit is
 * reported as soon as the offending length field is in, before its bytes.
 * rs (may be NULL: start over each time) keeps a list frame's progress
 * between calls on the same frame.
 */
int store_wire_decode(const unsigned char *buf, size_t len, enum store_gen *gen,
		      const struct crun_store_limits *lim,
		      struct store_wire_resume *rs, struct store_req *req,
		      size_t *used, char *errmsg, size_t errlen);

/** Take the next length-prefixed string off a checked list; 0 at the end. */
int store_wire_next_str(const unsigned char **p, const unsigned char *end,
			const unsigned char **s, size_t *slen);

/** The opcode of op in gen, or -1 if gen has no such request. */
int store_wire_opcode(enum store_gen gen, enum store_op op);

/** The op of opcode code in gen (store_wire_opcode inverted), or -1. */
int store_wire_op_of(enum store_gen gen, unsigned code);

/** The operation's name ("compare_set"), for logs. */
const char *store_wire_op_name(enum store_op op);

/**
 * Parse a stored value like std::stoll: leading white space, optional sign,
 * digits, anything after ignored. 0, or CRUN_EPROTO for no digits or overflow.
 */
int store_wire_parse_int(const void *p, size_t len, int64_t *out);

/* ---- Encoding into a growable buffer ----------------------------------- */

/* A byte buffer; a failed allocation sets oom and later puts do nothing. */
struct store_buf {
	unsigned char *data;
	size_t len;
	size_t cap;
	int oom;
};

/** An empty buffer (allocates nothing). */
void store_buf_init(struct store_buf *b);
/** Free the buffer's memory and make it empty. */
void store_buf_release(struct store_buf *b);
/** The capacity store_buf_reserve(b, n) would leave b with (SIZE_MAX: none). */
size_t store_buf_grown_cap(const struct store_buf *b, size_t n);
/** Make room for n more bytes; 0 or UV_ENOMEM (and oom set). */
int store_buf_reserve(struct store_buf *b, size_t n);
/** Append n bytes. */
void store_buf_put(struct store_buf *b, const void *p, size_t n);
/** Append one byte. */
void store_buf_u8(struct store_buf *b, unsigned v);
/** Append a little-endian u32. */
void store_buf_u32(struct store_buf *b, uint32_t v);
/** Append a little-endian u64 (an i64 is the same bytes). */
void store_buf_u64(struct store_buf *b, uint64_t v);
/** Append a u64 length and the bytes. */
void store_buf_str(struct store_buf *b, const void *p, size_t n);
/** Append op's opcode for gen (assert: gen has it). */
void store_buf_op(struct store_buf *b, enum store_gen gen, enum store_op op);

/*
 * Writing a buffer of any size_t length with libuv, whose uv_buf_t lengths
 * are unsigned int: split it into pieces of at most STORE_WIRE_PIECE bytes.
 */
#define STORE_WIRE_PIECE ((size_t)1 << 30)
/** The number of pieces of a buffer of len bytes (0 for len 0). */
size_t store_wire_npieces(size_t len);
/** Point bufs[0..n) (n = store_wire_npieces(len)) at p[0..len), in order. */
void store_wire_slices(uv_buf_t *bufs, size_t n, unsigned char *p, size_t len);

/** Little-endian loads. */
uint64_t store_wire_u64(const unsigned char *p);
uint32_t store_wire_u32(const unsigned char *p);

#endif

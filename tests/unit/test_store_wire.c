/*
 * The store's wire codec against real PyTorch 1.13 byte captures (G0) and
 * constructed G3 frames: every request type decodes to the right fields and
 * re-encodes to the same bytes, frames arriving a byte at a time or back to
 * back, every limit, and truncated or garbage input.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crun/err.h"
#include "../../src/store/store_wire.h"

/* Decode hex into a malloc'd buffer. */
static unsigned char *unhex(const char *hex, size_t *len)
{
	size_t n = strlen(hex) / 2, i;
	unsigned char *b = malloc(n + 1);
	unsigned v;

	for (i = 0; i < n; i++) {
		cr_assert(sscanf(hex + 2 * i, "%2x", &v) == 1);
		b[i] = (unsigned char)v;
	}
	*len = n;
	return b;
}

static struct crun_store_limits lim = {8192, 8 << 20, 131072, 1 << 30, 65536, 64 << 20, 30};

/* Decode one whole frame; assert it is exactly len bytes. */
static void decode1(const unsigned char *b, size_t len, enum store_gen *gen,
		    struct store_req *r)
{
	char err[128] = "";
	size_t used = 0;
	int rc = store_wire_decode(b, len, gen, &lim, NULL, r, &used, err, sizeof(err));

	cr_assert_eq(rc, STORE_WIRE_OK, "rc %d (%s)", rc, err);
	cr_assert_eq(used, len, "used %zu of %zu", used, len);
}

/* Every strict prefix of a frame needs more; the whole frame decodes. */
static void check_prefixes(const unsigned char *b, size_t len, enum store_gen g0)
{
	struct store_req r;
	size_t i, used;
	enum store_gen gen;
	char err[128];

	for (i = 0; i < len; i++) {
		gen = g0;
		cr_assert_eq(store_wire_decode(b, i, &gen, &lim, NULL, &r, &used, err,
					       sizeof(err)),
			     STORE_WIRE_NEED_MORE, "prefix %zu of %zu", i, len);
	}
	gen = g0;
	decode1(b, len, &gen, &r);
}

static int keyeq(const unsigned char *k, size_t klen, const char *want)
{
	return klen == strlen(want) && memcmp(k, want, klen) == 0;
}

/* Captured G0 frames and what they mean. */
static const struct {
	const char *hex;
	enum store_op op;
	const char *key;
	const char *val;
} g0_frames[] = {
	{"030500000000000000696e69742f0100000000000000", STORE_OP_ADD, "init/", NULL},
	{"0005000000000000002f6b657931040000000000000076616c31", STORE_OP_SET, "/key1", "val1"},
	{"05010000000000000005000000000000002f6b657931", STORE_OP_WAIT, NULL, NULL},
	{"0205000000000000002f6b657931", STORE_OP_GET, "/key1", NULL},
	{"0304000000000000002f636e74feffffffffffffff", STORE_OP_ADD, "/cnt", NULL},
	{"0103000000000000002f6373050000000000000077726f6e67010000000000000078",
	 STORE_OP_COMPARE_SET, "/cs", "wrong"},
	{"0107000000000000002f6e6f6b65793203000000000000006578700300000000000000646573",
	 STORE_OP_COMPARE_SET, "/nokey2", "exp"},
	{"05020000000000000005000000000000002f6b65793104000000000000002f636e74",
	 STORE_OP_WAIT, NULL, NULL},
	{"06", STORE_OP_GETNUMKEYS, NULL, NULL},
	{"0805000000000000002f6b657931", STORE_OP_DELETE_KEY, "/key1", NULL},
	{"04020000000000000002000000000000002f6103000000000000002f7a7a", STORE_OP_CHECK, NULL, NULL},
	{"040000000000000000", STORE_OP_CHECK, NULL, NULL},
	{"0702000000000000002f77", STORE_OP_WATCH_KEY, "/w", NULL},
	{"0004000000000000002f62696e0400000000000000000102ff", STORE_OP_SET, "/bin", "\x00\x01\x02\xff"},
};

Test(store_wire, g0_captures_decode)
{
	struct store_req r;
	enum store_gen gen;
	unsigned char *b;
	size_t i, len;

	for (i = 0; i < sizeof(g0_frames) / sizeof(g0_frames[0]); i++) {
		b = unhex(g0_frames[i].hex, &len);
		gen = STORE_GEN_UNKNOWN;
		decode1(b, len, &gen, &r);
		cr_assert_eq(gen, STORE_GEN_G0);
		cr_assert_eq(r.op, g0_frames[i].op, "frame %zu: op %d", i, r.op);
		if (g0_frames[i].key != NULL)
			cr_assert(keyeq(r.key, r.key_len, g0_frames[i].key), "frame %zu key", i);
		if (g0_frames[i].val != NULL && g0_frames[i].op != STORE_OP_SET)
			cr_assert(keyeq(r.val, r.val_len, g0_frames[i].val), "frame %zu val", i);
		check_prefixes(b, len, STORE_GEN_UNKNOWN);
		free(b);
	}
}

Test(store_wire, g0_fields)
{
	const unsigned char *p, *end, *s;
	struct store_req r;
	enum store_gen gen = STORE_GEN_G0;
	unsigned char *b;
	size_t len, slen;

	b = unhex("0304000000000000002f636e74feffffffffffffff", &len);
	decode1(b, len, &gen, &r);
	cr_assert_eq(r.num, -2);
	free(b);

	b = unhex("05020000000000000005000000000000002f6b65793104000000000000002f636e74", &len);
	decode1(b, len, &gen, &r);
	cr_assert_eq(r.n, 2);
	p = r.list;
	end = r.list + r.list_len;
	cr_assert(store_wire_next_str(&p, end, &s, &slen));
	cr_assert(keyeq(s, slen, "/key1"));
	cr_assert(store_wire_next_str(&p, end, &s, &slen));
	cr_assert(keyeq(s, slen, "/cnt"));
	cr_assert_not(store_wire_next_str(&p, end, &s, &slen));
	free(b);

	b = unhex("0103000000000000002f63730500000000000000666972737406000000000000007365636f6e64", &len);
	decode1(b, len, &gen, &r);
	cr_assert(keyeq(r.val, r.val_len, "first"));
	cr_assert(keyeq(r.val2, r.val2_len, "second"));
	free(b);
}

/* Encode every op of gen with fixed arguments. */
static void encode_all(struct store_buf *b, enum store_gen gen)
{
	int op;

	for (op = 0; op < STORE_OP__COUNT; op++) {
		if (store_wire_opcode(gen, (enum store_op)op) < 0)
			continue;
		store_buf_op(b, gen, (enum store_op)op);
		switch (op) {
		case STORE_OP_VALIDATE: store_buf_u32(b, STORE_WIRE_MAGIC); break;
		case STORE_OP_PING: store_buf_u32(b, 4242); break;
		case STORE_OP_SET: case STORE_OP_APPEND: case STORE_OP_QUEUE_PUSH:
			store_buf_str(b, "k", 1); store_buf_str(b, "v", 1); break;
		case STORE_OP_COMPARE_SET:
			store_buf_str(b, "k", 1); store_buf_str(b, "", 0);
			store_buf_str(b, "d", 1); break;
		case STORE_OP_GET: case STORE_OP_DELETE_KEY: case STORE_OP_WATCH_KEY:
		case STORE_OP_QUEUE_POP: case STORE_OP_QUEUE_LEN:
			store_buf_str(b, "key", 3); break;
		case STORE_OP_ADD: case STORE_OP_BARRIER:
			store_buf_str(b, "k", 1); store_buf_u64(b, (uint64_t)-7); break;
		case STORE_OP_CHECK: case STORE_OP_WAIT: case STORE_OP_MULTI_GET:
		case STORE_OP_WAIT_GET: case STORE_OP_WAIT_FIRST_GET:
			store_buf_u64(b, 2); store_buf_str(b, "a", 1);
			store_buf_str(b, "bb", 2); break;
		case STORE_OP_MULTI_SET:
			store_buf_u64(b, 2); store_buf_str(b, "a", 1);
			store_buf_str(b, "1", 1); store_buf_str(b, "bb", 2);
			store_buf_str(b, "", 0); break;
		case STORE_OP_AUTH: store_buf_str(b, "nonce", 5); break;
		case STORE_OP_WAIT_TAG:
			store_buf_u64(b, 77); store_buf_u64(b, 2); store_buf_u64(b, 1);
			store_buf_str(b, "a", 1); break;
		case STORE_OP_CANCEL_TAG:
			store_buf_u64(b, 77); store_buf_u64(b, 1); break;
		default: break;
		}
	}
}

/* Every op of a generation, back to back, byte by byte and all at once. */
static void roundtrip(enum store_gen gen)
{
	struct store_buf b;
	struct store_req r;
	enum store_gen g;
	size_t off = 0, used, n = 0, fed;
	char err[128];
	int rc, op = 0;

	store_buf_init(&b);
	encode_all(&b, gen);
	cr_assert_not(b.oom);
	/* All at once. */
	g = gen == STORE_GEN_G3 ? STORE_GEN_UNKNOWN : STORE_GEN_G0;
	while (off < b.len) {
		rc = store_wire_decode(b.data + off, b.len - off, &g, &lim, NULL, &r, &used, err, sizeof(err));
		cr_assert_eq(rc, STORE_WIRE_OK, "%s", err);
		while (store_wire_opcode(gen, (enum store_op)op) < 0)
			op++;
		cr_assert_eq(r.op, (enum store_op)op);
		if (r.op == STORE_OP_ADD || r.op == STORE_OP_BARRIER)
			cr_assert_eq(r.num, -7);
		if (r.op == STORE_OP_PING)
			cr_assert_eq(r.u32, 4242);
		op++;
		off += used;
		n++;
	}
	cr_assert_eq(g, gen);
	/* One byte at a time, as a stream. */
	g = gen == STORE_GEN_G3 ? STORE_GEN_UNKNOWN : STORE_GEN_G0;
	off = 0;
	for (fed = 1; fed <= b.len; fed++) {
		rc = store_wire_decode(b.data + off, fed - off, &g, &lim, NULL, &r, &used, err, sizeof(err));
		cr_assert(rc == STORE_WIRE_OK || rc == STORE_WIRE_NEED_MORE, "%s", err);
		if (rc == STORE_WIRE_OK) {
			off += used;
			n--;
		}
	}
	cr_assert_eq(n, 0);
	cr_assert_eq(off, b.len);
	store_buf_release(&b);
}

Test(store_wire, roundtrip_g0) { roundtrip(STORE_GEN_G0); }
Test(store_wire, roundtrip_g3) { roundtrip(STORE_GEN_G3); }

Test(store_wire, encoder_matches_capture)
{
	struct store_buf b;
	unsigned char *want;
	size_t len;

	store_buf_init(&b);
	store_buf_op(&b, STORE_GEN_G0, STORE_OP_SET);
	store_buf_str(&b, "/key1", 5);
	store_buf_str(&b, "val1", 4);
	want = unhex("0005000000000000002f6b657931040000000000000076616c31", &len);
	cr_assert_eq(b.len, len);
	cr_assert_arr_eq(b.data, want, len);
	free(want);
	b.len = 0;
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_VALIDATE);
	store_buf_u32(&b, STORE_WIRE_MAGIC);
	store_buf_op(&b, STORE_GEN_G3, STORE_OP_PING);
	store_buf_u32(&b, 4242);
	want = unhex("00cef7853c0d92100000", &len);
	cr_assert_eq(b.len, len);
	cr_assert_arr_eq(b.data, want, len);
	free(want);
	store_buf_release(&b);
}

Test(store_wire, generation_detection)
{
	struct store_req r;
	enum store_gen gen = STORE_GEN_UNKNOWN;
	unsigned char *b;
	size_t len, used;
	char err[64];

	/* The first bytes of the magic are not enough to decide. */
	b = unhex("00cef785", &len);
	cr_assert_eq(store_wire_decode(b, len, &gen, &lim, NULL, &r, &used, err, sizeof(err)),
		     STORE_WIRE_NEED_MORE);
	cr_assert_eq(gen, STORE_GEN_UNKNOWN);
	free(b);
	b = unhex("00cef7853c", &len);
	decode1(b, len, &gen, &r);
	cr_assert_eq(gen, STORE_GEN_G3);
	cr_assert_eq(r.op, STORE_OP_VALIDATE);
	free(b);
	/* G0 SET: 00 then a small length (decided once the length is in). */
	gen = STORE_GEN_UNKNOWN;
	b = unhex("0002", &len);
	cr_assert_eq(store_wire_decode(b, len, &gen, &lim, NULL, &r, &used, err, sizeof(err)),
		     STORE_WIRE_NEED_MORE);
	cr_assert_eq(gen, STORE_GEN_UNKNOWN);
	free(b);
	b = unhex("000200000000000000", &len);
	cr_assert_eq(store_wire_decode(b, len, &gen, &lim, NULL, &r, &used, err, sizeof(err)),
		     STORE_WIRE_NEED_MORE);
	cr_assert_eq(gen, STORE_GEN_G0);
	free(b);
}

/* Decode hex in gen and expect err (with a reason). */
static void expect_err(const char *hex, enum store_gen gen, int want, const char *frag)
{
	struct store_req r;
	unsigned char *b;
	size_t len, used;
	char err[128] = "";
	int rc;

	b = unhex(hex, &len);
	rc = store_wire_decode(b, len, &gen, &lim, NULL, &r, &used, err, sizeof(err));
	cr_assert_eq(rc, want, "%s: rc %d (%s)", hex, rc, err);
	cr_assert(strstr(err, frag) != NULL, "%s: reason \"%s\"", hex, err);
	free(b);
}

Test(store_wire, garbage)
{
	expect_err("ff02000000000000002f61", STORE_GEN_G0, CRUN_EPROTO, "unknown opcode 0xff");
	expect_err("0d02000000000000002f61", STORE_GEN_G0, CRUN_EPROTO, "unknown opcode 0x0d");
	expect_err("13", STORE_GEN_G3, CRUN_EPROTO, "unknown opcode 0x13");
	expect_err("07", STORE_GEN_G3, STORE_WIRE_OK, ""); /* G3 7 = GETNUMKEYS */
	expect_err("0011223344", STORE_GEN_G3, CRUN_EPROTO, "bad validate magic");
	/* 2.x VALIDATE sent to a connection already decided as G0 is a huge SET key. */
	expect_err("00cef7853c0d921000000000", STORE_GEN_G0, CRUN_ETOOBIG, "key of");
}

Test(store_wire, limits)
{
	struct crun_store_limits small = {4, 8, 2, 1 << 20, 10, 1 << 20, 30};
	struct store_req r;
	enum store_gen gen;
	unsigned char *b;
	size_t len, used;
	char err[128];
	int rc;

	/* Each limit is reported once the length is in, before the bytes. */
	static const struct {
		const char *hex;
		int rc;
		const char *frag;
	} cases[] = {
		{"000400000000000000", STORE_WIRE_NEED_MORE, ""},	/* key 4: ok so far */
		{"000500000000000000", CRUN_ETOOBIG, "key of 5 bytes"},
		{"0001000000000000006b0900000000000000", CRUN_ETOOBIG, "value of 9 bytes"},
		{"0001000000000000006b0800000000000000", STORE_WIRE_NEED_MORE, ""},
		{"050300000000000000", CRUN_ETOOBIG, "3 keys"},
		{"050200000000000000", STORE_WIRE_NEED_MORE, ""},
		{"0502000000000000000100000000000000610500000000000000", CRUN_ETOOBIG, "key of 5"},
		{"0b01000000000000000100000000000000610900000000000000", CRUN_ETOOBIG, "value of 9"},
		{"0101000000000000006b00000000000000000900000000000000", CRUN_ETOOBIG, "value of 9"},
		{"05ffffffffffffffff", CRUN_ETOOBIG, "keys in one request"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		b = unhex(cases[i].hex, &len);
		gen = STORE_GEN_G0;
		err[0] = '\0';
		rc = store_wire_decode(b, len, &gen, &small, NULL, &r, &used, err, sizeof(err));
		cr_assert_eq(rc, cases[i].rc, "case %zu: rc %d (%s)", i, rc, err);
		cr_assert(strstr(err, cases[i].frag) != NULL, "case %zu: \"%s\"", i, err);
		free(b);
	}
	/* Without limits a huge count only needs more bytes. */
	b = unhex("05ffffffffffffffff", &len);
	gen = STORE_GEN_G0;
	cr_assert_eq(store_wire_decode(b, len, &gen, NULL, NULL, &r, &used, err, sizeof(err)),
		     STORE_WIRE_NEED_MORE);
	free(b);
}

Test(store_wire, truncated_frames)
{
	/* A count promising more keys than bytes, a key length past the end. */
	check_prefixes((const unsigned char *)"\x05\x01\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0a",
		       18, STORE_GEN_G0);
	check_prefixes((const unsigned char *)"\x0b\x01\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0a\x00\0\0\0\0\0\0\0",
		       26, STORE_GEN_G3);
}

Test(store_wire, captured_streams_decode)
{
	/* The whole gloo capture's first client stream, concatenated. */
	static const char *chunks[] = {
		"030500000000000000696e69742f0100000000000000",
		"0028000000000000002f2f776f726b65722f617474656d70745f302f64656661756c745f70672f302f302f72616e6b5f310200000000000000766d05010000000000000028000000000000002f2f776f726b65722f617474656d70745f302f64656661756c745f70672f302f302f72616e6b5f30",
		"0228000000000000002f2f776f726b65722f617474656d70745f302f64656661756c745f70672f302f302f72616e6b5f30",
	};
	enum store_op want[] = {STORE_OP_ADD, STORE_OP_SET, STORE_OP_WAIT, STORE_OP_GET};
	struct store_buf b;
	struct store_req r;
	enum store_gen gen = STORE_GEN_UNKNOWN;
	unsigned char *c;
	size_t i, len, off = 0, used, k = 0;
	char err[64];

	store_buf_init(&b);
	for (i = 0; i < 3; i++) {
		c = unhex(chunks[i], &len);
		store_buf_put(&b, c, len);
		free(c);
	}
	while (off < b.len) {
		cr_assert_eq(store_wire_decode(b.data + off, b.len - off, &gen, &lim, NULL, &r, &used, err, sizeof(err)),
			     STORE_WIRE_OK);
		cr_assert_eq(r.op, want[k++]);
		off += used;
	}
	cr_assert_eq(k, 4);
	store_buf_release(&b);
}

Test(store_wire, parse_int_like_stoll)
{
	int64_t v;

	cr_assert_eq(store_wire_parse_int("12abc", 5, &v), 0);
	cr_assert_eq(v, 12);
	cr_assert_eq(store_wire_parse_int("  7", 3, &v), 0);
	cr_assert_eq(v, 7);
	cr_assert_eq(store_wire_parse_int("\t-5x", 4, &v), 0);
	cr_assert_eq(v, -5);
	cr_assert_eq(store_wire_parse_int("+3", 2, &v), 0);
	cr_assert_eq(v, 3);
	cr_assert_eq(store_wire_parse_int("-9223372036854775808", 20, &v), 0);
	cr_assert_eq(v, INT64_MIN);
	cr_assert_eq(store_wire_parse_int("9223372036854775807", 19, &v), 0);
	cr_assert_eq(v, INT64_MAX);
	cr_assert_eq(store_wire_parse_int("9223372036854775808", 19, &v), CRUN_EPROTO);
	cr_assert_eq(store_wire_parse_int("abc", 3, &v), CRUN_EPROTO);
	cr_assert_eq(store_wire_parse_int("", 0, &v), CRUN_EPROTO);
	cr_assert_eq(store_wire_parse_int("-", 1, &v), CRUN_EPROTO);
	cr_assert_eq(store_wire_parse_int(" ", 1, &v), CRUN_EPROTO);
}

/* A G3 MULTI_GET of n keys "/kNNNNN" (7 bytes), in a store_buf. */
static void multi_get_frame(struct store_buf *b, size_t n)
{
	char k[32];

	store_buf_init(b);
	store_buf_op(b, STORE_GEN_G3, STORE_OP_MULTI_GET);
	store_buf_u64(b, n);
	for (size_t i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "/k%05zu", i % 100000);
		store_buf_str(b, k, 7);
	}
}

/*
 * A list frame fed in pieces with a resume state is walked once: items
 * checked by an earlier call are not read again (corrupting them after they
 * were checked goes unnoticed), and the result equals a whole decode.
 */
Test(store_wire, resume_walks_a_list_once)
{
	struct store_wire_resume rs = {0, 0};
	struct store_buf b;
	struct store_req r;
	enum store_gen gen = STORE_GEN_G3;
	size_t used, fed, half;
	char err[128];
	int rc = STORE_WIRE_NEED_MORE;

	multi_get_frame(&b, 1000);
	half = b.len * 3 / 4; /* past the 8-bytes-per-key early check */
	for (fed = 1; fed <= half; fed += 100) {
		rc = store_wire_decode(b.data, fed, &gen, &lim, &rs, &r, &used, err,
				       sizeof(err));
		cr_assert_eq(rc, STORE_WIRE_NEED_MORE);
	}
	cr_assert(rs.off > 9 && rs.i > 0, "no progress kept: off %zu i %llu", rs.off,
		  (unsigned long long)rs.i);
	cr_assert(rs.off <= half);
	/* Corrupt the first key's length: a re-parse would refuse the frame. */
	memset(b.data + 9, 0xff, 8);
	rc = store_wire_decode(b.data, b.len, &gen, &lim, &rs, &r, &used, err, sizeof(err));
	cr_assert_eq(rc, STORE_WIRE_OK, "rc %d (%s)", rc, err);
	cr_assert_eq(used, b.len);
	cr_assert_eq(r.n, 1000);
	cr_assert_eq(rs.off, 0, "state not reset after the frame");
	/* Without the state, the same bytes are refused. */
	rc = store_wire_decode(b.data, b.len, &gen, &lim, NULL, &r, &used, err, sizeof(err));
	cr_assert_eq(rc, CRUN_ETOOBIG);
	store_buf_release(&b);
}

/* Fed 1000 bytes at a time, a 131072-key MULTI_GET is decoded in linear time. */
Test(store_wire, resume_is_linear)
{
	struct store_wire_resume rs = {0, 0};
	struct store_buf b;
	struct store_req r;
	enum store_gen gen = STORE_GEN_G3;
	size_t used, fed;
	char err[128];
	int rc = STORE_WIRE_NEED_MORE;
	uint64_t t0, whole, pieces;

	multi_get_frame(&b, 131072);
	t0 = uv_hrtime();
	cr_assert_eq(store_wire_decode(b.data, b.len, &gen, &lim, NULL, &r, &used, err,
				       sizeof(err)),
		     STORE_WIRE_OK);
	whole = uv_hrtime() - t0;
	t0 = uv_hrtime();
	for (fed = 1000; rc == STORE_WIRE_NEED_MORE; fed += 1000)
		rc = store_wire_decode(b.data, fed < b.len ? fed : b.len, &gen, &lim, &rs,
				       &r, &used, err, sizeof(err));
	pieces = uv_hrtime() - t0;
	cr_assert_eq(rc, STORE_WIRE_OK);
	cr_assert_eq(r.n, 131072);
	/* 1966 calls: re-walking from the start would cost ~1000 whole decodes. */
	cr_assert(pieces < 20 * whole + 20000000, "pieces %llu ns, whole %llu ns",
		  (unsigned long long)pieces, (unsigned long long)whole);
	store_buf_release(&b);
}

/* Replies of 4 GiB and more are written in pieces a uv_buf_t can hold. */
Test(store_wire, slices_past_32_bits)
{
	static const size_t lens[] = {0, 1, (size_t)1 << 30, ((size_t)1 << 32),
				      ((size_t)1 << 32) + 5, ((size_t)5 << 32) + 7};
	unsigned char *base = (unsigned char *)(uintptr_t)0x1000; /* never read */
	uv_buf_t bufs[32];

	for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]); t++) {
		size_t n = store_wire_npieces(lens[t]), sum = 0;

		cr_assert(n <= 32);
		store_wire_slices(bufs, n, base, lens[t]);
		for (size_t i = 0; i < n; i++) {
			cr_assert(bufs[i].len > 0 && bufs[i].len <= STORE_WIRE_PIECE);
			cr_assert_eq((unsigned char *)bufs[i].base, base + sum);
			sum += bufs[i].len;
		}
		cr_assert_eq(sum, lens[t], "pieces of %zu sum to %zu", lens[t], sum);
	}
}

/* A VALIDATE with a wrong magic says so, not "key of N bytes". */
Test(store_wire, wrong_validate_magic)
{
	/* 00 + magic 0x12345678, then a PING: as a G0 SET, a 5 TB key. */
	expect_err("0078563412" "0d01000000", STORE_GEN_UNKNOWN, CRUN_EPROTO,
		   "validate with a wrong magic 0x12345678");
	/* A genuine G0 SET with a key over the limit keeps its reason. */
	expect_err("000121000000000000", STORE_GEN_UNKNOWN, CRUN_ETOOBIG,
		   "key of 8449 bytes exceeds");
}

/* The decoder's opcode -> op tables invert the encoder's op -> opcode ones. */
Test(store_wire, opcode_tables_agree)
{
	enum store_gen gens[] = {STORE_GEN_G0, STORE_GEN_G3};

	for (size_t g = 0; g < 2; g++) {
		for (int op = 0; op < STORE_OP__COUNT; op++) {
			int code = store_wire_opcode(gens[g], (enum store_op)op);

			if (code >= 0)
				cr_assert_eq(store_wire_op_of(gens[g], (unsigned)code),
					     op, "gen %zu op %d", g, op);
		}
		for (unsigned code = 0; code < 256; code++) {
			int op = store_wire_op_of(gens[g], code);

			if (op >= 0)
				cr_assert_eq(store_wire_opcode(gens[g],
							       (enum store_op)op),
					     (int)code, "gen %zu code %u", g, code);
		}
	}
}

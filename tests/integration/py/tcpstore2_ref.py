#!/usr/bin/env python3
"""An independent PyTorch 2.x TCPStore client, written from PyTorch's sources
(never from crun's), run against `crun store`.

Usage: tcpstore2_ref.py PORT [HOST]

Every opcode number, field encoding and reply shape below carries a comment
naming the PyTorch file and function it comes from. Sources read (repository
pytorch/pytorch, path torch/csrc/distributed/c10d/):

  [BE-H]  TCPStoreBackend.hpp @ 0278b21833d7b408738c5a0cc23f1a31d1e219bc:
          `validationMagicNumber = 0x3C85F7CE`, `enum class QueryType : uint8_t
          { VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, GETNUMKEYS,
          DELETE_KEY, APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT }`,
          `CheckResponseType : uint8_t { READY, NOT_READY }`,
          `WaitResponseType : uint8_t { STOP_WAITING, WAIT_CANCELED }`.
          A later stored copy of the same header (find_string id 240834439)
          appends `PING` after CANCEL_WAIT (so PING = 13).
  [UV]    TCPStoreLibUvBackend.cpp @ 01afc5c9c6fc20537882b772c58b292f9c2c8d42:
          UvClient::processBuf and the parse_*_command handlers (server side
          encodings, replies), ChunkedStream::read_key/read_payload/read_value,
          StreamWriter::write1/write_value/write_vector/write_string,
          LibUVStoreDaemon::{set, compareAndSet, get, add, checkKeys, waitKeys,
          size, deleteKey, append, wakeupWaitingClients,
          wakeupOneWaitingClient, queuePush, queuePop, queueLen,
          clearClientWaitState}.
  [CL]    TCPStore.cpp (client): SendBuffer (opcode byte, appendString,
          appendBytes, appendValue), TCPStore::{validate, ping, set,
          compareSet, doGet, incrementValueBy, deleteKey, getNumKeys, check,
          doWait, append, multiGet, multiSet, queuePush, queuePop, queueLen,
          listKeys}. Read in pytorch/pytorch @ 00321a02d719de5729aeac5871792398114a1570
          (set..doWait) and, for validate/ping/queue*/listKeys, in a stored
          line-numbered copy of a 2025 TCPStore.cpp (find_string id
          69023084615) whose SendBuffer starts with the opcode byte alone.
          (00321a02's SendBuffer puts a u32 queryMagicNumber before every
          opcode, a transient 2023 variant; the framing here follows the
          2025 copy and TCPStore::validate: the magic only in VALIDATE.)
  [UV25]  a stored copy of a 2025 TCPStoreLibUvBackend.cpp (find_string id
          69378651230): parse_list_keys_command.

Opcodes 14..17 (QUEUE_PUSH, QUEUE_POP, QUEUE_LEN, LIST_KEYS): the handlers
exist in [UV] and [UV25] and the client calls in [CL]; the enum lines that
number them were not among the stored pytorch/pytorch headers. They follow the
enum order (appended after PING in the order the switch in [UV] /
UvClient::processBuf lists them: QUEUE_PUSH, QUEUE_POP, QUEUE_LEN, then
LIST_KEYS in [UV25]); this is the one place taken from order, not a line.

All integers are host order (little-endian on x86): [CL] SendBuffer::appendValue
copies the bytes of the value, [UV] StreamWriter::write_value likewise.
"""
import os
import select
import socket
import struct
import sys
import time

# ---- opcodes: [BE-H] enum class QueryType : uint8_t (implicit 0, 1, 2, ...)
VALIDATE = 0      # [BE-H] QueryType::VALIDATE
SET = 1           # [BE-H] QueryType::SET
COMPARE_SET = 2   # [BE-H] QueryType::COMPARE_SET
GET = 3           # [BE-H] QueryType::GET
ADD = 4           # [BE-H] QueryType::ADD
CHECK = 5         # [BE-H] QueryType::CHECK
WAIT = 6          # [BE-H] QueryType::WAIT
GETNUMKEYS = 7    # [BE-H] QueryType::GETNUMKEYS
DELETE_KEY = 8    # [BE-H] QueryType::DELETE_KEY
APPEND = 9        # [BE-H] QueryType::APPEND
MULTI_GET = 10    # [BE-H] QueryType::MULTI_GET
MULTI_SET = 11    # [BE-H] QueryType::MULTI_SET
CANCEL_WAIT = 12  # [BE-H] QueryType::CANCEL_WAIT
PING = 13         # [BE-H] later copy: PING after CANCEL_WAIT
QUEUE_PUSH = 14   # enum order after PING (see module comment)
QUEUE_POP = 15    # enum order after PING (see module comment)
QUEUE_LEN = 16    # enum order after PING (see module comment)
LIST_KEYS = 17    # enum order after QUEUE_LEN (see module comment)

MAGIC = 0x3C85F7CE  # [BE-H] validationMagicNumber

READY, NOT_READY = 0, 1              # [BE-H] CheckResponseType : uint8_t
STOP_WAITING, WAIT_CANCELED = 0, 1   # [BE-H] WaitResponseType : uint8_t

TIMEOUT = float(os.environ.get("TCPSTORE2_REF_TIMEOUT", "5"))
# How long a reply that PyTorch's server would not send is awaited.
QUIET = float(os.environ.get("TCPSTORE2_REF_QUIET", "0.3"))

HOST = "127.0.0.1"
PORT = 0
STEP = "?"
NSTEPS = 0


class Mismatch(Exception):
    pass


def fail(msg):
    raise Mismatch(msg)


# ---- encodings ------------------------------------------------------------
def u8(v):
    # [CL] SendBuffer ctor: buffer.push_back((uint8_t)cmd); [UV] stream.read1
    return struct.pack("<B", v)


def u32(v):
    # [CL] TCPStore::validate/ping: appendValue<std::uint32_t>;
    # [UV] parse_validate_command/parse_ping_command: read_value(uint32_t)
    return struct.pack("<I", v)


def u64(v):
    # [CL] SendBuffer::appendString/appendBytes: appendValue<uint64_t>(size);
    # TCPStore::check/doWait/multiGet: appendValue(keys.size()) (size_t);
    # [UV] ChunkedStream::read_key/read_payload read_value(uint64_t size),
    # parse_check/wait/multi_get/multi_set_command read_value(uint64_t key_count)
    return struct.pack("<Q", v)


def i64(v):
    # [CL] TCPStore::incrementValueBy appendValue<std::int64_t>(delta),
    # TCPStore::multiSet appendValue<std::int64_t>(keys.size());
    # [UV] parse_add_command read_value(int64_t addVal)
    return struct.pack("<q", v)


def string(s):
    # [CL] SendBuffer::appendString: u64 size, then the bytes;
    # [UV] ChunkedStream::read_key
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def vec(b):
    # [CL] SendBuffer::appendBytes: u64 size, then the bytes;
    # [UV] ChunkedStream::read_payload
    return u64(len(b)) + b


def keylist(keys):
    # [CL] TCPStore::check/doWait/multiGet: appendValue(keys.size()) then
    # appendString per key; [UV] parse_check_command etc.
    return u64(len(keys)) + b"".join(string(k) for k in keys)


# ---- the connection -------------------------------------------------------
class Conn:
    def __init__(self, name):
        self.name = name
        self.s = socket.create_connection((HOST, PORT), timeout=TIMEOUT)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.last = b""

    def send(self, data, frag=0):
        self.last = data
        if not frag:
            self.s.sendall(data)
            return
        for i in range(0, len(data), frag):
            self.s.sendall(data[i:i + frag])
            time.sleep(0.001)  # let each fragment go out as its own segment

    def recv(self, n, what, timeout=TIMEOUT):
        end = time.monotonic() + timeout
        while len(self.buf) < n:
            left = end - time.monotonic()
            if left <= 0:
                fail("%s: timed out after %.1fs waiting for %d bytes of %s, got %s"
                     " (last request sent: %s)"
                     % (self.name, timeout, n, what, self.buf.hex() or "nothing",
                        self.last.hex()))
            r, _, _ = select.select([self.s], [], [], left)
            if not r:
                continue
            try:
                d = self.s.recv(65536)
            except OSError as e:
                fail("%s: %s while reading %s (had %s)" % (self.name, e, what, self.buf.hex()))
            if not d:
                fail("%s: connection closed by the store while reading %s (had %s;"
                     " last request sent: %s)"
                     % (self.name, what, self.buf.hex() or "nothing", self.last.hex()))
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def quiet(self, what, timeout=QUIET):
        """Expect no byte within `timeout` (a reply PyTorch would not send)."""
        r, _, _ = select.select([self.s], [], [], timeout)
        if self.buf or r:
            d = self.buf or self.s.recv(65536)
            fail("%s: unexpected bytes %s (%s): PyTorch's server sends nothing here"
                 % (self.name, d.hex() or "<EOF>", what))

    # reply shapes
    def r_u8(self, what):
        # [UV] StreamWriter::write1 / write_value<uint8_t enum>
        return self.recv(1, what)[0]

    def r_u32(self, what):
        return struct.unpack("<I", self.recv(4, what))[0]

    def r_i64(self, what):
        # [UV] StreamWriter::write_value<int64_t>; [CL] receiveValue<std::int64_t>
        return struct.unpack("<q", self.recv(8, what))[0]

    def r_vec(self, what):
        # [UV] StreamWriter::write_vector: write_value<uint64_t>(size) + bytes;
        # [CL] TCPClient::receiveBits -> tcputil::recvVector<uint8_t>
        n = struct.unpack("<Q", self.recv(8, what + " length"))[0]
        if n > 64 << 20:
            fail("%s: %s length %d is absurd" % (self.name, what, n))
        return self.recv(n, what) if n else b""

    def close(self):
        self.s.close()


def step(name):
    global STEP, NSTEPS
    STEP = name
    NSTEPS += 1


def ok(detail=""):
    print("ok %d %s%s" % (NSTEPS, STEP, (": " + detail) if detail else ""), flush=True)


def expect(what, got, want):
    if got != want:
        g = got.hex() if isinstance(got, bytes) else repr(got)
        w = want.hex() if isinstance(want, bytes) else repr(want)
        fail("%s: got %s, want %s" % (what, g, w))


# ---- client operations, each as [CL] sends it ------------------------------
def connect(name):
    c = Conn(name)
    # [CL] TCPStore::validate: SendBuffer(VALIDATE) + appendValue<uint32_t>(magic);
    # no reply ([UV] parse_validate_command sends nothing)
    c.send(u8(VALIDATE) + u32(MAGIC))
    # [CL] TCPStore::ping: SendBuffer(PING) + appendValue<uint32_t>(getpid());
    # reply receiveValue<uint32_t> must equal it ([UV] parse_ping_command
    # write_value(nonce))
    nonce = (os.getpid() * 2654435761 + len(name)) & 0xFFFFFFFF
    c.send(u8(PING) + u32(nonce))
    expect(name + " ping echo", c.r_u32("ping nonce"), nonce)
    return c


def op_set(c, k, v, frag=0):
    # [CL] TCPStore::set: SET, appendString(key), appendBytes(data); no reply
    # ([UV] parse_set_command)
    c.send(u8(SET) + string(k) + vec(v), frag)


def op_get(c, k, frag=0):
    # [CL] TCPStore::doGet: GET, appendString(key); receiveBits
    # ([UV] parse_get_command write_vector(store->get(key)))
    c.send(u8(GET) + string(k), frag)
    return c.r_vec("get " + k)


def op_add(c, k, d):
    # [CL] TCPStore::incrementValueBy: ADD, appendString, appendValue<int64_t>;
    # receiveValue<int64_t> ([UV] parse_add_command write_value(addVal))
    c.send(u8(ADD) + string(k) + i64(d))
    return c.r_i64("add " + k)


def op_check(c, keys):
    # [CL] TCPStore::check: CHECK, appendValue(keys.size()), appendString each;
    # receiveValue<CheckResponseType> ([UV] parse_check_command)
    c.send(u8(CHECK) + keylist(keys))
    return c.r_u8("check")


def op_wait_send(c, keys):
    # [CL] TCPStore::doWait: WAIT, appendValue(keys.size()), appendString each
    c.send(u8(WAIT) + keylist(keys))


def op_cancel(c):
    # [CL] TCPStore::doWait timeout path: SendBuffer(CANCEL_WAIT) alone
    # ([UV] parse_cancel_wait_command write1(WAIT_CANCELED))
    c.send(u8(CANCEL_WAIT))


def op_cas(c, k, expected, desired):
    # [CL] TCPStore::compareSet: COMPARE_SET, appendString, appendBytes x2;
    # receiveBits ([UV] parse_compare_set_command write_vector(res))
    c.send(u8(COMPARE_SET) + string(k) + vec(expected) + vec(desired))
    return c.r_vec("compare_set " + k)


def op_numkeys(c):
    # [CL] TCPStore::getNumKeys: GETNUMKEYS alone; receiveValue<int64_t>
    # ([UV] parse_getnumkeys_command write_value<int64_t>(store->size()))
    c.send(u8(GETNUMKEYS))
    return c.r_i64("getnumkeys")


def op_delete(c, k):
    # [CL] TCPStore::deleteKey: DELETE_KEY, appendString; receiveValue<int64_t>
    # ([UV] parse_delete_key_command write_value<int64_t>(numDeleted))
    c.send(u8(DELETE_KEY) + string(k))
    return c.r_i64("delete " + k)


def op_append(c, k, v):
    # [CL] TCPStore::append: APPEND, appendString, appendBytes; no reply
    # ([UV] parse_append_command)
    c.send(u8(APPEND) + string(k) + vec(v))


def op_multi_get(c, keys):
    # [CL] TCPStore::multiGet: MULTI_GET, appendValue(keys.size()),
    # appendString each; receiveBits per key ([UV] parse_multi_get_command)
    c.send(u8(MULTI_GET) + keylist(keys))
    return [c.r_vec("multi_get " + k) for k in keys]


def op_multi_set(c, pairs):
    # [CL] TCPStore::multiSet: MULTI_SET, appendValue<int64_t>(keys.size()),
    # then appendString(key) + appendBytes(value) per pair; no reply
    # ([UV] parse_multi_set_command reads uint64_t key_count: same 8 bytes)
    body = i64(len(pairs)) + b"".join(string(k) + vec(v) for k, v in pairs)
    c.send(u8(MULTI_SET) + body)


def op_qpush(c, k, v):
    # [CL] TCPStore::queuePush: QUEUE_PUSH, appendString, appendBytes; no reply
    # ([UV] parse_queue_push_command -> LibUVStoreDaemon::queuePush)
    c.send(u8(QUEUE_PUSH) + string(k) + vec(v))


def op_qpop(c, k):
    # [CL] TCPStore::queuePop: QUEUE_POP, appendString; receiveValue<int64_t>,
    # then receiveBits only if > 0 ([UV] LibUVStoreDaemon::queuePop:
    # write_value<int64_t>(queue.size()) then write_vector(front) if non-empty)
    c.send(u8(QUEUE_POP) + string(k))
    n = c.r_i64("queue_pop length " + k)
    return n, (c.r_vec("queue_pop value " + k) if n > 0 else None)


def op_qlen(c, k):
    # [CL] TCPStore::queueLen: QUEUE_LEN, appendString; receiveValue<int64_t>
    # ([UV] parse_queue_len_command write_value<int64_t>(store->queueLen(key)))
    c.send(u8(QUEUE_LEN) + string(k))
    return c.r_i64("queue_len " + k)


def op_list_keys(c):
    # [CL] TCPStore::listKeys: LIST_KEYS alone; receiveValue<int64_t> n, then
    # n x receiveBits ([UV25] parse_list_keys_command: write_value<int64_t>,
    # write_string per key = u64 size + bytes)
    c.send(u8(LIST_KEYS))
    n = c.r_i64("list_keys count")
    if n < 0 or n > 100000:
        fail("list_keys count %d is absurd" % n)
    return [c.r_vec("list_keys key").decode("latin-1") for _ in range(n)]


# ---- the transcript ---------------------------------------------------------
def run():
    P = "/ref2x/"  # a prefix of our own, as PrefixStore would add
    keys = set()  # every key this run stores in the key-value map

    step("connect: VALIDATE (00 + u32 0x3C85F7CE, no reply) + PING (nonce echoed)")
    a = connect("conn-a")
    b = connect("conn-b")
    ok()

    step("GETNUMKEYS on a fresh store")
    n0 = op_numkeys(a)
    if n0 < 0:
        fail("negative key count %d" % n0)
    ok(str(n0))

    step("SET then GET")
    op_set(a, P + "k1", b"v1")
    keys.add(P + "k1")
    expect("get k1", op_get(a, P + "k1"), b"v1")
    ok()

    step("SET on one connection, GET on another (binary value)")
    val = bytes(range(256))
    op_set(a, P + "bin", val)
    keys.add(P + "bin")
    expect("get bin", op_get(b, P + "bin"), val)
    ok()

    step("SET overwrites, empty value")
    op_set(a, P + "k1", b"")
    expect("get k1 empty", op_get(b, P + "k1"), b"")
    op_set(a, P + "k1", b"v1b")
    expect("get k1", op_get(b, P + "k1"), b"v1b")
    ok()

    step("GET of a missing key: empty vector ([UV] LibUVStoreDaemon::get missing_key)")
    expect("get missing", op_get(a, P + "nope"), b"")
    ok()

    step("ADD creates, then increments; value is the decimal string")
    expect("add 5", op_add(a, P + "ctr", 5), 5)
    keys.add(P + "ctr")
    expect("add -7", op_add(b, P + "ctr", -7), -2)
    expect("add 0", op_add(a, P + "ctr", 0), -2)
    expect("get ctr", op_get(a, P + "ctr"), b"-2")  # [UV] add: std::to_string
    expect("add big", op_add(a, P + "big", 1 << 40), 1 << 40)
    keys.add(P + "big")
    ok()

    step("CHECK: READY (00) when all present, NOT_READY (01) otherwise")
    expect("check present", op_check(a, [P + "k1", P + "ctr"]), READY)
    expect("check one missing", op_check(a, [P + "k1", P + "nope"]), NOT_READY)
    expect("check missing", op_check(a, [P + "nope"]), NOT_READY)
    ok()

    step("WAIT on present keys: STOP_WAITING (00) at once")
    op_wait_send(a, [P + "k1", P + "bin"])
    expect("wait present", a.r_u8("wait"), STOP_WAITING)
    ok()

    step("WAIT on a missing key: silent until another connection SETs it")
    op_wait_send(a, [P + "w1"])
    a.quiet("wait on a missing key")
    op_set(b, P + "w1", b"x")
    keys.add(P + "w1")
    expect("wait woken", a.r_u8("wait"), STOP_WAITING)
    ok()

    step("WAIT on two keys: woken only when both exist (ADD and APPEND wake too)")
    op_wait_send(a, [P + "w2", P + "w3"])
    op_add(b, P + "w2", 1)
    keys.add(P + "w2")
    a.quiet("one of two keys set")
    op_append(b, P + "w3", b"z")
    keys.add(P + "w3")
    expect("wait two", a.r_u8("wait"), STOP_WAITING)
    ok()

    step("WAIT with a timeout: CANCEL_WAIT answers WAIT_CANCELED (01)")
    op_wait_send(a, [P + "never"])
    a.quiet("wait before its timeout")
    op_cancel(a)
    expect("cancel", a.r_u8("cancel_wait"), WAIT_CANCELED)
    # the cancelled registration is gone ([UV] clearClientWaitState): a later
    # SET of the key sends nothing to this connection
    op_set(b, P + "never", b"1")
    keys.add(P + "never")
    a.quiet("set after cancel")
    expect("get after cancel", op_get(a, P + "k1"), b"v1b")
    ok()

    step("CANCEL_WAIT with nothing pending: still WAIT_CANCELED")
    op_cancel(b)
    expect("idle cancel", b.r_u8("cancel_wait"), WAIT_CANCELED)
    ok()

    step("cancel race: key set before the cancel -> STOP_WAITING then WAIT_CANCELED")
    # [CL] TCPStore::doWait: after CANCEL_WAIT a STOP_WAITING may come first,
    # then WAIT_CANCELED must follow
    op_wait_send(a, [P + "race"])
    a.quiet("wait before race")
    op_set(b, P + "race", b"r")
    keys.add(P + "race")
    expect("race wake", a.r_u8("wait"), STOP_WAITING)
    op_cancel(a)
    expect("race cancel", a.r_u8("cancel_wait"), WAIT_CANCELED)
    ok()

    step("COMPARE_SET on an existing key, expected matches: new value returned")
    op_set(a, P + "cas", b"old")
    keys.add(P + "cas")
    expect("cas match", op_cas(a, P + "cas", b"old", b"new"), b"new")
    expect("get cas", op_get(b, P + "cas"), b"new")
    ok()

    step("COMPARE_SET mismatch: current value returned, unchanged")
    expect("cas mismatch", op_cas(a, P + "cas", b"old", b"other"), b"new")
    expect("get cas", op_get(b, P + "cas"), b"new")
    ok()

    step("COMPARE_SET on a missing key, empty expected: creates it")
    expect("cas create", op_cas(a, P + "cas2", b"", b"made"), b"made")
    keys.add(P + "cas2")
    expect("get cas2", op_get(b, P + "cas2"), b"made")
    ok()

    step("COMPARE_SET on a missing key, non-empty expected: returns expected, no key")
    # [UV] LibUVStoreDaemon::compareAndSet: `return expectedValue;`
    expect("cas missing", op_cas(a, P + "cas3", b"exp", b"des"), b"exp")
    expect("check cas3", op_check(a, [P + "cas3"]), NOT_READY)
    ok()

    step("COMPARE_SET wakes a waiter on the key")
    op_wait_send(b, [P + "cas4"])
    b.quiet("wait before compare_set")
    expect("cas4 create", op_cas(a, P + "cas4", b"", b"c4"), b"c4")
    keys.add(P + "cas4")
    expect("cas wake", b.r_u8("wait"), STOP_WAITING)
    ok()

    step("APPEND creates, then concatenates; no reply")
    op_append(a, P + "app", b"ab")
    keys.add(P + "app")
    op_append(a, P + "app", b"cd")
    a.quiet("append")
    expect("get app", op_get(b, P + "app"), b"abcd")
    ok()

    step("MULTI_SET (i64 count, key/value pairs, no reply) then MULTI_GET")
    op_multi_set(a, [(P + "m1", b"one"), (P + "m2", b""), (P + "m3", b"three")])
    keys.update([P + "m1", P + "m2", P + "m3"])
    a.quiet("multi_set")
    got = op_multi_get(b, [P + "m3", P + "m1", P + "m2", P + "k1"])
    expect("multi_get", got, [b"three", b"one", b"", b"v1b"])
    ok()

    step("MULTI_GET with a missing key: empty vector for it ([UV] get)")
    expect("multi_get missing", op_multi_get(b, [P + "m1", P + "nope"]), [b"one", b""])
    ok()

    step("GETNUMKEYS counts the key-value map")
    expect("numkeys", op_numkeys(b), n0 + len(keys))
    ok(str(n0 + len(keys)))

    step("DELETE_KEY: 1 for a present key, 0 for a missing one")
    expect("delete present", op_delete(a, P + "m2"), 1)
    keys.discard(P + "m2")
    expect("delete again", op_delete(a, P + "m2"), 0)
    expect("check deleted", op_check(a, [P + "m2"]), NOT_READY)
    expect("numkeys", op_numkeys(b), n0 + len(keys))
    ok()

    step("LIST_KEYS: i64 count then one string per key")
    listed = op_list_keys(a)
    ours = set(k for k in listed if k.startswith(P))
    expect("list_keys (ours)", sorted(ours), sorted(keys))
    expect("list_keys count", len(listed), n0 + len(keys))
    ok("%d keys" % len(listed))

    step("QUEUE_LEN of an unknown queue: 0; QUEUE_POP of it: 0 and no value")
    q = P + "q1"
    expect("qlen", op_qlen(a, q), 0)
    expect("qpop empty", op_qpop(a, q), (0, None))
    a.quiet("after an empty pop")
    ok()

    step("QUEUE_PUSH x3 (no reply), QUEUE_LEN, QUEUE_POP in FIFO order")
    for v in (b"a", b"bb", b""):
        op_qpush(a, q, v)
    a.quiet("queue_push")
    expect("qlen", op_qlen(b, q), 3)
    # [UV] queuePop writes the size *before* popping
    expect("qpop 1", op_qpop(b, q), (3, b"a"))
    expect("qpop 2", op_qpop(b, q), (2, b"bb"))
    expect("qpop 3", op_qpop(b, q), (1, b""))
    expect("qpop 4", op_qpop(b, q), (0, None))
    expect("qlen", op_qlen(a, q), 0)
    ok()

    step("a queue is not a key: GETNUMKEYS unchanged, CHECK READY only while non-empty")
    op_qpush(a, P + "q2", b"x")
    expect("numkeys", op_numkeys(b), n0 + len(keys))
    # [UV] checkKeys: a non-empty queue counts as present
    expect("check queue", op_check(b, [P + "q2"]), READY)
    expect("qpop", op_qpop(b, P + "q2"), (1, b"x"))
    expect("check empty queue", op_check(b, [P + "q2"]), NOT_READY)
    ok()

    step("blocking pop ([CL] queuePop block: WAIT on the queue key, then QUEUE_POP)")
    q3 = P + "q3"
    op_wait_send(a, [q3])
    a.quiet("blocking pop on an empty queue")
    op_qpush(b, q3, b"late")
    expect("blocking pop wake", a.r_u8("wait"), STOP_WAITING)
    expect("blocking pop", op_qpop(a, q3), (1, b"late"))
    ok()

    step("blocking pop on a non-empty queue: STOP_WAITING at once")
    op_qpush(b, q3, b"now")
    op_wait_send(a, [q3])
    expect("wait non-empty", a.r_u8("wait"), STOP_WAITING)
    expect("pop", op_qpop(a, q3), (1, b"now"))
    ok()

    step("three blocked pops, three pushes: woken oldest first, one per push")
    # [UV] queuePush -> wakeupOneWaitingClient: walks waitingSockets_[key] in
    # registration order and wakes the first whose count reaches 0, then stops
    q4 = P + "q4"
    pushers = connect("conn-p")
    poppers = [connect("popper-%d" % i) for i in range(3)]
    for p in poppers:
        op_wait_send(p, [q4])
        # a PING after the WAIT proves the WAIT was registered before the next
        # popper's ([UV] processBuf handles one connection's requests in order)
        op_ping = (0x5EED0000 + len(p.name)) & 0xFFFFFFFF
        p.send(u8(PING) + u32(op_ping))
        expect(p.name + " ping after wait", p.r_u32("ping"), op_ping)
    for p in poppers:
        p.quiet("blocked pop before any push", 0.1)
    for i, want in enumerate(poppers):
        op_qpush(pushers, q4, b"item%d" % i)
        r, _, _ = select.select([p.s for p in poppers[i:]], [], [], TIMEOUT)
        woken = [p.name for p in poppers[i:] if p.s in r]
        if woken and want.name not in woken:
            fail("push %d woke %s; PyTorch wakes the oldest waiter, %s"
                 % (i, " and ".join(woken), want.name))
        expect("wake after push %d (%s)" % (i, want.name), want.r_u8("wait"), STOP_WAITING)
        for other in poppers[i + 1:]:
            other.quiet("push %d must wake %s, the oldest waiter, not %s"
                        % (i, want.name, other.name), 0.15)
        expect("pop by " + want.name, op_qpop(want, q4), (1, b"item%d" % i))
    for p in poppers + [pushers]:
        p.close()
    ok()

    step("a request split into 1-byte fragments (SET, then GET)")
    c = connect("conn-frag")
    op_set(c, P + "frag", b"fragmented value", frag=1)
    keys.add(P + "frag")
    expect("fragmented get", op_get(c, P + "frag", frag=1), b"fragmented value")
    ok()

    step("VALIDATE + PING themselves in 1-byte fragments, then ADD in fragments")
    d = Conn("conn-frag2")
    d.send(u8(VALIDATE) + u32(MAGIC), frag=1)
    d.send(u8(PING) + u32(0x01020304), frag=1)
    expect("fragmented ping", d.r_u32("ping"), 0x01020304)
    d.send(u8(ADD) + string(P + "fctr") + i64(3), frag=1)
    keys.add(P + "fctr")
    expect("fragmented add", d.r_i64("add"), 3)
    ok()

    step("pipelined requests in one write: replies in order")
    e = connect("conn-pipe")
    e.send(u8(GET) + string(P + "k1") + u8(ADD) + string(P + "fctr") + i64(1)
           + u8(CHECK) + keylist([P + "nope"]) + u8(PING) + u32(7))
    expect("pipe get", e.r_vec("get"), b"v1b")
    expect("pipe add", e.r_i64("add"), 4)
    expect("pipe check", e.r_u8("check"), NOT_READY)
    expect("pipe ping", e.r_u32("ping"), 7)
    ok()

    step("final GETNUMKEYS and LIST_KEYS agree")
    expect("numkeys", op_numkeys(e), n0 + len(keys))
    ours = set(k for k in op_list_keys(e) if k.startswith(P))
    expect("list_keys (ours)", sorted(ours), sorted(keys))
    ok()

    for x in (a, b, c, d, e):
        x.close()


def main():
    global HOST, PORT
    if len(sys.argv) < 2:
        print("usage: tcpstore2_ref.py PORT [HOST]", file=sys.stderr)
        return 2
    PORT = int(sys.argv[1])
    if len(sys.argv) > 2:
        HOST = sys.argv[2]
    t0 = time.monotonic()
    try:
        run()
    except Mismatch as m:
        print("MISMATCH at step %d (%s): %s" % (NSTEPS, STEP, m), file=sys.stderr)
        return 1
    except OSError as e:
        print("MISMATCH at step %d (%s): socket error: %s" % (NSTEPS, STEP, e), file=sys.stderr)
        return 1
    print("all %d steps match PyTorch 2.x (%.2fs)" % (NSTEPS, time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

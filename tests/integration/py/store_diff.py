#!/usr/bin/python3
"""Differential test of TCPStore servers with PyTorch's own client.

usage: store_diff.py SEED OPS CLIENTS LIBUV NAME=HOST:PORT...
Runs one random sequence of OPS operations (from SEED) issued by CLIENTS
TCPStore clients (use_libuv=LIBUV, 0 or 1) against PyTorch's own server
(started here with the same use_libuv) and against each NAME=HOST:PORT
server given, then compares every result line by line. A NAME of "agent"
takes HOST:PORT from MASTER_ADDR/MASTER_PORT (a worker under crun, agent
store). Exit 0 when every server gave the reference's transcript, 1 (with
the seed, the step and both lines) when one did not.

The sequence covers every operation the Python API exposes on TCPStore:
set, get, add, compare_set, wait with and without a timeout, check,
delete_key, num_keys, multi_get, multi_set, append, queue_push, queue_pop
(blocking and not), queue_len, list_keys; errors (add on text, get of a
missing key, wait timeouts) are compared by exception type and message.
A parked wait and a blocking queue_pop are issued by one client in a thread
and ended by another client's set or queue_push; the woken result is
compared, whatever the thread's timing. Exceptions that close the
connection (both servers close it) make that client reconnect.

STORE_DIFF_QUIRKS=1 adds a parked wait "ended" by a compare_set that stores
nothing: PyTorch's libuv server ends that wait although the key is missing,
crun's does not (a difference kept on purpose); the test suite runs it once
to show that this comparison catches a server that answers differently.
"""
import os, random, re, sys, threading
from datetime import timedelta

os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
import torch.distributed as dist

TIMEOUT = timedelta(milliseconds=300)  # the clients' own: get of a missing key
PARK = timedelta(seconds=30)  # a parked wait or pop, ended by another client
SHORT = timedelta(milliseconds=100)  # wait(keys, timeout) meant to time out
KEYS = ["k%d" % i for i in range(6)]
NUMS = ["n%d" % i for i in range(3)]
QUEUES = ["q%d" % i for i in range(3)]
# Requests the server does not answer: another client's next request could
# overtake them, so the same client asks something before the next step.
NOREPLY = ("set", "multi_set", "append", "queue_push")


def norm(e):
    """An exception as type and message, without addresses or descriptors."""
    m = str(e).split("\nException raised from")[0].strip()
    m = re.sub(r"SocketImpl\([^)]*\)", "SocketImpl(...)", m)
    m = re.sub(r"\[[0-9a-f:.]*\]:[0-9]+|[0-9.]+:[0-9]+", "ADDR", m)
    return "%s: %s" % (type(e).__name__, m)


def val(b):
    return b.hex() if isinstance(b, bytes) else repr(b)


def gen(seed, n, nclients, libuv):
    """The operation list: (client, op, args), a pair for a parked wait."""
    r = random.Random(seed)
    ops, fresh = [], 0

    def value():
        return bytes(r.choice([b"", b"a", b"\x00\xff", b"xyz" * r.randint(1, 40),
                               str(r.randint(-9, 99)).encode()]))

    def key():
        return r.choice(KEYS + NUMS + QUEUES)

    kinds = ["set", "get", "add", "compare_set", "wait", "wait_t", "check",
             "delete_key", "num_keys", "multi_get", "multi_set", "append",
             "list_keys", "park"]
    if libuv:
        kinds += ["queue_push", "queue_pop", "queue_len", "park_queue"]
    if os.environ.get("STORE_DIFF_QUIRKS") == "1":
        kinds += ["park_cas"]
    for _ in range(n):
        c = r.randrange(nclients)
        k = r.choice(kinds)
        if k == "set":
            ops.append((c, k, (key(), value())))
        elif k == "get":
            ops.append((c, k, (key(),)))
        elif k == "add":
            ops.append((c, k, (r.choice(NUMS + KEYS[:1]), r.randint(-5, 5))))
        elif k == "compare_set":
            ops.append((c, k, (key(), r.choice([b"", value()]), value())))
        elif k in ("wait", "check"):
            ops.append((c, k, (r.sample(KEYS + NUMS + QUEUES, r.randint(1, 3)),)))
        elif k == "wait_t":
            ops.append((c, k, (r.sample(KEYS + NUMS + ["never"], r.randint(1, 2)),)))
        elif k == "delete_key":
            ops.append((c, k, (key(),)))
        elif k in ("num_keys", "list_keys"):
            ops.append((c, k, ()))
        elif k == "multi_get":
            ops.append((c, k, (r.sample(KEYS + NUMS, r.randint(1, 3)),)))
        elif k == "multi_set":
            ks = r.sample(KEYS + NUMS, r.randint(1, 3))
            ops.append((c, k, (ks, [value() for _ in ks])))
        elif k == "append":
            ops.append((c, k, (key(), value())))
        elif k == "queue_push":
            ops.append((c, k, (r.choice(QUEUES + KEYS[:1]), value())))
        elif k == "queue_pop":
            ops.append((c, k, (r.choice(QUEUES), False)))
        elif k == "queue_len":
            ops.append((c, k, (r.choice(QUEUES + KEYS[:1]),)))
        elif k in ("park", "park_queue", "park_cas") and nclients > 1:
            fresh += 1
            other = (c + 1 + r.randrange(nclients - 1)) % nclients
            f = "f%d" % fresh
            ops.append((c, k, (f, other, value())))
    return ops


def call(s, op, a):
    if op == "set":
        s.set(a[0], a[1]); return None
    if op == "get":
        return s.get(a[0])
    if op == "add":
        return s.add(a[0], a[1])
    if op == "compare_set":
        return s.compare_set(a[0], a[1], a[2])
    if op == "wait":
        s.wait(a[0]); return None
    if op == "wait_t":
        s.wait(a[0], SHORT); return None
    if op == "check":
        return s.check(a[0])
    if op == "delete_key":
        return s.delete_key(a[0])
    if op == "num_keys":
        return s.num_keys()
    if op == "list_keys":
        return sorted(s.list_keys())
    if op == "multi_get":
        return s.multi_get(a[0])
    if op == "multi_set":
        s.multi_set(a[0], a[1]); return None
    if op == "append":
        s.append(a[0], a[1]); return None
    if op == "queue_push":
        s.queue_push(a[0], a[1]); return None
    if op == "queue_pop":
        return s.queue_pop(a[0], a[1])
    if op == "wait_park":
        s.wait(a[0], PARK); return None
    if op == "pop_park":
        s.set_timeout(PARK)
        try:
            return s.queue_pop(a[0], True)
        finally:
            s.set_timeout(TIMEOUT)
    if op == "queue_len":
        return s.queue_len(a[0])
    raise ValueError(op)


def show(res):
    if isinstance(res, list):
        return "[" + ", ".join(val(x) if isinstance(x, bytes) else repr(x) for x in res) + "]"
    return val(res)


def run(host, port, ops, nclients, libuv):
    """The transcript of ops against one server."""
    def connect():
        return dist.TCPStore(host, port, None, False, TIMEOUT, use_libuv=libuv)

    cl = [connect() for _ in range(nclients)]
    base_n = cl[0].num_keys()
    base_keys = set(cl[0].list_keys())
    out = []

    def one(c, op, a):
        try:
            res = call(cl[c], op, a)
            if op in NOREPLY:  # a request with no reply: done once one after it is
                cl[c].check(["k0"])
            if op == "num_keys":
                res -= base_n
            if op == "list_keys":
                res = [k for k in res if k not in base_keys]
            return show(res)
        except Exception as e:
            if isinstance(e, dist.DistNetworkError):
                cl[c] = connect()
            return norm(e)

    for i, (c, op, a) in enumerate(ops):
        if op in ("park", "park_queue", "park_cas"):
            f, other, v = a
            got = {}
            if op == "park":
                t = threading.Thread(target=lambda: got.setdefault("r", one(c, "wait_park", ([f],))))
            elif op == "park_cas":
                t = threading.Thread(target=lambda: got.setdefault("r", one(c, "wait", ([f],))))
            else:
                t = threading.Thread(target=lambda: got.setdefault("r", one(c, "pop_park", (f,))))
            t.start()
            t.join(0.05)  # usually parked by now; the result holds either way
            if op == "park_cas":
                w = one(other, "compare_set", (f, b"nope", v))
            else:
                w = one(other, "set" if op == "park" else "queue_push", (f, v))
            t.join(PARK.total_seconds() + 10)
            res = got.get("r", "still blocked")
            out.append("%d c%d %s %s -> %s (woken by c%d: %s)" % (i, c, op, f, res, other, w))
        else:
            out.append("%d c%d %s %s -> %s" % (i, c, op, show(list(a)), one(c, op, a)))
    return out


def main():
    seed, n, nclients, libuv = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    targets, keep = [], []
    for t in sys.argv[5:]:
        name, hp = t.split("=", 1)
        if name == "agent":
            hp = "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
        if hp in ("torch0", "torch1"):  # another PyTorch server, here
            keep.append(dist.TCPStore("127.0.0.1", 0, None, True, TIMEOUT,
                                      wait_for_workers=False, use_libuv=hp == "torch1"))
            hp = "127.0.0.1:%d" % keep[-1].port
        h, p = hp.rsplit(":", 1)
        targets.append((name, h, int(p)))
    ops = gen(seed, n, nclients, libuv)
    print("store_diff: seed %d, %d ops, %d clients, use_libuv=%d" % (seed, len(ops), nclients, libuv), flush=True)
    srv = dist.TCPStore("127.0.0.1", 0, None, True, TIMEOUT, wait_for_workers=False, use_libuv=libuv)
    assert srv.libuvBackend == libuv
    ref = run("127.0.0.1", srv.port, ops, nclients, libuv)
    bad = 0
    for name, h, p in targets:
        got = run(h, p, ops, nclients, libuv)
        for a, b in zip(ref, got):
            if a != b:
                print("store_diff: seed %d: %s differs from torch's server (use_libuv=%d)\n  torch: %s\n  %s: %s"
                      % (seed, name, libuv, a, name, b), flush=True)
                bad += 1
                break
        if os.environ.get("STORE_DIFF_SHOW") == name:
            print("\n".join("  torch: %s\n  %s: %s" % (a, name, b) for a, b in zip(ref, got)))
        else:
            print("store_diff: %s: the same %d results as torch's server" % (name, len(ref)), flush=True)
    sys.exit(1 if bad else 0)


main()

"""Hostile clients of `crun store`, speaking the TCPStore wire by hand.

Usage: store_hostile.py PORT PID CEILING_MB SCENARIO [PORT2]

Each scenario attacks the store at 127.0.0.1:PORT (process PID) in one way a
TCPStore server can be attacked, while a well-behaved G3 client keeps
making round trips on its own connection. It then checks that:
  - the store is alive and still answers the good client,
  - the store's VmHWM (peak RSS, /proc/PID/status) stayed under CEILING_MB,
  - the good client's slowest round trip stayed under RTT_MAX seconds,
  - whatever the scenario itself asserts (refusals, wakeups, CPU time).
Prints one line per scenario; exits 1 with a reason on the first failure.
Every wait is bounded.
"""
import os
import select
import socket
import struct
import sys
import threading
import time

MAGIC = 0x3C85F7CE
RTT_MAX = 1.5  # loaded CI machines; an unbounded reply blocks the loop for seconds

# G0 (PyTorch <= 1.13) and G3 (2.2+) opcodes, from PyTorch's TCPStore sources.
G0_SET, G0_GET, G0_WATCH = 0, 2, 7
G3_VALIDATE, G3_SET, G3_GET, G3_WAIT, G3_MULTI_GET = 0, 1, 3, 6, 10
G3_PING, G3_QUEUE_PUSH, G3_LIST_KEYS = 13, 14, 17


def fail(msg):
    print("FAIL: store_hostile: %s" % msg, flush=True)
    sys.exit(1)


def s8(b):
    return struct.pack("<Q", len(b)) + b


def op(code, *strs):
    return bytes([code]) + b"".join(s8(s) for s in strs)


def lst(code, keys):
    return bytes([code]) + struct.pack("<Q", len(keys)) + b"".join(s8(k) for k in keys)


def validate():
    return bytes([G3_VALIDATE]) + struct.pack("<I", MAGIC)


def ping(n):
    return bytes([G3_PING]) + struct.pack("<I", n)


def conn(port, g3=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if g3:
        s.sendall(validate() + ping(7))
        if recv_exact(s, 4) != struct.pack("<I", 7):
            fail("validate/ping handshake failed")
    return s


def recv_exact(s, n, timeout=10.0):
    buf = b""
    end = time.monotonic() + timeout
    while len(buf) < n:
        left = end - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            chunk = s.recv(n - len(buf))
        except socket.timeout:
            return None
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def closed_by_peer(s, timeout=10.0):
    """True once the server closes s (EOF or reset), draining what it sent."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([s], [], [], max(0.0, end - time.monotonic()))
        if not r:
            continue
        try:
            chunk = s.recv(1 << 20)
        except OSError:
            return True
        if not chunk:
            return True
    return False


def quiet_for(s, secs):
    """True if nothing arrives on s for secs seconds."""
    r, _, _ = select.select([s], [], [], secs)
    return not r


def status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024  # MiB
    return -1


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def alive(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line.split()[1]
    except OSError:
        return False
    return True


class Prober(threading.Thread):
    """A well-behaved client: SET then GET round trips, slowest one kept."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.s = conn(port, g3=True)
        self.stop = threading.Event()
        self.worst = 0.0
        self.n = 0
        self.error = None

    def run(self):
        i = 0
        while not self.stop.is_set():
            i += 1
            v = b"v%d" % i
            t = time.monotonic()
            self.s.sendall(op(G3_SET, b"/probe", v) + op(G3_GET, b"/probe"))
            got = recv_exact(self.s, 8 + len(v), timeout=10)
            dt = time.monotonic() - t
            if got != s8(v):
                self.error = "good client got %r after %.2f s" % (got, dt)
                return
            self.worst = max(self.worst, dt)
            self.n += 1
            time.sleep(0.01)

    def wait_more(self, k, timeout=10.0):
        """Wait (bounded) until k more round trips have completed: the store's
        loop has then come back from whatever the hostile clients sent."""
        goal = self.n + k
        end = time.monotonic() + timeout
        while self.n < goal and self.error is None and time.monotonic() < end:
            time.sleep(0.01)

    def finish(self):
        self.stop.set()
        self.join(15)
        if self.error:
            fail(self.error)
        if self.n == 0:
            fail("good client made no round trip")


# ---- Scenarios: each returns a short note for the report line. ----------


PROBER = None


def settle():
    """Let the attack play out: the good client completes 5 round trips."""
    PROBER.wait_more(5)


def pipelined_gets(port, pid):
    """1 MiB value, 1500 GETs pipelined in one write, unread."""
    c = conn(port)
    c.sendall(op(G0_SET, b"/big", b"x" * (1 << 20)))
    bad = []
    for _ in range(3):
        h = conn(port)
        h.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        h.sendall(op(G0_GET, b"/big") * 1500)
        bad.append(h)
    settle()
    for h in bad:
        h.close()
    c.close()
    return "3 x 1500 pipelined GETs of 1 MiB, never read"


def unread_share(port, pid):
    """With max-memory 16M and max-output at its default (64M),
    one client pipelines 600 GETs of 1 MiB values and does not read: it must
    not take the memory an innocent client's GET needs, and once it reads it
    gets every reply, in order."""
    c = conn(port)
    for k, fill in ((b"/u0", b"x"), (b"/u1", b"y")):
        c.sendall(op(G0_SET, k, fill * (1 << 20)))
    c.sendall(op(G0_GET, b"/u1"))  # SET has no reply: this says they are in
    if recv_exact(c, 8 + (1 << 20)) != s8(b"y" * (1 << 20)):
        fail("the values were not stored")
    h = conn(port)  # a default receive buffer: a 4 KiB one reads too slowly
    n = 600
    h.sendall(b"".join(op(G0_GET, b"/u%d" % (i % 2)) for i in range(n)))
    settle()
    g = conn(port)
    g.sendall(op(G0_GET, b"/u0"))
    got = recv_exact(g, 8 + (1 << 20))
    if got is None or got[8:16] != b"x" * 8:
        fail("an innocent client's GET was not answered while another does not read")
    g.close()
    buf = bytearray(8 + (1 << 20))
    view = memoryview(buf)
    h.settimeout(10)
    for i in range(n):
        have = 0
        while have < len(buf):
            k = h.recv_into(view[have:])
            if k == 0:
                fail("the stalled client was closed after %d of %d replies" % (i, n))
            have += k
        want = b"xy"[i % 2]
        if buf[:8] != struct.pack("<Q", 1 << 20) or buf[8] != want or buf[-1] != want:
            fail("the stalled client's reply %d is not /u%d's value" % (i, i % 2))
    h.close()
    c.close()
    return "600 pipelined GETs of 1 MiB unread; another GET answered; all 600 then read in order"


def multi_get_fanout(port, pid):
    """One MULTI_GET naming a 1 MiB key 512 times (a 512 MiB reply)."""
    c = conn(port, g3=True)
    c.sendall(op(G3_SET, b"/mg", b"y" * (1 << 20)))
    c.sendall(lst(G3_MULTI_GET, [b"/mg"] * 512))
    if not closed_by_peer(c, 10):
        fail("a 512 MiB MULTI_GET reply was not refused")
    return "512 MiB MULTI_GET refused"


def list_keys(port, pid):
    """Pipelined LIST_KEYS over 4000 keys of 1 KiB, unread."""
    c = conn(port, g3=True)
    batch = b"".join(op(G3_SET, b"/l%04d" % i + b"k" * 1000, b"") for i in range(4000))
    c.sendall(batch + ping(9))
    if recv_exact(c, 4) != struct.pack("<I", 9):
        fail("setting the keys failed")
    h = conn(port, g3=True)
    h.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    h.sendall(bytes([G3_LIST_KEYS]) * 150)
    settle()
    h.close()
    c.close()
    return "150 pipelined LIST_KEYS of 4 MiB each, never read"


def watch(port, pid):
    """300 WATCH_KEY on one key, then 1 MiB SETs."""
    w = conn(port)
    w.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    w.sendall(op(G0_WATCH, b"/w") * 300)
    c = conn(port)
    for i in range(4):
        c.sendall(op(G0_SET, b"/w", bytes([65 + i]) * (1 << 20)))
    if not closed_by_peer(w, 10):
        fail("a watcher that never reads was not closed")
    c.close()
    return "300 watches x 1 MiB notifications: watcher closed"


def partial_frames(port, pid):
    """24 connections each holding a 4 MiB SET minus its last byte."""
    held = []
    hdr = bytes([G0_SET]) + s8(b"/p") + struct.pack("<Q", 4 << 20)
    body = b"z" * ((4 << 20) - 1)
    refused = 0
    for _ in range(24):
        h = conn(port)
        try:
            h.sendall(hdr + body)
        except OSError:
            refused += 1
        held.append(h)
    settle()
    for h in held:
        if closed_by_peer(h, 0.2):
            refused += 1
        h.close()
    if refused == 0:
        fail("24 partial 4 MiB frames were all kept")
    return "24 x 4 MiB partial frames: %d refused" % refused


def parked_waits(port, pid):
    """40 parked WAITs of 131072 missing keys each."""
    keys = [b"/q%06d" % i for i in range(131072)]
    frame = lst(G3_WAIT, keys)
    held = []
    refused = 0
    for _ in range(40):
        h = conn(port, g3=True)
        try:
            h.sendall(frame)
        except OSError:
            refused += 1
        held.append(h)
    settle()
    for h in held:
        if closed_by_peer(h, 0.2):
            refused += 1
        h.close()
    if refused == 0:
        fail("40 WAITs of 131072 keys were all parked")
    return "40 WAITs of 131072 keys: %d refused" % refused


def sigpipe(port, pid):
    """Five clients pipeline GETs of a 4 MiB value, then hang up."""
    c = conn(port)
    c.sendall(op(G0_SET, b"/sp", b"s" * (4 << 20)))
    hs = []
    for _ in range(5):
        h = conn(port)
        h.sendall(op(G0_GET, b"/sp") * 20)
        hs.append(h)
    if recv_exact(hs[0], 1) is None:
        fail("no reply to the pipelined GETs")
    for h in hs:
        h.close()  # with replies unread: the store's next write gets EPIPE
    settle()
    c.close()
    return "5 clients hung up during 4 MiB replies"


def queue_wakeups(port, pid):
    """A push completes a waiter; blocked pops are FIFO."""
    a = conn(port, g3=True)
    a.sendall(lst(G3_WAIT, [b"/qa"]) + ping(1))
    if recv_exact(a, 4) != struct.pack("<I", 1):
        fail("A's wait was not parked")
    b = conn(port, g3=True)
    b.sendall(lst(G3_WAIT, [b"/qa", b"/qx"]) + ping(2))
    if recv_exact(b, 4) != struct.pack("<I", 2):
        fail("B's wait was not parked")
    p = conn(port, g3=True)
    p.sendall(op(G3_QUEUE_PUSH, b"/qa", b"item") + ping(3))
    if recv_exact(p, 4) != struct.pack("<I", 3):
        fail("push failed")
    if recv_exact(a, 1, timeout=3) != b"\x00":
        fail("QUEUE_PUSH lost the wakeup of A waiting on [q] (B waits on [q, x])")
    if not quiet_for(b, 0.2):
        fail("B (still missing x) was answered")
    # FIFO: the older of two waiters on one queue is woken first.
    d = conn(port, g3=True)
    d.sendall(lst(G3_WAIT, [b"/qf"]) + ping(4))
    if recv_exact(d, 4) != struct.pack("<I", 4):
        fail("D's wait was not parked")
    e = conn(port, g3=True)
    e.sendall(lst(G3_WAIT, [b"/qf"]) + ping(5))
    if recv_exact(e, 4) != struct.pack("<I", 5):
        fail("E's wait was not parked")
    p.sendall(op(G3_QUEUE_PUSH, b"/qf", b"one") + ping(6))
    if recv_exact(p, 4) != struct.pack("<I", 6):
        fail("push failed")
    if recv_exact(d, 1, timeout=3) != b"\x00":
        fail("a push did not wake the oldest popper first (FIFO)")
    if not quiet_for(e, 0.2):
        fail("one push woke two poppers")
    for s in (a, b, d, e, p):
        s.close()
    return "push completes A past B; FIFO wakeups"


def send_paced(c, frame):
    """Send frame in 1000-byte pieces, paced like a slow link (one read each)."""
    for off in range(0, len(frame), 1000):
        c.sendall(frame[off:off + 1000])
        time.sleep(0.0002)


def incremental(port, pid):
    """A 131072-key MULTI_GET sent in 1000-byte pieces costs the
    store no more than a SET of the same size sent the same way (whose
    decoding is O(1) per piece), where re-parsing from the start on every
    read costs several times that. Comparing the two keeps the check
    meaningful on a loaded machine; a machine busy elsewhere during one
    measurement gets two more tries, and a store that re-parses fails all
    three (it costs ~20 times the SETs, every time)."""
    frame = lst(G3_MULTI_GET, [b"/i%06d" % i + b"k" * 24 for i in range(131072)])
    c = conn(port, g3=True)
    half = len(frame) // 2 - 27
    control = op(G3_SET, b"/ctl1", b"c" * half) + op(G3_SET, b"/ctl2", b"c" * half)
    tries = []
    for _ in range(3):
        before = cpu_seconds(pid)
        send_paced(c, control + ping(4))
        if recv_exact(c, 4, timeout=20) != struct.pack("<I", 4):
            fail("no reply to the chunked SET")
        base = cpu_seconds(pid) - before
        # The request's own work (lookups, reply): the frame sent at once.
        before = cpu_seconds(pid)
        c.sendall(frame)
        if recv_exact(c, 8 * 131072, timeout=20) is None:
            fail("no reply to the MULTI_GET")
        work = cpu_seconds(pid) - before
        before = cpu_seconds(pid)
        send_paced(c, frame)
        reply = recv_exact(c, 8 * 131072, timeout=20)
        used = cpu_seconds(pid) - before
        if reply is None:
            fail("no reply to the chunked MULTI_GET")
        tries.append("%.2f s of store CPU (at once %.2f s; SETs as large %.2f s)" % (used, work, base))
        if used - work <= 1.5 * base + 0.05:
            break
    else:
        fail("the chunked MULTI_GET cost more store CPU than SETs as large "
             "sent the same way, in each of 3 tries (re-parsed per read): "
             + "; ".join(tries))
    c.close()
    return "%d pieces: %s" % ((len(frame) + 999) // 1000, tries[-1])


def idle(port, pid):
    """A connection stalled on a partial frame is closed after
    --idle-timeout (2 s in this suite); a client that never reads its replies
    is covered by test_store_server.c."""
    t = time.monotonic()
    h = conn(port)
    h.sendall(bytes([G0_SET]) + s8(b"/idle") + struct.pack("<Q", 100) + b"abc")
    if not closed_by_peer(h, 8):
        fail("a connection holding a partial frame was never closed")
    dt = time.monotonic() - t
    if dt < 1.5:
        fail("closed after %.1f s, before the 2 s idle timeout" % dt)
    return "stalled partial frame closed after %.1f s" % dt


def wrong_magic(port, pid):
    """A VALIDATE with a wrong magic is closed as such (see log)."""
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(bytes([G3_VALIDATE]) + struct.pack("<I", 0x12345678) + ping(1))
    if not closed_by_peer(c, 5):
        fail("a wrong validate magic was not refused")
    return "wrong magic refused"


def hash_order(port, pid, port2):
    """Two stores order the same keys differently (per-process key)."""
    orders = []
    for p in (port, port2):
        c = conn(p, g3=True)
        c.sendall(b"".join(op(G3_SET, b"/h%03d" % i, b"") for i in range(64)))
        c.sendall(bytes([G3_LIST_KEYS]))
        n = struct.unpack("<Q", recv_exact(c, 8))[0]
        keys = []
        for _ in range(n):
            klen = struct.unpack("<Q", recv_exact(c, 8))[0]
            keys.append(recv_exact(c, klen))
        orders.append([k for k in keys if k.startswith(b"/h")])
        c.close()
    if sorted(orders[0]) != sorted(orders[1]) or len(orders[0]) != 64:
        fail("LIST_KEYS lost keys")
    if orders[0] == orders[1]:
        fail("two store processes hash 64 keys into the same order: the hash is not keyed per process")
    return "bucket order differs between processes"


SCENARIOS = {
    "pipelined_gets": pipelined_gets,
    "unread_share": unread_share,
    "multi_get_fanout": multi_get_fanout,
    "list_keys": list_keys,
    "watch": watch,
    "partial_frames": partial_frames,
    "parked_waits": parked_waits,
    "sigpipe": sigpipe,
    "queue_wakeups": queue_wakeups,
    "incremental": incremental,
    "wrong_magic": wrong_magic,
    "idle": idle,
}


def main():
    port, pid, ceiling = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    name = sys.argv[4]
    if name == "hash_order":
        note = hash_order(port, pid, int(sys.argv[5]))
        print("   ok %-16s %s" % (name, note), flush=True)
        return
    global PROBER
    prober = PROBER = Prober(port)
    prober.start()
    try:
        note = SCENARIOS[name](port, pid)
    except (ConnectionError, socket.timeout) as e:
        fail("%s: %s" % (name, e))
    settle()
    prober.finish()
    if not alive(pid):
        fail("%s: the store died" % name)
    hwm = status(pid, "VmHWM")
    if hwm > ceiling:
        fail("%s: store peak RSS %d MiB exceeds the ceiling %d MiB" % (name, hwm, ceiling))
    if prober.worst > RTT_MAX:
        fail("%s: the good client waited %.2f s for a round trip" % (name, prober.worst))
    print("   ok %-16s %s; peak RSS %d MiB (ceiling %d), worst good RTT %.1f ms"
          % (name, note, hwm, ceiling, prober.worst * 1000), flush=True)


if __name__ == "__main__":
    main()

"""Probe a crun store's key and value limits at their edges (limits_store.sh).

usage: limits_probe.py HOST PORT MAX_KEY MAX_VALUE

Over PyTorch's first (G0) wire: a SET of a MAX_KEY-byte key and a
MAX_VALUE-byte value is read back by a GET; a SET with a key or a value one
byte longer gets its connection closed, while the first connection is still
served. Prints one line per check; exits 1 on the first that does not hold.
"""
import socket
import struct
import sys


def conn(host, port):
    return socket.create_connection((host, port), timeout=10)


def s64(b):
    return struct.pack("<Q", len(b)) + b


def set_(s, k, v):
    s.sendall(b"\x00" + s64(k) + s64(v))


def get(s, k):
    s.sendall(b"\x02" + s64(k))
    n = struct.unpack("<Q", recv(s, 8))[0]
    return recv(s, n)


def recv(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            raise EOFError("closed")
        out += b
    return out


def closed(s):
    """Whether the server closes s within its timeout (EOF or reset)."""
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def main():
    host, port, mk, mv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    good = conn(host, port)
    key = b"/" + b"k" * (mk - 1)
    val = b"v" * mv
    set_(good, key, val)
    if get(good, key) != val:
        sys.exit("a key of %d and a value of %d bytes did not read back" % (mk, mv))
    print("key of %d bytes and value of %d bytes: served" % (mk, mv))
    for what, k, v in (("key", key + b"k", b"1"), ("value", b"/v", val + b"v")):
        bad = conn(host, port)
        set_(bad, k, v)
        if not closed(bad):
            sys.exit("a %s one byte past its limit did not close its connection" % what)
        print("%s of %d bytes: connection closed" % (what, len(k) if what == "key" else len(v)))
    if get(good, key) != val:
        sys.exit("the first connection was not served after the refusals")
    print("the first connection: still served")


main()

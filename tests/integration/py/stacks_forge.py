"""Play a hostile node for status_stacks.sh: wait for the next stacks request
of JOB in the crun store at HOST:PORT (a value of crun/JOB/stacks_req other
than the one there at start) and answer it, as group rank G, with a forged
value: "garbage" (bytes that are no answer) or "huge" (a well-formed start,
then more than an answer may hold). Exits 0 once written, 1 if no request
came within 20 s. Once it has read the value there at start it creates
READY (so the test asks only then).

usage: stacks_forge.py HOST PORT JOB G garbage|huge READY
"""
import socket
import struct
import sys
import time

from raw_store import GET, SET, recv_exact, s


def get(sock, k):
    sock.sendall(bytes([GET]) + s(k))
    return recv_exact(sock, struct.unpack("<Q", recv_exact(sock, 8))[0])


def main():
    host, port, job, g, kind, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
    value = {"garbage": b"\x00\xffno answer\n", "huge": b"crun-stacks 1\n" + b"x" * (300 << 10)}[kind]
    sock = socket.create_connection((host, port), timeout=5)
    key = "crun/%s/stacks_req" % job
    first = get(sock, key)
    open(ready, "w").close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        req = get(sock, key)
        if req and req != first:
            nonce = req.split(b" ")[0].decode()
            sock.sendall(bytes([SET]) + s("crun/%s/stacks/%s/%s" % (job, nonce, g)) + s(value))
            get(sock, key)  # a round trip: the SET was taken
            return 0
        time.sleep(0.02)
    return 1


sys.exit(main())

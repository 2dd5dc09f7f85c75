"""A raw TCPStore wire client (G0 opcodes, no key prefix), for tests that
play a hostile or foreign client: it writes and reads crun's own keys
("crun/...") exactly as given, with no handshake.

usage: raw_store.py HOST PORT CMD...
  set KEY VALUE      SET, no reply
  get KEY            GET, prints the value
  add KEY N          ADD, prints the sum
  numkeys            GETNUMKEYS, prints the count
Commands run in order on one connection. Prints "closed" and exits 3 if the
server closes the connection (no reply, or a write that fails); exits 0
otherwise. Every read is bounded by a 5 s timeout (exit 4).
"""
import socket
import struct
import sys

SET, GET, ADD, GETNUMKEYS = 0, 2, 3, 6


def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            print("closed")
            sys.exit(3)
        out += chunk
    return out


def main():
    host, port, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    sock = socket.create_connection((host, port), timeout=5)
    try:
        while args:
            cmd = args.pop(0)
            if cmd == "set":
                k, v = args.pop(0), args.pop(0)
                sock.sendall(bytes([SET]) + s(k) + s(v))
            elif cmd == "get":
                sock.sendall(bytes([GET]) + s(args.pop(0)))
                n = struct.unpack("<Q", recv_exact(sock, 8))[0]
                print(recv_exact(sock, n).decode(errors="replace"))
            elif cmd == "add":
                k, d = args.pop(0), int(args.pop(0))
                sock.sendall(bytes([ADD]) + s(k) + struct.pack("<q", d))
                print(struct.unpack("<q", recv_exact(sock, 8))[0])
            elif cmd == "numkeys":
                sock.sendall(bytes([GETNUMKEYS]))
                print(struct.unpack("<q", recv_exact(sock, 8))[0])
            else:
                sys.exit("raw_store.py: unknown command " + cmd)
        # A final round trip proves the server took every SET.
        sock.sendall(bytes([GETNUMKEYS]))
        recv_exact(sock, 8)
    except (BrokenPipeError, ConnectionResetError):
        print("closed")
        sys.exit(3)
    except socket.timeout:
        print("timeout")
        sys.exit(4)


if __name__ == "__main__":
    main()

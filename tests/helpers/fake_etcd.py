#!/usr/bin/env python3
"""A small etcd v3 JSON gateway (the subset crun uses) that can turn hostile.

Serves lease grant/keepalive/revoke, kv range/put/txn/deleterange, watch and
auth/authenticate from memory, on 127.0.0.1 at a port the kernel picks; the
port is printed on the first line of stdout. Every request is logged to
--log as "<monotonic seconds> <path>" (one line each). Modes (--mode):

  normal      an honest single member
  flood       each watch sends FLOOD seconds of small valid messages first
  hugeline    each watch sends one line of HUGE MB first
  authbad     authenticate succeeds; everything else: invalid auth token
  canceled    each watch is created then canceled at once
  429         every request is answered "too many requests" (HTTP 429,
              code 8) for the first --for seconds (0: for ever)
  inflate     every range answers a kv list of --mb MB of empty objects
  strings     every range answers a kv list of --mb MB of empty strings
  silentwatch each watch is accepted and never answered
"""
import argparse
import base64
import json
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Condition()
kvs = {}  # key bytes -> dict(value, create, mod, lease)
events = []  # (rev, type, key, kv)
leases = {}
rev = [1]
next_lease = [0x1000]
t0 = time.monotonic()
args = None
logf = None


def b64(b):
    return base64.b64encode(b).decode()


def unb64(s):
    return base64.b64decode(s or "")


def kv_json(k, e):
    return {"key": b64(k), "value": b64(e["value"]),
            "create_revision": str(e["create"]),
            "mod_revision": str(e["mod"]), "lease": str(e["lease"])}


def header():
    return {"cluster_id": "1", "member_id": "1", "revision": str(rev[0]),
            "raft_term": "2"}


def in_range(k, key, end):
    if not end:
        return k == key
    if end == b"\0":
        return k >= key
    return key <= k < end


def do_range(r):
    key, end = unb64(r.get("key")), unb64(r.get("range_end"))
    if args.mode == "inflate":
        n = args.mb * (1 << 20) // 3
        return {"header": header(), "kvs": [{}] * n, "count": str(n)}
    if args.mode == "strings":
        n = args.mb * (1 << 20) // 4  # '"", ' each
        return {"header": header(), "kvs": [""] * n, "count": str(n)}
    found = [(k, kvs[k]) for k in sorted(kvs) if in_range(k, key, end)]
    out = {"header": header(), "count": str(len(found))}
    if found and not r.get("count_only"):
        out["kvs"] = [kv_json(k, e) for k, e in found]
    return out


def put(k, v, lease):
    rev[0] += 1
    e = kvs.get(k)
    e = {"value": v, "create": e["create"] if e else rev[0], "mod": rev[0],
         "lease": int(lease or 0)}
    kvs[k] = e
    events.append((rev[0], "PUT", k, kv_json(k, e)))
    lock.notify_all()


def delete(k):
    rev[0] += 1
    del kvs[k]
    events.append((rev[0], "DELETE", k,
                   {"key": b64(k), "mod_revision": str(rev[0])}))
    lock.notify_all()


def do_put(r):
    put(unb64(r.get("key")), unb64(r.get("value")), r.get("lease"))
    return {"header": header()}


def compare(c):
    e = kvs.get(unb64(c.get("key")))
    t = c.get("target")
    if t == "CREATE":
        have, want = (e["create"] if e else 0), int(c.get("create_revision", 0))
    elif t == "MOD":
        have, want = (e["mod"] if e else 0), int(c.get("mod_revision", 0))
    else:
        have, want = (e["value"] if e else None), unb64(c.get("value"))
    return have == want


def do_txn(r):
    ok = all(compare(c) for c in r.get("compare", []))
    resps = []
    for o in r.get("success" if ok else "failure", []):
        if "request_put" in o:
            do_put(o["request_put"])
            resps.append({"response_put": {"header": header()}})
        elif "request_range" in o:
            resps.append({"response_range": do_range(o["request_range"])})
    out = {"header": header(), "responses": resps}
    if ok:
        out["succeeded"] = True
    return out


def do_grant(r):
    next_lease[0] += 1
    ttl = int(r.get("TTL", 10))
    leases[next_lease[0]] = [ttl, time.monotonic() + ttl]
    return {"header": header(), "ID": str(next_lease[0]), "TTL": str(ttl)}


def do_keepalive(r):
    lid = int(r.get("ID", 0))
    le = leases.get(lid)
    if le is None:
        return {"result": {"header": header(), "ID": str(lid)}}
    le[1] = time.monotonic() + le[0]
    return {"result": {"header": header(), "ID": str(lid), "TTL": str(le[0])}}


def revoke(lid):
    leases.pop(lid, None)
    for k in [k for k, e in kvs.items() if e["lease"] == lid]:
        delete(k)


def do_revoke(r):
    revoke(int(r.get("ID", 0)))
    return {"header": header()}


def do_deleterange(r):
    key, end = unb64(r.get("key")), unb64(r.get("range_end"))
    ks = [k for k in kvs if in_range(k, key, end)]
    for k in ks:
        delete(k)
    return {"header": header(), "deleted": str(len(ks))}


CALLS = {"/v3/kv/range": do_range, "/v3/kv/put": do_put,
         "/v3/kv/txn": do_txn, "/v3/kv/deleterange": do_deleterange,
         "/v3/lease/grant": do_grant, "/v3/lease/keepalive": do_keepalive,
         "/v3/lease/revoke": do_revoke,
         "/v3/auth/authenticate": lambda r: {"header": header(),
                                             "token": "tok.%d" % rev[0]}}


def expire():
    while True:
        time.sleep(0.2)
        with lock:
            now = time.monotonic()
            for lid in [i for i, le in leases.items() if le[1] < now]:
                revoke(lid)


def note(what):
    logf.write("%.3f %s\n" % (time.monotonic() - t0, what))
    logf.flush()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        note(self.path)
        m = args.mode
        if m == "429" and (args.for_s == 0 or time.monotonic() - t0 < args.for_s):
            return self.answer(429, {"error": "etcdserver: too many requests",
                                     "code": 8,
                                     "message": "etcdserver: too many requests"})
        if m == "authbad" and self.path != "/v3/auth/authenticate":
            return self.answer(401, {"error": "etcdserver: invalid auth token",
                                     "code": 16,
                                     "message": "etcdserver: invalid auth token"})
        if self.path == "/v3/watch":
            return self.watch(body.get("create_request", {}))
        f = CALLS.get(self.path)
        if f is None:
            return self.answer(404, {"code": 5, "message": "Not Found"})
        with lock:
            out = f(body)
        self.answer(200, out)

    def line(self, obj):
        self.wfile.write(json.dumps(obj).encode() + b"\n")

    def watch(self, c):
        key, end = unb64(c.get("key")), unb64(c.get("range_end"))
        start = int(c.get("start_revision", 0) or 0)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        if args.mode == "silentwatch":
            time.sleep(3600)
            return
        with lock:
            seen = rev[0] if start == 0 else start - 1
            self.line({"result": {"header": header(), "created": True}})
        if args.mode == "canceled":
            self.line({"result": {"header": header(), "canceled": True,
                                  "cancel_reason": "etcdserver: mvcc: "
                                  "required revision is a future revision"}})
            return
        if args.mode == "flood":
            small = (json.dumps({"result": {"header": header()}}) + "\n").encode()
            chunk = small * 200
            until = time.monotonic() + args.flood
            note("flood-start")
            while time.monotonic() < until:
                self.wfile.write(chunk)
            note("flood-over")
        if args.mode == "hugeline":
            note("hugeline-start")
            self.wfile.write(b'{"result":{"header":{"revision":"1"},"x":"')
            blk = b"a" * (1 << 20)
            for _ in range(args.huge):
                self.wfile.write(blk)
            self.wfile.write(b'"}}\n')
        while True:
            with lock:
                lock.wait_for(lambda: events and events[-1][0] > seen, 1.0)
                evs = [{"type": t, "kv": kv} if t == "DELETE" else {"kv": kv}
                       for r_, t, k, kv in events
                       if r_ > seen and in_range(k, key, end)]
                seen = rev[0]
                hdr = header()
            if evs:
                self.line({"result": {"header": hdr, "events": evs}})
            else:
                self.wfile.write(b"")


def main():
    global args, logf
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="normal")
    p.add_argument("--log", default="/dev/null")
    p.add_argument("--flood", type=float, default=12)
    p.add_argument("--huge", type=int, default=60)
    p.add_argument("--mb", type=int, default=3)
    p.add_argument("--for", dest="for_s", type=float, default=0)
    args = p.parse_args()
    logf = open(args.log, "a")
    socketserver.TCPServer.allow_reuse_address = True
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    threading.Thread(target=expire, daemon=True).start()
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()

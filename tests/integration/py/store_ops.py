#!/usr/bin/python3
"""Run the store transcript with a real torch TCPStore client.

usage: store_ops.py PORT
Prints one line per operation; tests/helpers/store_cli.c prints the same
lines for the same operations, so the two transcripts can be diffed.
torch's TCPStore puts "/" in front of every key; store_cli does it by hand.
"""
import os, sys, time
from datetime import timedelta
import torch.distributed as dist

port = int(sys.argv[1])


def out(*a):
    print(*a, flush=True)


def val(b):
    return b.decode("latin-1") if isinstance(b, bytes) else str(b)


c = dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=5))
c.set("key1", b"val1"); out("set key1")
out("get key1", val(c.get("key1")))
out("add cnt", c.add("cnt", 5))
out("add cnt", c.add("cnt", -2))
out("get cnt", val(c.get("cnt")))
out("compare_set cs", val(c.compare_set("cs", "", "first")))
out("compare_set cs", val(c.compare_set("cs", "wrong", "x")))
out("compare_set cs", val(c.compare_set("cs", "first", "second")))
out("compare_set nokey2", val(c.compare_set("nokey2", "exp", "des")))
out("compare_set empty", val(c.compare_set("empty", "", "")))
out("compare_set empty", val(c.compare_set("empty", "", "z")))
c.wait(["key1", "cnt"]); out("wait key1 cnt")
out("num_keys", c.num_keys())
c.set("n", b"12abc"); out("set n")
out("add n", c.add("n", 1))
out("get n", val(c.get("n")))
out("add neg", c.add("neg", -5))
out("delete_key key1", c.delete_key("key1"))
out("delete_key key1", c.delete_key("key1"))
c.set("bin", bytes([0, 1, 2, 255])); out("set bin")
out("get bin", c.get("bin").hex())
t = time.time()
try:
    c.wait(["never"], timedelta(milliseconds=500))
    out("wait never returned")
except RuntimeError:
    out("wait never timeout", "%.1f" % round(time.time() - t, 1) if time.time() - t < 2 else "slow")
out("get cnt", val(c.get("cnt")))
# A second client sets "late" while this one waits for it.
if os.fork() == 0:
    time.sleep(0.5)
    c2 = dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=5))
    c2.set("late", b"L")
    c2.add("cnt", 10)
    os._exit(0)
out("get late", val(c.get("late")))
os.wait()
out("add cnt", c.add("cnt", 0))
out("num_keys", c.num_keys())
out("done")

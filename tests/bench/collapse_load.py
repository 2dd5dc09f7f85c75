"""The collapse benchmark's two halves (collapse_bench.sh).

worker N INTERVAL_US: a rank printing N lines, line i due at
  $COLLAPSE_T0 + i * INTERVAL_US (wall clock, ns): nine in ten alike on every
  rank ("common line i ..."), the tenth its own ("rank R line i ...").
run OUT CRUN ARGS...: run crun with stdout read here; each line's arrival
  minus its due time is its latency. Prints one JSON object: bytes and lines
  that reached the console, latency p50/p99 (ms), crun's own CPU seconds (its
  utime + stime read while it is a zombie, its workers' left out), wall s.
"""
import json
import os
import subprocess
import sys
import time

PAD = "x" * 60


def worker(n, interval_us):
    t0 = int(os.environ["COLLAPSE_T0"])
    rank = os.environ.get("LOCAL_RANK", "0")
    out = sys.stdout
    for i in range(n):
        due = t0 + i * interval_us * 1000
        wait = (due - time.time_ns()) / 1e9
        if wait > 0:
            time.sleep(wait)
        if i % 10:
            out.write(f"common line {i} {PAD}\n")
        else:
            out.write(f"rank {rank} line {i} {PAD}\n")
        out.flush()


def run(interval_us, argv):
    t0 = time.time_ns() + 1_500_000_000  # the workers start meanwhile
    env = dict(os.environ, COLLAPSE_T0=str(t0))
    start = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
    lat, nbytes, nlines = [], 0, 0
    for raw in p.stdout:
        now = time.time_ns()
        nbytes += len(raw)
        nlines += 1
        # "<prefix>common line I PAD" or "<prefix>rank R line I PAD"
        words = raw.split()
        if len(words) < 3 or not words[-2].isdigit():
            continue
        i = int(words[-2])
        lat.append((now - (t0 + i * interval_us * 1000)) / 1e6)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    with open(f"/proc/{p.pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    cpu = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
    rc = p.wait()
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else -1
    print(json.dumps({"rc": rc, "bytes": nbytes, "lines": nlines,
                      "p50_ms": round(pick(0.50), 2),
                      "p99_ms": round(pick(0.99), 2),
                      "cpu_s": round(cpu, 3),
                      "wall_s": round(time.monotonic() - start, 2)}))


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(int(sys.argv[2]), int(sys.argv[3]))
    else:
        run(int(sys.argv[2]), sys.argv[3:])

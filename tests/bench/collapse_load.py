"""The collapse benchmark's two halves (collapse_bench.sh).

worker N INTERVAL_US: a rank printing N lines, line i due at
  $COLLAPSE_T0 + i * INTERVAL_US (wall clock, ns): nine in ten alike on every
  rank ("common line i ..."), the tenth its own ("rank R line i ...").
run OUT CRUN ARGS...: run crun with stdout read here; each line's arrival
  minus its due time is its latency. Prints one JSON object: bytes and lines
  that reached the console, latency p50/p99 (ms), crun's own CPU seconds (its
  utime + stime read while it is a zombie, its workers' left out), wall s,
  and held: the most worker lines at once that were due (by the schedule,
  on every rank) but not yet on the console, a collapsed line standing for
  as many as it names ranks.
job NODES INTERVAL_US CRUN ARGS... -- WORKER...: the same for a job of NODES
  agents on loopback (a c10d rendezvous; the first hosts the store), each
  agent's stdout read here: the bytes and lines of all of them, the CPU of
  all of them.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

PAD = "x" * 60


def worker(n, interval_us):
    t0 = int(os.environ["COLLAPSE_T0"])
    rank = os.environ.get("RANK", "0")
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


def ranks_named(raw):
    """How many ranks a console line stands for: "[0-3,5]:" 5, "[default2]:" 1."""
    head = raw.split(b"]:", 1)[0]
    if b"[" not in head:
        return 1
    n = 0
    for part in head.rsplit(b"[", 1)[1].lstrip(b"default").split(b","):
        a, _, b = part.partition(b"-")
        n += int(b) - int(a) + 1 if b else 1
    return n


def read(p, t0, interval_us, acc):
    """Every line of p's stdout: its bytes, its latency when numbered, and
    how many due lines are not on the console yet."""
    for raw in p.stdout:
        now = time.time_ns()
        acc["bytes"] += len(raw)
        acc["lines"] += 1
        acc["shown"] += ranks_named(raw)
        due = min(acc["per_rank"], max(0, (now - t0) // (interval_us * 1000) + 1))
        acc["held"] = max(acc["held"], due * acc["ranks"] - acc["shown"])
        # "<prefix>common line I PAD" or "<prefix>rank R line I PAD"
        words = raw.split()
        if len(words) < 3 or not words[-2].isdigit():
            continue
        acc["lat"].append((now - (t0 + int(words[-2]) * interval_us * 1000)) / 1e6)


def own_cpu(pid):
    """A child's own CPU seconds (its workers' left out), read as a zombie."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def measure(interval_us, argvs, t0, ranks, per_rank, before_next=None):
    """Run each argv (its stdout read here), then print the JSON line."""
    env = dict(os.environ, COLLAPSE_T0=str(t0))
    start = time.monotonic()
    acc = {"bytes": 0, "lines": 0, "lat": [], "shown": 0, "held": 0,
           "ranks": ranks, "per_rank": per_rank}
    procs, readers = [], []
    for i, argv in enumerate(argvs):
        if i and before_next:
            before_next()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
        th = threading.Thread(target=read, args=(p, t0, interval_us, acc))
        th.start()
        procs.append(p)
        readers.append(th)
    for th in readers:
        th.join()
    cpu = sum(own_cpu(p.pid) for p in procs)
    rc = max(p.wait() for p in procs)
    lat = sorted(acc["lat"])
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else -1
    print(json.dumps({"rc": rc, "bytes": acc["bytes"], "lines": acc["lines"],
                      "p50_ms": round(pick(0.50), 2),
                      "p99_ms": round(pick(0.99), 2),
                      "cpu_s": round(cpu, 3), "held": acc["held"],
                      "wall_s": round(time.monotonic() - start, 2)}))


def worker_lines(argv):
    """The worker's line count: the word after "worker" in argv."""
    return int(argv[argv.index("worker") + 1])


def run(interval_us, argv):
    nproc = [a for a in argv if a.startswith("--nproc_per_node=")]
    measure(interval_us, [argv], time.time_ns() + 1_500_000_000,
            int(nproc[0].split("=")[1]), worker_lines(argv))


def job(nodes, interval_us, argv):
    """NODES agents of one c10d job; the first hosts the store."""
    cut = argv.index("--")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    agent = argv[:1] + [f"--nnodes={nodes}", "--rdzv_backend=c10d",
                        f"--rdzv_endpoint=127.0.0.1:{port}",
                        "--rdzv_id=bench"] + argv[1:cut] + argv[cut + 1:]

    def listening():
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                return
            except OSError:
                time.sleep(0.05)

    nproc = [a for a in agent if a.startswith("--nproc_per_node=")]
    measure(interval_us, [agent] * nodes, time.time_ns() + 4_000_000_000,
            nodes * int(nproc[0].split("=")[1]), worker_lines(agent),
            listening)


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "job":
        job(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
    else:
        run(int(sys.argv[2]), sys.argv[3:])

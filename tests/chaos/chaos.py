#!/usr/bin/python3
"""Chaos suite for crun: randomized fault scenarios, each checked for the
exit status crun promises, no orphans and no hangs.

Run through tests/chaos/run.sh (`make chaos`), which sets up the
network-namespace hosts (tests/integration/lib_netns.sh) when root and
exports what this driver needs. Environment:

  CHAOS_SEED=S     replay exactly (printed at the start; default: random)
  CHAOS_RUNS=N     number of scenarios (default 100)
  CHAOS_PICK=i,j   run only scenarios i and j of the seed's sequence
  CHAOS_ONLY=name  draw only scenarios whose name contains name
  CHAOS_SLACK=S    add S seconds to every scenario's bound (a loaded machine)
  CHAOS_KEEP=1     keep the logs (they are kept anyway when a scenario fails)
  CRUN=path        the crun binary (default build/crun); FAKE_WORKER likewise

Every process a scenario starts for the job (agents, and through them the
workers and their descendants) carries CHAOS_TAG=<seed>-<index> in its
environment. After the job ends, /proc is scanned for that tag: whatever is
still there ORPHAN_BOUND seconds after the last agent ended is an orphan. An
agent still running at its scenario's bound is a hang: it is killed with
SIGKILL and counted. Helpers (the stranger on the port, the stalled console
reader) carry CHAOS_HELPER instead and are always killed at the end.

Every multi-node scenario runs its agents with the per-node store relay
forced on or off (store_relay=true|false, drawn per scenario and printed as
"relay on|off"): a job ends the same way with and without it.

What crun promises, per scenario (the PROMISE line of each function says it
again):
  worker_kill9     kill -9 of one worker. Restarts left: every agent exits 0.
                   None left: every agent exits 137 (the worker's status).
  agent_kill9      kill -9 of a non-host agent (--nnodes=2:3, 3 agents, workers
                   with a background grandchild): the two others re-form and
                   exit 0; the killed agent's workers and grandchildren go too.
  host_kill9       kill -9 of the store-host agent: every other agent exits 1.
  sigstop          SIGSTOP of an agent past the heartbeat window, then SIGCONT
                   (3 agents, 2:3). A non-host: the other two re-form and exit
                   0; the stopped one exits 0 or 1 (it may rejoin or give up).
                   The store host: every agent exits 1.
  link_cut         (netns) a non-host's cable cut past the heartbeat window,
                   then plugged back: the other two exit 0, the cut one 1.
  bad_interp       a worker whose shebang names a missing interpreter, on one
                   node of 1 or 2: every agent exits 127 (--max_restarts used up).
  term_grandchild  workers whose grandchildren ignore SIGTERM; the job ends by
                   a worker failure (every agent exits its status, 3) or by
                   SIGTERM/SIGINT to a lone agent (128+N).
  grandchild_left  a worker leaves a grandchild behind: `sleep & exit 1`
                   (exits 1 with restarts used up) or `yes & exit 0` (exits 0).
  stalled_reader   `crun ... | sleep 300` with a worker printing ~440 KB: it
                   exits 0 when the worker does, or 128+N on SIGTERM/SIGINT.
  stranger         a silent program holds the endpoint port (0.0.0.0 or
                   127.0.0.1): every agent exits 1 within join_timeout + 6 s.
  late_joiner      --nnodes=2:3, a third agent arrives while two run, or during
                   the rendezvous: every agent exits 0.
  spare            --nnodes=2, a third agent waits as a spare; then kill -9 of
                   the non-host active agent (the spare takes its place: the
                   two left exit 0), or the job succeeds (all exit 0: the spare
                   was not needed), or its workers fail with no restart left
                   (all exit 3, the spare with the job's status).
  signal_rdzv      SIGTERM/SIGINT to agents waiting for MIN: each exits 128+N.
  signal_run       SIGTERM/SIGINT during a run: a lone agent exits 128+N; a
                   non-host of 3 (2:3) exits 128+N and the others re-form and
                   exit 0; a non-host of 2 (2): both exit 128+N (the job stops
                   below MIN with the signal's status); the store host of 3:
                   every agent exits 128+N (the host's departure ends the job).
  signal_stop      a second signal while the agent stops workers that ignore
                   SIGTERM (--shutdown_timeout=3): 128+N of the first signal
                   on every agent (it is the store host's); or a signal during
                   a stop after a worker failure with no restarts left: the
                   worker's status (3) or 128+N, on every agent.
  unresolved       (netns) no host name resolves anywhere (an /etc/hosts with
                   localhost only), the endpoint is h1's address, 2 or 3
                   hosts whose workers set and read a key in the workers'
                   store: every agent exits 0, no node refused or unresolved.
  same_host        3 agents on one host (one host name, no --local_addr),
                   --nnodes=2:3, c's worker always exits 3: with
                   exclude_after=2 only c is left out (a spare) and every
                   agent exits 0; without it, restarts used up, all exit 3.
  lone_elastic     a lone agent of --nnodes=1:2 (last_call_timeout 1 or 2 s,
                   close_timeout 30 s): the worker's status (0, 3, or 127 for
                   a missing interpreter) within last_call_timeout + 8 s, with
                   one line saying it waits for more.
  etcd_hostile     a hostile etcd endpoint (tests/helpers/fake_etcd.py: every
                   token refused, the watch canceled at once, HTTP 429 for
                   ever, a silent watch): exit 1 within read_timeout (3 s) +
                   7 s, with one line naming what etcd did.
  dribbler         32 or 40 clients (the default cap is 32) send /metrics_port
                   one header byte a second: each is closed within two
                   metrics_idle_timeout (2 s) + 5 s, /healthz answers 200
                   then, while the job runs, and the job exits 0.
  store_unread     `crun store --max-memory 16M|24M`, or a lone agent's workers'
                   store (--store_max_memory likewise): one client pipelines
                   600 or 1500 GETs of 1 MiB values and never reads: an
                   innocent client's GET is answered; then SIGTERM stops the
                   store, 0, or the job succeeds, 0.
Bounds: each scenario states how long after its last fault every agent must
have ended (BOUND); ORPHAN_BOUND (3 s) after that no tagged process may remain.
"""
import os
import random
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

TOP = os.getcwd()
BUILD = os.environ.get("BUILD", "build")
CRUN = os.environ.get("CRUN") or os.path.join(TOP, BUILD, "crun")
FAKE = os.environ.get("FAKE_WORKER") or os.path.join(TOP, BUILD, "tests", "fake_worker")
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
ORPHAN_BOUND = 3.0
SLACK = float(os.environ.get("CHAOS_SLACK") or 0)
NETNS = os.environ.get("CHAOS_NETNS") == "1"
RDZV = "--rdzv_conf=join_timeout=20,last_call_timeout=1"


def now():
    return time.monotonic()


def wait_for(seconds, cond, step=0.05):
    end = now() + seconds
    while True:
        if cond():
            return True
        if now() >= end:
            return False
        time.sleep(step)


def tagged_pids(key, value):
    """Pids whose environment holds key=value (read from /proc)."""
    needle = b"\0" + ("%s=%s" % (key, value)).encode() + b"\0"
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                env = b"\0" + f.read()
        except OSError:
            continue
        if needle in env or env.endswith(needle[:-1]):
            out.append(int(d))
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def kill_quiet(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def lines(path):
    try:
        with open(path) as f:
            return [l for l in f.read().splitlines() if l]
    except OSError:
        return []


def netns_sh(func, *args):
    """Call a lib_netns.sh function (link up/down) with the run's state."""
    pre = ('fail() { echo "$*" >&2; exit 1; }; note() { :; }; '
           '. tests/integration/lib_netns.sh; '
           'NETNS_RID=$CHAOS_NETNS_RID NETNS_IFID=$CHAOS_NETNS_IFID '
           'NETNS_N=$CHAOS_NETNS_N NETNS_DIR=$CHAOS_NETNS_DIR; ')
    subprocess.run(["sh", "-c", pre + func + ' "$@"', "sh"] + list(args), check=True)


def netns_addr(i):
    """Host hI's address (lib_netns.sh: 10.<ifid>.0.I, read from its interface)."""
    ns = "%s-%s-h%d" % (os.environ["CHAOS_NETNS_PREFIX"], os.environ["CHAOS_NETNS_RID"], i)
    out = subprocess.run(["ip", "-n", ns, "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[out.index("inet") + 1].split("/")[0]


def netns_argv(host, netns_dir, argv):
    """argv run on host hI (lib_netns.sh's wrap: its name, its /etc/hosts
    from netns_dir or the run's)."""
    return ["ip", "netns", "exec", "%s-%s-h%s" % (os.environ["CHAOS_NETNS_PREFIX"],
                                                  os.environ["CHAOS_NETNS_RID"], host[1:]),
            "unshare", "--uts", "sh", "-c", os.environ["CHAOS_NETNS_WRAP"],
            "sh", host, netns_dir or os.environ["CHAOS_NETNS_DIR"]] + list(argv)


class Failure(Exception):
    pass


class Agent:
    def __init__(self, run, name, argv, host, stdout, netns_dir=None):
        self.name = name
        self.host = host
        self.log = os.path.join(run.dir, name + ".out")
        env = dict(os.environ, CHAOS_TAG=run.tag, PYTHON=PYTHON)
        env.pop("CHAOS_HELPER", None)
        if host:
            argv = netns_argv(host, netns_dir, argv)
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=stdout if stdout is not None else self.logf,
                                     stderr=self.logf, env=env, cwd=run.dir,
                                     start_new_session=True)
        self.pid = self.proc.pid
        self.status = None
        self.t_end = None
        self.killed = False  # killed by the scenario (its status is not asserted)

    def poll(self):
        if self.status is None:
            rc = self.proc.poll()
            if rc is not None:
                self.status = 128 - rc if rc < 0 else rc  # killed by 9: 137
                self.t_end = now()
                self.logf.close()
        return self.status

    def running(self):
        return self.poll() is None

    def signal(self, sig):
        if self.running():
            kill_quiet(self.pid, sig)

    def output(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


class Run:
    """One scenario: its agents, helpers, expectations and the verdict."""

    def __init__(self, index, kind, rng, tmp, seed):
        self.index, self.kind, self.rng = index, kind, rng
        self.tag = "%d-%d" % (seed, index)
        self.dir = os.path.join(tmp, "%03d-%s" % (index, kind))
        os.makedirs(self.dir)
        self.agents = {}
        self.helpers = []
        self.expect = {}  # agent name -> set of acceptable statuses
        self.bound = 20.0
        self.t_fault = now()
        self.desc = ""
        self.net = "lo"
        self.port = free_port()
        self.problems = []
        self.hangs = 0
        self.orphans = 0
        self.time_to_end = 0.0
        self.netns_dir = None  # a directory with other hosts/resolv.conf files
        self.relay = None  # store relay of its multi-node agents: "on", "off"
        self.after = []  # checks run once every agent has ended: each returns a problem or None

    # --- building blocks -------------------------------------------------
    def path(self, name):
        return os.path.join(self.dir, name)

    def endpoint(self):
        if self.net == "netns":
            return ("%s:%d" % (netns_addr(1), self.port)) if self.netns_dir else "h1:%d" % self.port
        return "127.0.0.1:%d" % self.port

    def agent(self, name, nnodes, nproc, worker, extra=(), host=None, stdout=None, rdzv=None):
        if self.net == "netns" and host is None:
            host = "h%d" % (ord(name) - ord("a") + 1)
        argv = [CRUN, "--nproc_per_node=%d" % nproc]
        if nnodes is None:
            argv.append("--standalone")
        else:
            argv += ["--nnodes=%s" % nnodes]
            argv += rdzv or ["--rdzv_backend=c10d", "--rdzv_endpoint=" + self.endpoint()]
            argv += ["--rdzv_id=chaos" + self.tag, RDZV]
        argv += list(extra) + list(worker)
        if nnodes is not None:
            argv = self.with_relay(argv)
        a = Agent(self, name, argv, host, stdout, self.netns_dir)
        self.agents[name] = a
        return a

    def with_relay(self, argv):
        """The relay dimension: every agent of a multi-node scenario runs
        with store_relay forced on or off, drawn once per scenario from its
        own generator (the scenario's other draws stay those of the seed);
        the promises are the same either way. The last --rdzv_conf is the
        one that counts (as for torchrun): the key goes into it."""
        if self.relay is None:
            self.relay = random.Random(self.tag + "-relay").choice(("on", "off"))
        conf = "store_relay=" + ("true" if self.relay == "on" else "false")
        last = max((i for i, a in enumerate(argv) if a.startswith("--rdzv_conf=")), default=None)
        argv = list(argv)
        if last is None:
            argv.insert(1, "--rdzv_conf=" + conf)
        else:
            argv[last] += "," + conf
        return argv

    def agent_argv(self, name, argv):
        """An agent that is not a job (e.g. `crun store`): argv as given."""
        self.agents[name] = Agent(self, name, argv, None, None)
        return self.agents[name]

    def helper(self, argv, **kw):
        env = dict(os.environ, CHAOS_HELPER=self.tag)
        env.pop("CHAOS_TAG", None)
        p = subprocess.Popen(argv, env=env, start_new_session=True, **kw)
        self.helpers.append(p)
        return p

    def check(self, ok, what):
        if not ok:
            raise Failure(what)

    def poll_all(self):
        """Note every agent that has ended (its time to end counts from here)."""
        for a in self.agents.values():
            a.poll()

    def sleep(self, seconds):
        """Sleep, noting agent exits as they happen."""
        end = now() + seconds
        while now() < end:
            self.poll_all()
            time.sleep(min(0.02, max(0.0, end - now())))
        self.poll_all()

    def wait(self, seconds, cond, what):
        def polled():
            self.poll_all()
            return cond()
        self.check(wait_for(seconds, polled), "%s (waited %g s)" % (what, seconds))

    def wait_lines(self, name, n, seconds=15):
        self.wait(seconds, lambda: len(lines(self.path(name))) >= n,
                  "%d line(s) in %s" % (n, name))

    def wait_listening(self, seconds=10):
        """Wait until the store host (agent a) listens on the endpoint, so
        that it, not a later agent, hosts the store."""
        if self.net == "netns":
            ns = "%s-%s-h1" % (os.environ["CHAOS_NETNS_PREFIX"], os.environ["CHAOS_NETNS_RID"])
            cmd = ["ip", "netns", "exec", ns, "ss", "-Hltn", "sport = :%d" % self.port]
        else:
            cmd = ["ss", "-Hltn", "sport = :%d" % self.port]
        self.wait(seconds, lambda: subprocess.run(cmd, capture_output=True, text=True).stdout.strip() != "",
                  "the store host listening on :%d" % self.port)

    def fault(self):
        """Mark the moment the job's end is due to (time to end counts from here)."""
        self.t_fault = now()

    # --- the verdict -----------------------------------------------------
    def finish(self):
        self.bound += SLACK
        deadline = self.t_fault + self.bound
        live = [a for a in self.agents.values() if not a.killed]
        while now() < deadline:
            self.poll_all()
            if not any(a.status is None for a in live):
                break
            time.sleep(0.02)
        for a in self.agents.values():
            if a.running():
                if not a.killed:
                    self.hangs += 1
                    self.problems.append("HANG: agent %s still running %.0f s after the fault; "
                                         "killed" % (a.name, self.bound))
                kill_quiet(a.pid, signal.SIGKILL)
                a.proc.wait()
                a.poll()
        ends = [a.t_end for a in self.agents.values() if a.t_end]
        self.time_to_end = max(0.0, max(ends) - self.t_fault) if ends else 0.0
        for name, want in sorted(self.expect.items()):
            a = self.agents[name]
            if a.status not in want and not (self.hangs and a.status == 137):
                self.problems.append("agent %s exited %s, want %s" % (
                    name, a.status, " or ".join(str(w) for w in sorted(want))))
        for check in self.after:
            problem = check()
            if problem:
                self.problems.append(problem)
        # Orphans: anything still tagged ORPHAN_BOUND s after the last agent.
        last = max(ends) if ends else now()
        wait_for(max(0.0, last + ORPHAN_BOUND - now()), lambda: not tagged_pids("CHAOS_TAG", self.tag))
        left = tagged_pids("CHAOS_TAG", self.tag)
        if left:
            self.orphans += len(left)
            self.problems.append("ORPHANS %.0f s after the job ended: %s" % (
                ORPHAN_BOUND, "; ".join("%d %s" % (p, cmdline(p)[:60]) for p in left)))
        self.cleanup()

    def cleanup(self):
        """Kill whatever this scenario started, whatever happened."""
        for a in self.agents.values():
            if a.running():
                kill_quiet(a.pid, signal.SIGKILL)
            kill_quiet(a.pid, signal.SIGCONT)
        for p in self.helpers:
            kill_quiet(p.pid, signal.SIGKILL)
        for _ in range(50):
            pids = tagged_pids("CHAOS_TAG", self.tag) + tagged_pids("CHAOS_HELPER", self.tag)
            if not pids:
                break
            for p in pids:
                kill_quiet(p, signal.SIGCONT)
                kill_quiet(p, signal.SIGKILL)
            time.sleep(0.1)
        for a in self.agents.values():
            try:
                a.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            a.poll()
        for p in self.helpers:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.net == "netns":
            for h in ("h1", "h2", "h3"):
                try:
                    netns_sh("netns_link_up", h)
                except subprocess.CalledProcessError:
                    pass


# --- workers ----------------------------------------------------------------
def fake(*actions):
    return [FAKE] + [str(x) for x in actions]


def sh(script):
    return ["/bin/sh", "-c", script]


def q(s):
    return shlex.quote(str(s))


SIGS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT}


# --- scenarios ----------------------------------------------------------------
# Each takes a Run, starts agents, injects its fault, and sets r.expect and
# r.bound; the caller then runs r.finish().

def sc_worker_kill9(r):
    nodes = r.rng.choice([1, 2])
    nproc = r.rng.choice([1, 2])
    restarts = r.rng.choice([0, 1])
    pids = r.path("pids")
    w = sh("echo $$ >>%s; exec %s hang-if-attempt 0" % (q(pids), q(FAKE)))
    extra = ["--max_restarts=%d" % restarts]
    if nodes == 1:
        r.agent("a", None, nproc, w, extra)
    else:
        r.agent("a", "2", nproc, w, extra)
        r.wait_listening()
        r.agent("b", "2", nproc, w, extra)
    r.wait_lines("pids", nodes * nproc)
    victim = int(r.rng.choice(lines(pids)))
    r.desc = "%d node(s) x %d, max_restarts=%d, kill -9 worker" % (nodes, nproc, restarts)
    r.fault()
    kill_quiet(victim, signal.SIGKILL)
    # PROMISE: restarts left -> 0 everywhere; none left -> 137 everywhere.
    for n in r.agents:
        r.expect[n] = {0} if restarts else {137}
    r.bound = 15


def three_agents(r, worker, extra=(), nproc=1):
    r.agent("a", "2:3", nproc, worker, extra)
    r.wait_listening()
    r.agent("b", "2:3", nproc, worker, extra)
    r.agent("c", "2:3", nproc, worker, extra)


def sc_agent_kill9(r):
    pids = r.path("pids")
    # A grandchild that outlives its worker unless something holds the group.
    w = sh("echo $$ >>%s; sleep 600 >/dev/null 2>&1 & exec %s hang-if-attempt 0" % (q(pids), q(FAKE)))
    three_agents(r, w)
    r.wait_lines("pids", 3)
    victim = r.rng.choice(["b", "c"])
    r.desc = "3 agents (2:3) on %s, kill -9 agent %s (workers have grandchildren)" % (r.net, victim)
    r.fault()
    r.agents[victim].signal(signal.SIGKILL)
    r.agents[victim].killed = True
    # PROMISE: the survivors re-form without it and exit 0.
    for n in "abc":
        if n != victim:
            r.expect[n] = {0}
    r.bound = 20


def sc_host_kill9(r):
    pids = r.path("pids")
    n = r.rng.choice([2, 3])
    nn = r.rng.choice(["2:3", "1:3"]) if n == 3 else r.rng.choice(["2", "1:2"])
    w = sh("echo $$ >>%s; exec %s hang" % (q(pids), q(FAKE)))
    r.agent("a", nn, 1, w)
    r.wait_listening()
    for x in "bc"[:n - 1]:
        r.agent(x, nn, 1, w)
    r.wait_lines("pids", n)
    r.desc = "%d agents (%s) on %s, kill -9 the store host" % (n, nn, r.net)
    r.fault()
    r.agents["a"].signal(signal.SIGKILL)
    r.agents["a"].killed = True
    # PROMISE: every other agent exits 1 (rendezvous error: lost the store).
    for x in "bc"[:n - 1]:
        r.expect[x] = {1}
    r.bound = 15


def sc_sigstop(r):
    pids = r.path("pids")
    w = sh("echo $$ >>%s; exec %s hang-if-attempt 0" % (q(pids), q(FAKE)))
    three_agents(r, w)
    r.wait_lines("pids", 3)
    victim = r.rng.choice(["a", "b", "c"])
    stop = r.rng.uniform(4.0, 7.0)
    r.desc = "3 agents (2:3) on %s, SIGSTOP %s for %.1f s, then SIGCONT" % (r.net, victim, stop)
    r.fault()
    r.agents[victim].signal(signal.SIGSTOP)
    r.sleep(stop)
    r.agents[victim].signal(signal.SIGCONT)
    if victim == "a":
        # PROMISE: the store host stopped: the others lose the store and
        # exit 1; the host, resumed alone below MIN, exits 1 too (after
        # waiting join_timeout for them).
        r.expect = {"a": {1}, "b": {1}, "c": {1}}
    else:
        # PROMISE: the others re-form and exit 0; the stopped one ends, 0 or 1.
        for n in "abc":
            r.expect[n] = {0} if n != victim else {0, 1}
    r.bound = stop + 25  # from the SIGSTOP; the host may wait join_timeout (20 s)


def sc_link_cut(r):
    pids = r.path("pids")
    w = sh("echo $$ >>%s; exec %s hang-if-attempt 0" % (q(pids), q(FAKE)))
    three_agents(r, w)
    r.wait_lines("pids", 3)
    victim = r.rng.choice(["b", "c"])
    cut = r.rng.uniform(4.0, 7.0)
    host = "h%d" % (ord(victim) - ord("a") + 1)
    r.desc = "3 hosts (2:3), cut %s's link for %.1f s" % (host, cut)
    r.fault()
    netns_sh("netns_link_down", host)
    r.sleep(cut)
    netns_sh("netns_link_up", host)
    # PROMISE: the others re-form and exit 0; the cut agent gives up, 1.
    for n in "abc":
        r.expect[n] = {0} if n != victim else {1}
    r.bound = 30


def sc_bad_interp(r):
    bad = r.path("bad.sh")
    with open(bad, "w") as f:
        f.write("#!/nonexistent/chaos-interpreter\necho never\n")
    os.chmod(bad, 0o755)
    restarts = r.rng.choice([0, 1])
    nodes = r.rng.choice([1, 2])
    extra = ["--max_restarts=%d" % restarts]
    if nodes == 1:
        r.agent("a", r.rng.choice([None, "1:2"]), r.rng.choice([1, 2]), [bad], extra)
        r.desc = "1 node, bad shebang, max_restarts=%d" % restarts
    else:
        good = fake("hang")
        where = r.rng.choice(["a", "b"])
        nn = r.rng.choice(["2", "1:2"])
        r.agent("a", nn, 1, [bad] if where == "a" else good, extra)
        r.wait_listening()
        r.agent("b", nn, 1, [bad] if where == "b" else good, extra)
        r.desc = "2 nodes (%s), bad shebang on %s, max_restarts=%d" % (nn, where, restarts)
    r.fault()
    # PROMISE: the job fails with the exec failure's status everywhere.
    for n in r.agents:
        r.expect[n] = {127}
    r.bound = 25


def sc_term_grandchild(r):
    # The grandchild ignores SIGTERM and SIGINT: only SIGKILL of the group ends it.
    gc = "(trap '' TERM INT; exec sleep 600) >/dev/null 2>&1 &"
    pids = r.path("pids")
    how = r.rng.choice(["failure", "TERM", "INT"])
    extra = ["--shutdown_timeout=2", "--max_restarts=0"]
    if how == "failure":
        nodes = r.rng.choice([1, 2])
        w = sh("%s echo $$ >>%s; exec %s sleep 300 fail-if-rank 0 3 hang" % (gc, q(pids), q(FAKE)))
        if nodes == 1:
            r.agent("a", None, 2, w, extra)
        else:
            r.agent("a", "2", 1, w, extra)
            r.wait_listening()
            r.agent("b", "2", 1, w, extra)
        r.wait_lines("pids", 2)
        r.fault()
        r.desc = "%d node(s), grandchildren ignore SIGTERM, rank 0 fails" % nodes
        # PROMISE: every agent exits 3, the failed worker's status.
        for n in r.agents:
            r.expect[n] = {3}
    else:
        w = sh("%s echo $$ >>%s; exec %s hang" % (gc, q(pids), q(FAKE)))
        r.agent("a", None, 2, w, extra)
        r.wait_lines("pids", 2)
        r.desc = "lone agent, grandchildren ignore SIGTERM, SIG%s to the agent" % how
        r.fault()
        r.agents["a"].signal(SIGS[how])
        # PROMISE: 128+N.
        r.expect["a"] = {128 + SIGS[how]}
    r.bound = 12


def sc_grandchild_left(r):
    how = r.rng.choice(["sleep", "yes"])
    if how == "sleep":
        restarts = r.rng.choice([0, 2])
        r.agent("a", None, 1, sh("sleep 987 & exit 1"), ["--max_restarts=%d" % restarts])
        r.desc = "`sleep 987 & exit 1`, max_restarts=%d" % restarts
        r.expect["a"] = {1}  # PROMISE: the worker's status, no sleep left
    else:
        r.agent("a", None, 1, sh("yes & sleep 0.2; exit 0"))
        r.desc = "`yes & exit 0` (a grandchild writes forever)"
        r.expect["a"] = {0}  # PROMISE: 0, the drain ends, no yes left
    r.fault()
    r.bound = 10


def sc_stalled_reader(r):
    how = r.rng.choice(["exit", "TERM", "INT"])
    rd, wr = os.pipe()
    r.helper(["sleep", "300"], stdin=rd)
    os.close(rd)
    done = r.path("printed")
    # ~8000 lines of ~60 bytes: far more than a pipe holds.
    tail = ["exit", "0"] if how == "exit" else ["hang"]
    r.agent("a", None, 1, fake("print", 8000, "append", done, "printed", *tail),
            ["--log_dir=" + r.path("logs")], stdout=wr)
    os.close(wr)
    r.wait_lines("printed", 1)
    r.desc = "`crun ... | sleep 300`, 440 KB of output, then %s" % (
        "the worker exits 0" if how == "exit" else "SIG%s to the agent" % how)
    r.fault()
    if how == "exit":
        r.expect["a"] = {0}  # PROMISE: 0, not blocked on the reader
    else:
        r.agents["a"].signal(SIGS[how])
        r.expect["a"] = {128 + SIGS[how]}  # PROMISE: 128+N
    r.bound = 15


STRANGER = ("import socket,sys,time; s=socket.socket(); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); "
            "open(sys.argv[3], 'w').write('ready\\n'); time.sleep(120)")


def sc_stranger(r):
    addr = r.rng.choice(["0.0.0.0", "127.0.0.1"])
    n = r.rng.choice([1, 2])
    r.helper([PYTHON, "-c", STRANGER, addr, str(r.port), r.path("ready")])
    r.wait_lines("ready", 1)
    jt = 4
    for x in "ab"[:n]:
        r.agent(x, "2", 1, ["/bin/true"], ["--rdzv_conf=join_timeout=%d" % jt])
    r.desc = "a silent program on %s:%d, %d agent(s), join_timeout=%d" % (addr, r.port, n, jt)
    r.fault()
    # PROMISE: every agent gives up within join_timeout (+ slack) with 1.
    for x in r.agents:
        r.expect[x] = {1}
    r.bound = jt + 6


def sc_late_joiner(r):
    pids = r.path("pids")
    when = r.rng.choice(["running", "rendezvous"])
    if when == "running":
        w = sh("echo $$ >>%s; exec %s hang-if-attempt 0" % (q(pids), q(FAKE)))
        r.agent("a", "2:3", 1, w)
        r.wait_listening()
        r.agent("b", "2:3", 1, w)
        r.wait_lines("pids", 2)
        r.agent("c", "2:3", 1, w)
        r.desc = "2 agents (2:3) on %s run; a third joins" % r.net
    else:
        w = sh("echo $$ >>%s; exec %s sleep 1500 exit 0" % (q(pids), q(FAKE)))
        ex = ["--rdzv_conf=last_call_timeout=3"]
        r.agent("a", "2:3", 1, w, ex)
        r.wait_listening()
        r.agent("b", "2:3", 1, w, ex)
        r.sleep(r.rng.uniform(0.2, 1.5))
        r.agent("c", "2:3", 1, w, ex)
        r.desc = "2 agents (2:3) on %s in the last call; a third joins" % r.net
    r.fault()
    # PROMISE: everyone (re-)forms as 3 and exits 0.
    for x in "abc":
        r.expect[x] = {0}
    r.bound = 25


def sc_spare(r):
    pids = r.path("pids")
    how = r.rng.choice(["lost", "success", "failure"])
    act = {"lost": "hang-if-attempt 0", "success": "sleep 3000 exit 0",
           "failure": "sleep 3000 exit 3"}[how]
    w = sh("echo $$ >>%s; exec %s %s" % (q(pids), q(FAKE), act))
    extra = ["--max_restarts=%d" % (0 if how == "failure" else 1)]
    r.agent("a", "2", 1, w, extra)
    r.wait_listening()
    r.agent("b", "2", 1, w, extra)
    r.wait_lines("pids", 2)
    r.agent("c", "2", 1, w, extra)
    r.wait(15, lambda: "waits as a spare" in r.agents["c"].output(), "c waiting as a spare")
    r.desc = "--nnodes=2, a third agent waits as a spare on %s; %s" % (r.net, {
        "lost": "kill -9 agent b", "success": "the job succeeds",
        "failure": "workers exit 3, no restart"}[how])
    r.fault()
    if how == "lost":
        r.agents["b"].signal(signal.SIGKILL)
        r.agents["b"].killed = True
        # PROMISE: the spare takes b's place: a and c exit 0.
        r.expect["a"] = r.expect["c"] = {0}
    else:
        # PROMISE: the spare ends as the job does: 0 or the workers' 3.
        for x in "abc":
            r.expect[x] = {0 if how == "success" else 3}
    r.bound = 20


def sc_signal_rdzv(r):
    sig = r.rng.choice(["TERM", "INT"])
    n = r.rng.choice([1, 2])
    w = fake("exit", 0)
    r.agent("a", "3", 1, w)
    r.wait_listening()
    if n == 2:
        r.agent("b", "3", 1, w)
        r.sleep(0.5)
    r.desc = "%d agent(s) of 3 on %s waiting for MIN, SIG%s to each" % (n, r.net, sig)
    r.fault()
    for x in sorted(r.agents, reverse=True):
        r.agents[x].signal(SIGS[sig])
        r.sleep(r.rng.uniform(0, 0.5))
        r.expect[x] = {128 + SIGS[sig]}  # PROMISE: 128+N
    r.bound = 8


def sc_signal_run(r):
    sig = r.rng.choice(["TERM", "INT"])
    N = 128 + SIGS[sig]
    shape = r.rng.choice(["lone", "nonhost3", "nonhost2", "host3"])
    pids = r.path("pids")
    w = sh("echo $$ >>%s; exec %s hang-if-attempt 0" % (q(pids), q(FAKE)))
    if shape == "lone":
        r.agent("a", None, r.rng.choice([1, 2]), w)
        r.wait_lines("pids", 1)
        victim = "a"
        r.expect["a"] = {N}
    elif shape == "nonhost2":
        r.agent("a", "2", 1, w)
        r.wait_listening()
        r.agent("b", "2", 1, w)
        r.wait_lines("pids", 2)
        victim = "b"
        r.expect = {"a": {N}, "b": {N}}  # below MIN: the signal's status passed on
    else:
        three_agents(r, w)
        r.wait_lines("pids", 3)
        if shape == "host3":
            victim = "a"
            r.expect = {"a": {N}, "b": {N}, "c": {N}}  # the host's signal passed on
        else:
            victim = r.rng.choice(["b", "c"])
            r.expect = {x: ({N} if x == victim else {0}) for x in "abc"}
    r.desc = "%s on %s, SIG%s to agent %s during the run" % (shape, r.net, sig, victim)
    r.fault()
    r.agents[victim].signal(SIGS[sig])
    r.bound = 20


def sc_signal_stop(r):
    how = r.rng.choice(["second-signal", "after-failure"])
    first = r.rng.choice(["TERM", "INT"])
    second = r.rng.choice(["TERM", "INT"])
    pids = r.path("pids")
    extra = ["--shutdown_timeout=3", "--max_restarts=0"]
    nodes = r.rng.choice([1, 2])
    # The pid is written once the signals are ignored; rank 0 fails 0.3 s later.
    if how == "second-signal":
        w = fake("ignore", "TERM", "ignore", "INT", "pid", pids, "hang")
    else:
        w = fake("ignore", "TERM", "ignore", "INT", "pid", pids, "sleep", 300, "fail-if-rank", 0, 3, "hang")
    if nodes == 1:
        r.agent("a", None, 2, w, extra)
    else:
        r.agent("a", "2", 1, w, extra)
        r.wait_listening()
        r.agent("b", "2", 1, w, extra)
    r.wait_lines("pids", 2)
    r.fault()
    a = r.agents["a"]
    if how == "second-signal":
        a.signal(SIGS[first])
        r.sleep(r.rng.uniform(0.3, 1.5))
        a.signal(SIGS[second])
        r.desc = "%d node(s), workers ignore TERM/INT: SIG%s then SIG%s to a" % (nodes, first, second)
        # PROMISE: the first signal's 128+N on a, passed on to the other node.
        r.expect["a"] = {128 + SIGS[first]}
        if nodes == 2:
            r.expect["b"] = {128 + SIGS[first]}
    else:
        r.sleep(r.rng.uniform(0.6, 2.5))  # rank 0 failed, rank 1 ignores SIGTERM
        a.signal(SIGS[first])
        r.desc = "%d node(s), rank 0 failed, workers ignore TERM: SIG%s during the stop" % (nodes, first)
        # PROMISE: the worker's status 3, or 128+N where the signal was taken.
        r.expect["a"] = {3, 128 + SIGS[first]}
        if nodes == 2:
            r.expect["b"] = {3, 128 + SIGS[first]}
    r.bound = 3 + 10


# A worker that sets its key in the workers' store (MASTER_ADDR:MASTER_PORT,
# TCPStore's wire format) and reads it back: exit 0, or 1 when refused.
STORE_PROBE = r"""
import os, socket, struct, sys
def s8(b):
    return struct.pack("<Q", len(b)) + b
k = ("chaos/" + os.environ["RANK"]).encode()
try:
    s = socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), timeout=15)
    s.sendall(bytes([0]) + s8(k) + s8(b"ok") + bytes([2]) + s8(k))
    got = b""
    while len(got) < 10:
        c = s.recv(10 - len(got))
        if not c:
            break
        got += c
except OSError as e:
    sys.exit("store probe: %s" % e)
sys.exit(0 if got == s8(b"ok") else "store probe: read %r" % got)
"""


def sc_unresolved(r):
    # Hosts as containers and pods are: no host name resolves anywhere (an
    # /etc/hosts with localhost only, a resolver that answers nothing); the
    # endpoint is h1's address.
    d = r.path("nameless")
    os.makedirs(d)
    with open(os.path.join(d, "hosts"), "w") as f:
        f.write("127.0.0.1\tlocalhost\n")
    with open(os.path.join(d, "resolv.conf"), "w") as f:
        f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    r.netns_dir = d
    for h in ("h1", "h2"):
        r.check(subprocess.run(netns_argv(h, d, ["getent", "hosts", "h1"]),
                               capture_output=True).returncode != 0, "h1 resolves on %s" % h)
    n = r.rng.choice([2, 3])
    nn = r.rng.choice(["%d" % n, "2:3"])
    # Each worker sets and reads back a key in the workers' store.
    w = [PYTHON, "-c", STORE_PROBE]
    r.agent("a", nn, r.rng.choice([1, 2]), w)
    r.wait_listening()
    for x in "bc"[:n - 1]:
        r.agent(x, nn, 1, w)
    r.desc = "%d nameless netns hosts (%s), endpoint %s" % (n, nn, r.endpoint())
    r.fault()
    # PROMISE: every agent exits 0; no node refused for a name that does
    # not resolve.
    for x in r.agents:
        r.expect[x] = {0}

    def refused():
        for a in r.agents.values():
            for l in a.output().splitlines():
                if "not a node of this round" in l or "cannot resolve" in l:
                    return "agent %s: %s" % (a.name, l.strip())
        return None
    r.after.append(refused)
    r.bound = 30


def sc_same_host(r):
    # Several agents per machine: one host name, no --local_addr; c's
    # worker always fails, exclude_after=2 leaves it out.
    runs = r.path("runs")
    good = fake("append", runs, "ok", "sleep", 4000, "exit", 0)
    bad = fake("append", runs, "bad", "sleep", 200, "exit", 3)
    conf = "--rdzv_conf=exclude_after=2"
    shape = r.rng.choice(["exclude", "no-exclude"])
    extra = ["--max_restarts=3"] + ([conf] if shape == "exclude" else [])
    r.agent("a", "2:3", 1, good, extra)
    r.wait_listening()
    r.agent("b", "2:3", 1, good, extra)
    r.agent("c", "2:3", 1, bad, extra)
    r.desc = "3 agents (2:3) on one host, c's worker always exits 3, %s" % (
        "exclude_after=2" if shape == "exclude" else "no exclusion, max_restarts=3")
    r.fault()
    if shape == "exclude":
        # PROMISE: only c is left out (a spare); a and b finish a round of
        # 2 and every agent exits 0, none hangs.
        r.expect = {"a": {0}, "b": {0}, "c": {0}}

        def left_out():
            if "waits as a spare" in r.agents["b"].output():
                return "agent b took c's exclusion for its own"
            if "waits as a spare" not in r.agents["c"].output():
                return "agent c was not left out"
            return None
        r.after.append(left_out)
    else:
        # PROMISE: c's failure ends every round; restarts used up, every
        # agent exits c's status, 3.
        r.expect = {"a": {3}, "b": {3}, "c": {3}}
    r.bound = 45


def sc_lone_elastic(r):
    # A lone node of an elastic range --nnodes=1:2: nobody else is coming.
    how = r.rng.choice(["exit0", "exit3", "noexec"])
    if how == "exit0":
        w, want = fake("exit", 0), 0
    elif how == "exit3":
        w, want = fake("exit", 3), 3
    else:
        bad = r.path("bad.sh")
        with open(bad, "w") as f:
            f.write("#!/nonexistent/chaos-interpreter\n")
        os.chmod(bad, 0o755)
        w, want = [bad], 127
    lct = r.rng.choice([1, 2])
    r.agent("a", "1:2", r.rng.choice([1, 2]), w,
            ["--max_restarts=0", "--rdzv_conf=last_call_timeout=%d,close_timeout=30" % lct])
    r.desc = "a lone agent of --nnodes=1:2 (last_call_timeout=%d), worker %s" % (lct, how)
    r.fault()
    # PROMISE: the worker's status (0, 3, 127 when it cannot start) right
    # after last_call_timeout and the run: no wait for nodes that never
    # came (close_timeout); the wait for more is said, once.
    r.expect["a"] = {want}
    said = "1 of 1-2 nodes have joined: waiting up to %d s for more (last_call_timeout)" % lct

    def last_call():
        n = sum(said in l for l in r.agents["a"].output().splitlines())
        return None if n == 1 else "%d lines saying '%s', want 1" % (n, said)
    r.after.append(last_call)
    r.bound = lct + 8


ETCD_MODES = {
    # mode: (the one line crun ends with, --nnodes)
    "authbad": ("invalid auth token", "2"),
    "canceled": ("canceled this node's watch (.*future revision), again and again", "2"),
    "429": ("too many requests (retried for 3 s)", "2"),
    "silentwatch": ("never confirmed it (no answer in 2 s), again and again for 3 s", "1:2"),
}


def sc_etcd_hostile(r):
    mode = r.rng.choice(sorted(ETCD_MODES))
    pattern, nn = ETCD_MODES[mode]
    rt = 3
    out = open(r.path("etcd.port"), "w")
    r.helper([PYTHON, os.path.join(TOP, "tests", "helpers", "fake_etcd.py"), "--mode", mode,
              "--log", r.path("etcd.log")], stdout=out, stderr=subprocess.DEVNULL)
    out.close()
    r.wait_lines("etcd.port", 1)
    port = int(lines(r.path("etcd.port"))[0])
    conf = "--rdzv_conf=lease_ttl=3,read_timeout=%d,join_timeout=30" % rt
    if mode == "authbad":
        with open(r.path("pw"), "w") as f:
            f.write("secret\n")
        conf += ",user=u,password_file=" + r.path("pw")
    r.agent("a", nn, 1, fake("sleep", 60000, "exit", 0), [conf],
            rdzv=["--rdzv_backend=etcd", "--rdzv_endpoint=127.0.0.1:%d" % port])
    r.desc = "a hostile etcd endpoint (fake_etcd.py --mode %s), read_timeout=%d" % (mode, rt)
    r.fault()
    # PROMISE: exit 1 within read_timeout + slack, with one line naming
    # what etcd did; never a hang.
    r.expect["a"] = {1}

    def one_line():
        n = sum(bool(re.search(re.escape(pattern).replace(r"\.\*", ".*"), l))
                for l in r.agents["a"].output().splitlines())
        return None if n == 1 else "%d lines saying '%s', want 1" % (n, pattern)
    r.after.append(one_line)
    r.bound = rt + 7  # silentwatch: 2 s per try, then read_timeout


def http_code(url, timeout=2.0):
    host, _, rest = url[len("http://"):].partition("/")
    h, _, p = host.rpartition(":")
    try:
        s = socket.create_connection((h, int(p)), timeout=timeout)
        s.sendall(b"GET /" + rest.encode() + b" HTTP/1.0\r\n\r\n")
        head = s.recv(64)
        s.close()
        return int(head.split()[1])
    except (OSError, ValueError, IndexError):
        return None


def sc_dribbler(r):
    # Clients that send one header byte a second against --metrics_port, as
    # many as the connection cap: each restarts the server's own timeout.
    idle = 2
    n = r.rng.choice([32, 40])
    done = r.path("done")
    w = sh("while [ ! -e %s ]; do sleep 0.1; done; exit 0" % q(done))
    r.agent("a", None, 1, w, ["--metrics_port=0", "--metrics_addr=127.0.0.1",
                              "--metrics_idle_timeout=%d" % idle])
    url = []

    def health():
        for l in r.agents["a"].output().splitlines():
            if "health on http://" in l:
                url.append(l.split("health on ")[1].split()[0].rstrip(","))
                return True
        return False
    r.wait(10, health, "the agent's health URL")
    h = url[0][len("http://"):].split("/")[0].rpartition(":")
    socks = []
    for _ in range(n):
        try:
            s = socket.create_connection((h[0], int(h[2])), timeout=5)
            s.setblocking(False)
            socks.append(s)
        except OSError:
            break
    r.desc = "%d clients dribbling one header byte a second, metrics_idle_timeout=%d" % (len(socks), idle)
    r.fault()
    req = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 64
    # Over the cap, the last ones are accepted only once the first are
    # closed: two idle timeouts, and slack.
    close_by = 2 * idle + 5
    t0, sent, open_ = now(), 0, list(socks)
    while open_ and now() < t0 + close_by:
        still = []
        for s in open_:
            try:
                if s.recv(4096) == b"":
                    s.close()
                    continue
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                continue
            try:
                s.send(req[sent:sent + 1])
            except OSError:
                s.close()
                continue
            still.append(s)
        open_, sent = still, sent + 1
        r.sleep(1)
    left = len(open_)
    # /healthz, asked only now: a probe must not be what frees the server.
    code = [None]

    def healthy():
        code[0] = http_code(url[0])
        return code[0] == 200
    wait_for(5, healthy, step=0.5)
    for s in open_:
        s.close()
    with open(done, "w"):
        pass
    # PROMISE: the dribblers are closed within two metrics_idle_timeouts
    # (+5 s), /healthz then answers 200 while the job runs, and it exits 0.
    r.expect["a"] = {0}
    r.after.append(lambda: None if left == 0 else
                   "%d of %d dribblers still open %d s after they began" % (left, len(socks), close_by))
    r.after.append(lambda: None if code[0] == 200 else
                   "/healthz answered %s after the dribblers, want 200" % code[0])
    r.bound = close_by + 5 + 10


def store_op(code, *strs):
    return bytes([code]) + b"".join(struct.pack("<Q", len(x)) + x for x in strs)


def recv_n(s, n, seconds):
    buf = bytearray()
    end = now() + seconds
    while len(buf) < n and now() < end:
        s.settimeout(max(0.01, end - now()))
        try:
            c = s.recv(n - len(buf))
        except socket.timeout:
            break
        except OSError:
            return None
        if not c:
            return None
        buf += c
    return bytes(buf) if len(buf) == n else None


def sc_store_unread(r):
    # A client that pipelines GETs of 1 MiB values and never reads its
    # replies, against `crun store` or the workers' store of a lone agent,
    # with a low memory ceiling (the unsent-reply cap at its default, 64M).
    mem = r.rng.choice([16, 24])
    n = r.rng.choice([600, 1500])
    where = r.rng.choice(["crun store", "workers' store"])
    if where == "crun store":
        r.agent_argv("a", [CRUN, "store", "--host", "127.0.0.1", "--port", str(r.port),
                           "--max-memory", "%dM" % mem])
        r.wait_listening()
        port = r.port
    else:
        done = r.path("done")
        w = sh("echo $MASTER_PORT >%s; while [ ! -e %s ]; do sleep 0.1; done; exit 0" % (
            q(r.path("port")), q(done)))
        r.agent("a", None, 1, w, ["--store_max_memory=%dM" % mem])
        r.wait_lines("port", 1)
        port = int(lines(r.path("port"))[0])
    G0_SET, G0_GET = 0, 2
    big = 1 << 20
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    for k, fill in ((b"/u0", b"x"), (b"/u1", b"y")):
        c.sendall(store_op(G0_SET, k, fill * big))
    c.sendall(store_op(G0_GET, b"/u1"))
    r.check(recv_n(c, 8 + big, 10) is not None, "the values were not stored")
    hog = socket.create_connection(("127.0.0.1", port), timeout=10)
    hog.sendall(b"".join(store_op(G0_GET, b"/u%d" % (i % 2)) for i in range(n)))
    r.sleep(1)
    r.desc = "%s, %dM of memory, one client pipelines %d GETs of 1 MiB unread" % (where, mem, n)
    r.fault()
    g = socket.create_connection(("127.0.0.1", port), timeout=10)
    g.sendall(store_op(G0_GET, b"/u0"))
    got = recv_n(g, 8 + big, 5)
    for s in (g, hog, c):
        s.close()
    if where == "crun store":
        r.agents["a"].signal(signal.SIGTERM)
    else:
        with open(done, "w"):
            pass
    # PROMISE: the innocent client's GET is answered; `crun store` stops
    # cleanly on SIGTERM (0), the job succeeds (0).
    r.expect["a"] = {0}
    r.after.append(lambda: None if got is not None and got[8:16] == b"x" * 8 else
                   "an innocent client's GET was not answered while another does not read")
    r.bound = 10

SCENARIOS = [
    ("worker_kill9", sc_worker_kill9, False),
    ("agent_kill9", sc_agent_kill9, True),
    ("host_kill9", sc_host_kill9, True),
    ("sigstop", sc_sigstop, True),
    ("link_cut", sc_link_cut, True),
    ("bad_interp", sc_bad_interp, False),
    ("term_grandchild", sc_term_grandchild, False),
    ("grandchild_left", sc_grandchild_left, False),
    ("stalled_reader", sc_stalled_reader, False),
    ("stranger", sc_stranger, False),
    ("late_joiner", sc_late_joiner, True),
    ("spare", sc_spare, True),
    ("signal_rdzv", sc_signal_rdzv, True),
    ("signal_run", sc_signal_run, True),
    ("signal_stop", sc_signal_stop, False),
    ("unresolved", sc_unresolved, True),
    ("same_host", sc_same_host, False),
    ("lone_elastic", sc_lone_elastic, False),
    ("etcd_hostile", sc_etcd_hostile, False),
    ("dribbler", sc_dribbler, False),
    ("store_unread", sc_store_unread, False),
]
NETNS_ONLY = {"link_cut", "unresolved"}


def draw(seed, runs, only):
    """The scenario sequence: every kind once per shuffled cycle, so a short
    run still covers many kinds; each index has its own generator."""
    rng = random.Random(seed)
    kinds = [s for s in SCENARIOS if not only or only in s[0]]
    if not NETNS:
        kinds = [s for s in kinds if s[0] not in NETNS_ONLY]
    out = []
    while len(out) < runs:
        cycle = kinds[:]
        rng.shuffle(cycle)
        out += cycle
    return out[:runs]


def main():
    seed = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1, 10**9))
    runs = int(os.environ.get("CHAOS_RUNS") or 100)
    only = os.environ.get("CHAOS_ONLY", "")
    pick = {int(x) for x in os.environ.get("CHAOS_PICK", "").split(",") if x.strip()}
    for p in (CRUN, FAKE):
        if not os.access(p, os.X_OK):
            print("chaos: %s is not built" % p, file=sys.stderr)
            return 2
    print("chaos: seed %d, %d scenarios, crun %s, netns %s (replay: CHAOS_SEED=%d CHAOS_RUNS=%d)"
          % (seed, runs, CRUN, "on" if NETNS else "off: " + os.environ.get("CHAOS_NETNS_WHY", "not set up"),
             seed, runs), flush=True)
    def on_signal(sig, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tmp = tempfile.mkdtemp(prefix="crun-chaos-%d-" % seed)
    table = {}
    failed = hangs = orphans = 0
    t0 = now()
    for i, (kind, fn, multi) in enumerate(draw(seed, runs, only)):
        if pick and i not in pick:
            continue
        rng = random.Random("%d-%d" % (seed, i))
        r = Run(i, kind, rng, tmp, seed)
        if NETNS and multi and rng.random() < 0.5 or kind in NETNS_ONLY:
            r.net = "netns"
            r.port = 20000 + (seed + i) % 10000
        try:
            fn(r)
            r.finish()
        except Failure as e:
            r.problems.append("setup: " + str(e))
            r.cleanup()
        except Exception as e:  # a bug in the driver is a failure too
            r.problems.append("driver: %r" % (e,))
            r.cleanup()
        except KeyboardInterrupt:
            print("chaos: interrupted in scenario %d; cleaning up" % i, flush=True)
            r.cleanup()
            return 130
        ok = not r.problems
        st = table.setdefault(kind, [0, 0, 0.0])
        st[0] += 1
        st[1] += ok
        st[2] = max(st[2], r.time_to_end)
        hangs += r.hangs
        orphans += r.orphans
        statuses = " ".join("%s=%s@%.1f" % (n, a.status, a.t_end - r.t_fault if a.t_end else -1)
                            for n, a in sorted(r.agents.items()))
        print("%3d %-16s %-4s %s  [%s] end %.1fs -- %s%s" % (
            i, kind, "ok" if ok else "FAIL", r.net, statuses, r.time_to_end, r.desc,
            ", relay " + r.relay if r.relay else ""), flush=True)
        if not ok:
            failed += 1
            for p in r.problems:
                print("      " + p)
            for n, a in sorted(r.agents.items()):
                out = a.output().strip().splitlines()[-4:]
                for l in out:
                    print("      %s| %s" % (n, l[:160]))
            print("      replay: CHAOS_SEED=%d CHAOS_RUNS=%d CHAOS_PICK=%d make chaos" % (seed, runs, i),
                  flush=True)
    print("\n%-16s %5s %7s %15s" % ("scenario", "runs", "passed", "worst end (s)"))
    for kind, _, _ in SCENARIOS:
        if kind in table:
            st = table[kind]
            print("%-16s %5d %7d %15.1f" % (kind, st[0], st[1], st[2]))
    total = sum(st[0] for st in table.values())
    print("chaos: seed %d: %d scenarios, %d failed, %d hang(s), %d orphan(s), %.0f s" % (
        seed, total, failed, hangs, orphans, now() - t0))
    if not failed and not os.environ.get("CHAOS_KEEP"):
        subprocess.run(["rm", "-rf", tmp])
    else:
        print("chaos: logs kept in %s" % tmp)
    return 1 if failed or hangs or orphans else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Mutation runner for `make mutate`.

Each mutation in tests/mutate/mutations.txt changes one line of the tree:
the line containing FIND (exactly one such line in FILE, or the first after
a line containing AFTER) gets FIND replaced by REPLACE. For each mutation, in
a scratch copy of the tree (made once, built once), the runner applies it,
rebuilds, runs the listed test subset (tests/run.sh with TESTS=...) and
restores the file. A mutation whose tests still pass SURVIVED. A mutation
whose FIND no longer matches is STALE. Exit status: 0 when every mutation
was killed, 1 otherwise. MUTATE=pattern runs only mutations whose name
contains one of its (space-separated) words; MUTATE_KEEP=1 keeps the
scratch tree; MUTATE_TIMEOUT bounds each test suite (default 300 s).
"""
import os, shutil, subprocess, sys, tempfile, time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIST = os.path.join(TOP, "tests", "mutate", "mutations.txt")


def parse(path):
    muts, cur = [], None
    for n, raw in enumerate(open(path), 1):
        line = raw.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("name:"):
            cur = {"name": line[5:].strip(), "line": n}
            muts.append(cur)
            continue
        if cur is None or ":" not in line:
            sys.exit("%s:%d: expected 'name:' first, then 'key: value'" % (path, n))
        k, v = line.split(":", 1)
        k = k.strip()
        if k not in ("file", "find", "replace", "after", "tests"):
            sys.exit("%s:%d: unknown key '%s'" % (path, n, k))
        cur[k] = v[1:] if v.startswith(" ") else v
    for m in muts:
        for k in ("file", "find", "replace", "tests"):
            if k not in m:
                sys.exit("%s:%d: mutation '%s' has no %s" % (path, m["line"], m["name"], k))
    return muts


def apply(text, m):
    """Return the mutated text, or an error string (stale mutation)."""
    lines = text.split("\n")
    start = 0
    if m.get("after"):
        hits = [i for i, l in enumerate(lines) if m["after"] in l]
        if len(hits) != 1:
            return None, "'after' text found on %d lines" % len(hits)
        start = hits[0] + 1
        idx = [i for i in range(start, len(lines)) if m["find"] in lines[i]][:1]
    else:
        idx = [i for i, l in enumerate(lines) if m["find"] in l]
        if len(idx) != 1:
            return None, "'find' text found on %d lines" % len(idx)
    if not idx:
        return None, "'find' text not found after 'after'"
    i = idx[0]
    lines[i] = lines[i].replace(m["find"], m["replace"], 1)
    return "\n".join(lines), "line %d" % (i + 1)


def run(cmd, cwd, log, env=None, timeout=None):
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                  env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write("timed out after %s s\n" % timeout)
            return 124


def main():
    muts = parse(LIST)
    only = os.environ.get("MUTATE", "").split()
    if only:
        muts = [m for m in muts if any(o in m["name"] for o in only)]
    scratch = tempfile.mkdtemp(prefix="crun-mutate-")
    log = os.path.join(scratch, "mutate.log")
    src = os.path.join(scratch, "tree")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=TOP, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in files:
        if f and os.path.exists(os.path.join(TOP, f)):
            os.makedirs(os.path.dirname(os.path.join(src, f)) or src, exist_ok=True)
            shutil.copy2(os.path.join(TOP, f), os.path.join(src, f))
    print("mutate: %d mutations, scratch tree %s (log %s)" % (len(muts), src, log), flush=True)
    if run(["make", "-j2", "BUILD=build", "check-build"], src, log) != 0:
        sys.exit("mutate: the unmutated scratch tree does not build (see %s)" % log)
    env = dict(os.environ, BUILD="build", TEST_TIMEOUT=os.environ.get("MUTATE_TIMEOUT", "300"))
    env.pop("CRUN", None)
    env.pop("TESTS", None)
    killed, survived, stale = [], [], []
    for m in muts:
        path = os.path.join(src, m["file"])
        orig = open(path).read()
        text, where = apply(orig, m)
        if text is None:
            stale.append(m["name"])
            print("STALE     %-28s %s: %s" % (m["name"], m["file"], where), flush=True)
            continue
        t0 = time.time()
        open(path, "w").write(text)
        try:
            if run(["make", "-j2", "BUILD=build", "check-build"], src, log) != 0:
                verdict = "killed (does not build)"
            else:
                env["TESTS"] = m["tests"]
                rc = run(["sh", "tests/run.sh"], src, log, env=env)
                verdict = "killed" if rc != 0 else "SURVIVED"
        finally:
            open(path, "w").write(orig)  # new mtime: the next build restores it
        (survived if verdict == "SURVIVED" else killed).append(m["name"])
        print("%-9s %-28s %s:%s  [%s] %.0f s" % (verdict.replace("killed (does not build)", "unbuilt").split()[0], m["name"], m["file"],
              where.split()[-1], m["tests"], time.time() - t0), flush=True)
    print("mutate: %d killed, %d survived, %d stale" % (len(killed), len(survived), len(stale)))
    for n in survived:
        print("survivor: %s" % n)
    if not os.environ.get("MUTATE_KEEP") and not survived and not stale:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(1 if survived or stale or not muts else 0)


main()

#!/usr/bin/env python3
"""The structural rules of the tree that a grep can check (tests/lint.sh).

    python3 tests/lint.py [--root DIR] [--allow FILE]

Each offence is printed as `check path[:line] what`, one per line, and the
run exits 1 when any offence is not in the allowlist, or when an allowlist
entry matches nothing (fixed offences leave the list, so it only shrinks).
The checks:

  agent-header   `#include` of agent/agent.h, however spelled ("agent.h",
                 "../agent/agent.h", <agent/agent.h>), in a file that is not
                 one of AGENT_CORE below. Key: the including file.
  agent-struct   `struct agent` (the agent's own state) named in a file of
                 src/, include/, agent/ or launcher/ other than AGENT_CORE:
                 the agent's parts have structs of their own and report by
                 callbacks. Key: the file.
  stderr         a write to stderr by stdio (`fprintf(stderr`,
                 `vfprintf(stderr`, `fputs(..., stderr)`, `fputc`, `perror`)
                 in src/, agent/ or launcher/: every "crun: ..." line goes
                 through include/crun/log.h, the one sink. Key: the file.
  long-file      a file of src/, agent/ or launcher/ over MAX_FILE_LINES
                 lines whose first 30 lines hold no line starting with
                 LONG_FILE_MARKER (followed by the reason). Key: the file.
  long-function  a function definition over MAX_FUNCTION_LINES lines in
                 src/, agent/, launcher/: from the first line of its
                 signature (at column 0) to its closing `}` (a line that is
                 exactly `}`), both included. The body opens with a line
                 that is exactly `{` (clang-format's Linux braces). A `{`
                 line whose name cannot be read, or a body never closed, is
                 an offence too (`parse`): nothing is skipped silently.
                 Key: file:function.
  include-circle A.c depends on B.c when A.c includes a header that
                 declares a function B.c defines (not static) and A.c names
                 that function (a `module__name` helper too: a module's
                 files call each other only downwards). Every dependency
                 that lies on a cycle is an offence (so cfg.c -> cfg_ini.c -> cfg.c through
                 include/crun/cfg.h is one, as is agent.c <-> worker.c
                 through agent/agent.h). Over src/, agent/, launcher/.
                 Key: A.c:B.c.
  history        text that speaks of how the tree was developed rather than
                 of what it does: "<earlier|previous|prior|last|this|next|
                 later> session", a tracker item ("issue <N>"), or notes kept
                 outside the repository ("spec/<name>.md", "shared/spec"), in
                 any tracked file (this lint's own files excepted, since
                 they spell the patterns). Key: the file.
  artifact       a libFuzzer artifact (crash-*, leak-*, timeout-*, oom-*,
                 slow-unit-*) at the root or tracked anywhere. Key: the file.

Allowlist (tests/lint.allow): one `check key` per line, then `#` and the
reason; blank lines and lines starting with `#` are ignored.
"""
import fnmatch
import os
import re
import subprocess
import sys

# The agent's owner: the only file that may name struct agent (or include
# an agent/agent.h).
AGENT_CORE = ["agent/agent.c"]
AGENT_STRUCT_RE = re.compile(r"\bstruct\s+agent\b(?!_)")
MAX_FILE_LINES = 1200
MAX_FUNCTION_LINES = 150
LONG_FILE_MARKER = " * Why this file is long:"
CODE_DIRS = ["src", "agent", "launcher"]
ARTIFACT_RE = re.compile(r"^(crash|leak|timeout|oom|slow-unit)-")
HISTORY_RE = re.compile(r"\b(earlier|previous|prior|last|this|next|later) session\b|"
                        r"\bissue [0-9]+|shared/spec|\bspec/[a-z0-9_-]+\.md", re.I)
HISTORY_SELF = ["tests/lint.py", "tests/lint.sh", "tests/lint_selftest.sh"]

AGENT_H_RE = re.compile(r'^\s*#\s*include\s*["<]([^">]*/)?agent\.h[">]')
STDERR_RE = re.compile(r"\bv?fprintf\s*\(\s*stderr\b|\bfput[sc]\s*\(.*,\s*stderr\s*\)"
                       r"|\bperror\s*\(")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
IDENT_CALL_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def fnmatch_any(path, globs):
    return any(fnmatch.fnmatchcase(path, g) for g in globs)


def read_lines(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


def list_files(root, dirs, exts):
    out = []
    for d in dirs:
        top = os.path.join(root, d)
        for base, subdirs, files in os.walk(top):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
            for name in sorted(files):
                if name.endswith(exts):
                    out.append(os.path.relpath(os.path.join(base, name), root))
    return out


def strip_code(text):
    """Comments and string/char literals blanked, newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(lines):
    """(name, first line, last line, static?) of each definition, and parse
    problems as (line, message). Lines are 1-based."""
    defs, problems = [], []
    start = None  # first line of the latest column-0 declaration text
    i = 0
    while i < len(lines):
        line = lines[i]
        if line == "{":
            if start is None:
                problems.append((i + 1, "a `{` line with no signature above it"))
                i += 1
                continue
            header = " ".join(lines[start:i])
            m = None
            for m in IDENT_CALL_RE.finditer(header):
                break
            end = None
            for j in range(i + 1, len(lines)):
                if lines[j] == "}":
                    end = j
                    break
                if lines[j] == "{":
                    break
            if m is None or end is None:
                problems.append((start + 1, "cannot find the name or the closing `}` of the "
                                 "definition starting here"))
                start = None
                i += 1
                continue
            static = re.match(r"\s*(static|inline\s+static)\b", header) is not None
            defs.append((m.group(1), start + 1, end + 1, static))
            start = None
            i = end + 1
            continue
        if (line[:1].isalpha() or line[:1] == "_") and start is None:
            start = i
        if line.strip() == "" or line.startswith(("#", "}", "/*", " *", "//")) \
                or line.rstrip().endswith((";", "*/")):
            start = None
        i += 1
    return defs, problems


class Lint:
    def __init__(self, root):
        self.root = root
        self.offences = []  # (check, key, where, what)

    def add(self, check, key, where, what):
        self.offences.append((check, key, where, what))

    def check_agent_header(self):
        for rel in list_files(self.root, ["src", "include", "launcher", "agent", "tests"],
                              (".c", ".h")):
            if fnmatch_any(rel, AGENT_CORE):
                continue
            for n, line in enumerate(read_lines(self.root, rel), 1):
                if AGENT_H_RE.match(line):
                    self.add("agent-header", rel, "%s:%d" % (rel, n),
                             "includes the agent's private header: " + line.strip())

    def check_agent_struct(self):
        for rel in list_files(self.root, ["src", "include", "launcher", "agent"],
                              (".c", ".h")):
            if fnmatch_any(rel, AGENT_CORE):
                continue
            text = strip_code("\n".join(read_lines(self.root, rel))).split("\n")
            for n, line in enumerate(text, 1):
                if AGENT_STRUCT_RE.search(line):
                    self.add("agent-struct", rel, "%s:%d" % (rel, n),
                             "names the agent's own struct: a part gets a "
                             "struct of its own and callbacks")
                    break

    def check_stderr(self):
        for rel in list_files(self.root, ["src", "agent", "launcher"], (".c", ".h")):
            for n, line in enumerate(read_lines(self.root, rel), 1):
                if STDERR_RE.search(line):
                    self.add("stderr", rel, "%s:%d" % (rel, n),
                             "a write to stderr beside log.h: " + line.strip())

    def check_long_files(self):
        for rel in list_files(self.root, CODE_DIRS, (".c", ".h")):
            lines = read_lines(self.root, rel)
            count = len(lines) - (1 if lines and lines[-1] == "" else 0)
            if count <= MAX_FILE_LINES:
                continue
            if any(l.startswith(LONG_FILE_MARKER) for l in lines[:30]):
                continue
            self.add("long-file", rel, "%s:1" % rel,
                     "%d lines (over %d) and no '%s' line in its first 30"
                     % (count, MAX_FILE_LINES, LONG_FILE_MARKER.strip()))

    def check_long_functions(self):
        for rel in list_files(self.root, CODE_DIRS, (".c", ".h")):
            defs, problems = functions(read_lines(self.root, rel))
            for line, what in problems:
                self.add("parse", "%s:%d" % (rel, line), "%s:%d" % (rel, line), what)
            for name, first, last, _ in defs:
                length = last - first + 1
                if length > MAX_FUNCTION_LINES:
                    self.add("long-function", "%s:%s" % (rel, name), "%s:%d" % (rel, first),
                             "%s is %d lines (over %d)" % (name, length, MAX_FUNCTION_LINES))

    def resolve(self, rel, inc):
        """The file an #include "inc" in rel names, or None."""
        for base in (os.path.dirname(rel), "include", "src"):
            p = os.path.normpath(os.path.join(base, inc))
            if os.path.isfile(os.path.join(self.root, p)):
                return p
        return None

    def check_include_circles(self):
        sources = [f for f in list_files(self.root, CODE_DIRS, (".c",))]
        text = {f: strip_code("\n".join(read_lines(self.root, f))) for f in sources}
        definer = {}  # function -> the .c defining it (not static)
        for f in sources:
            for name, _, _, static in functions(text[f].split("\n"))[0]:
                if not static:
                    definer.setdefault(name, f)
        declared = {}  # header -> names followed by "(" in it

        def names_in(header):
            if header not in declared:
                t = strip_code("\n".join(read_lines(self.root, header)))
                declared[header] = set(m.group(1) for m in IDENT_CALL_RE.finditer(t))
            return declared[header]

        edges = {}  # (a, b) -> (function, header)
        for a in sources:
            raw = read_lines(self.root, a)
            words = set(WORD_RE.findall(text[a]))
            for n, line in enumerate(raw, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                h = self.resolve(a, m.group(1))
                if h is None:
                    continue
                for fn in sorted(names_in(h) & words):
                    b = definer.get(fn)
                    if b is not None and b != a and (a, b) not in edges:
                        edges[(a, b)] = (fn, h, n)
        # Reachability over the small graph (tens of files).
        succ = {}
        for a, b in edges:
            succ.setdefault(a, set()).add(b)

        def reaches(x, target):
            seen, todo = set(), [x]
            while todo:
                y = todo.pop()
                if y == target:
                    return True
                if y in seen:
                    continue
                seen.add(y)
                todo.extend(succ.get(y, ()))
            return False

        for (a, b), (fn, h, n) in sorted(edges.items()):
            if reaches(b, a):
                self.add("include-circle", "%s:%s" % (a, b), "%s:%d" % (a, n),
                         "depends on %s (calls %s, declared in %s), which depends back on it"
                         % (b, fn, h))

    def tracked(self):
        """The repository's files (git's list; every file outside build
        directories when the root is not a git work tree)."""
        try:
            out = subprocess.run(["git", "-C", self.root, "ls-files"], capture_output=True,
                                 text=True, check=True).stdout.split("\n")
            if os.path.isdir(os.path.join(self.root, ".git")) or \
                    os.path.isfile(os.path.join(self.root, ".git")):
                return [p for p in out if p and os.path.isfile(os.path.join(self.root, p))]
        except (OSError, subprocess.CalledProcessError):
            pass
        files = []
        for base, subdirs, names in os.walk(self.root):
            subdirs[:] = sorted(d for d in subdirs
                                if not d.startswith((".", "build")))
            for name in sorted(names):
                files.append(os.path.relpath(os.path.join(base, name), self.root))
        return files

    def check_history(self):
        for rel in self.tracked():
            if rel in HISTORY_SELF:
                continue
            with open(os.path.join(self.root, rel), "rb") as f:
                data = f.read()
            if b"\0" in data[:8192]:
                continue
            for n, line in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
                m = HISTORY_RE.search(line)
                if m:
                    self.add("history", rel, "%s:%d" % (rel, n),
                             "'%s': say what the code does, not how it came to be"
                             % m.group(0))

    def check_artifacts(self):
        names = [n for n in os.listdir(self.root) if ARTIFACT_RE.match(n)]
        try:
            out = subprocess.run(["git", "-C", self.root, "ls-files"], capture_output=True,
                                 text=True, check=True).stdout.split("\n")
            names += [p for p in out if ARTIFACT_RE.match(os.path.basename(p))]
        except (OSError, subprocess.CalledProcessError):
            pass
        for p in sorted(set(names)):
            self.add("artifact", p, p, "a libFuzzer artifact (tests/fuzz/run.sh writes them "
                     "into build-fuzz/artifacts/)")

    def run(self):
        self.check_agent_header()
        self.check_agent_struct()
        self.check_stderr()
        self.check_long_files()
        self.check_long_functions()
        self.check_include_circles()
        self.check_history()
        self.check_artifacts()
        return self.offences


def read_allow(path):
    allow = {}
    if not os.path.exists(path):
        return allow, []
    bad = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            body = line.split("#", 1)[0].strip()
            if not body:
                continue
            parts = body.split()
            if len(parts) != 2 or "#" not in line:
                bad.append("%s:%d: want `check key  # reason`: %s" % (path, n, line.rstrip()))
                continue
            allow[(parts[0], parts[1])] = n
    return allow, bad


def main(argv):
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    allow_path = None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--root":
            root = args.pop(0)
        elif a == "--allow":
            allow_path = args.pop(0)
        else:
            print("usage: lint.py [--root DIR] [--allow FILE]", file=sys.stderr)
            return 2
    if allow_path is None:
        allow_path = os.path.join(root, "tests", "lint.allow")
    allow, bad = read_allow(allow_path)
    offences = Lint(root).run()
    failed = 0
    used = set()
    for check, key, where, what in offences:
        if (check, key) in allow:
            used.add((check, key))
            continue
        print("lint: %s %s: %s" % (check, where, what))
        failed += 1
    for line in bad:
        print("lint: allowlist " + line)
        failed += 1
    for (check, key), n in sorted(allow.items(), key=lambda kv: kv[1]):
        if (check, key) not in used:
            print("lint: allowlist %s:%d: `%s %s` no longer offends: remove it"
                  % (allow_path, n, check, key))
            failed += 1
    print("lint: %d offences, %d allowed by %s, %d failures"
          % (len(offences), len(used), allow_path, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""PyTorch's own launcher tests (test/distributed/launcher/test_run.py) with
torch.distributed.run.main driven from the command line.

    python pytorch_launcher_tests.py TESTFILE OUT.json LAUNCHER [ARG...]

TESTFILE is test_run.py (run_test.py in PyTorch 1.13) beside its bin/
scripts, as PyTorch's source tree has them. Every call of launch.main(args) in the tests runs `LAUNCHER ARG...
args` as a process instead, in the environment the test has set, its output
copied to the test's stdout and stderr, and a failure raised as the
exception the in-process torchrun raises for it, so that a test's assertions
judge the command line's outcome:

- torchrun (LAUNCHER is `python -m torch.distributed.run` or a wrapper): the
  exception class named on the last line of its traceback (ValueError for a
  refused command line, ChildFailedError for failed workers).
- crun (the launcher's name ends in "crun"): exit 2, a usage error, raises
  ValueError; any other failure ChildFailedError.

Tests whose assertions look at torchrun's internals through mocks (an agent
or events.record replaced) cannot pass through a process boundary under any
launcher; the caller compares launchers, not absolute results. OUT.json gets
{test name: "pass" | "fail: <first line of the reason>"}.
"""
import builtins
import importlib
import json
import os
import re
import subprocess
import sys
import unittest

TESTFILE, OUT, LAUNCHER = sys.argv[1], sys.argv[2], sys.argv[3:]
IS_CRUN = os.path.basename(LAUNCHER[0]).endswith("crun")
TIMEOUT = float(os.environ.get("LAUNCH_TIMEOUT", "180"))

sys.path.insert(0, os.path.dirname(os.path.abspath(TESTFILE)))
test_run = importlib.import_module(
    os.path.splitext(os.path.basename(TESTFILE))[0])
from torch.distributed.elastic.multiprocessing.errors import (  # noqa: E402
    ChildFailedError,
)


def child_failed(msg):
    # ChildFailedError formats its failures when made; here there are none
    # to format, only the launcher's own account.
    e = ChildFailedError.__new__(ChildFailedError)
    Exception.__init__(e, msg)
    return e


def raised(rc, err):
    """The exception the in-process launcher would have raised."""
    last = err.strip().splitlines()[-1] if err.strip() else ""
    if IS_CRUN:
        if rc == 2:
            return ValueError(last)
        return child_failed(last)
    m = None
    for line in reversed(err.splitlines()):
        m = re.match(r"^([\w.]+(?:Error|Exception)): ?(.*)$", line)
        if m:
            break
    if not m:
        return RuntimeError("status %d: %s" % (rc, last))
    name = m.group(1).rsplit(".", 1)[-1]
    if name == "ChildFailedError":
        return child_failed(m.group(2))
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return cls(m.group(2))
    return RuntimeError("%s: %s" % (name, m.group(2)))


def main(args):
    p = subprocess.run(LAUNCHER + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
                       env=dict(os.environ))
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        raise raised(p.returncode, p.stderr)


test_run.launch.main = main


class Record(unittest.TextTestResult):
    verdicts = {}

    def addSuccess(self, test):
        super().addSuccess(test)
        self.verdicts[test._testMethodName] = "pass"

    def _fail(self, test, err):
        reason = "".join(str(err[1]).strip().splitlines()[:1])
        name = getattr(test, "_testMethodName", str(test))
        self.verdicts[name] = "fail: %s: %s" % (
            err[0].__name__, reason[:200])

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.verdicts[test._testMethodName] = "fail: skipped: %s" % reason


suite = unittest.defaultTestLoader.loadTestsFromModule(test_run)
unittest.TextTestRunner(resultclass=Record, verbosity=2,
                        stream=sys.stderr).run(suite)
with open(OUT, "w") as f:
    json.dump(Record.verdicts, f, indent=1, sort_keys=True)

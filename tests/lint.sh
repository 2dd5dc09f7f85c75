#!/bin/sh
# The structural rules a grep can check (run by tests/run.sh as the suite
# `lint`): struct agent named only in agent/agent.c, no write to stderr
# beside log.h in src/, agent/ or launcher/, no file over 1,200 lines without a
# " * Why this file is long:" line in its first 30 lines, no function over
# 150 lines, no include circle (module__ helpers followed too, but for the
# modules still split over several files), no text about how the tree was developed
# ("an earlier session", "issue 12"), no libFuzzer artifact in the tree. The
# checks and their exact definitions are in tests/lint.py; the offences
# tolerated for now are in tests/lint.allow (an entry that no longer
# offends fails the run). First tests/lint_selftest.sh plants one offender
# of each kind in a scratch tree and checks that the lint fails on it, so
# the lint cannot pass by checking nothing.
#   sh tests/lint.sh              self-test, then the tree
#   LINT_SELFTEST=0 sh tests/lint.sh   the tree only
set -u
cd "$(dirname "$0")/.." || exit 1
if [ "${LINT_SELFTEST:-1}" != 0 ]; then
	sh tests/lint_selftest.sh || { echo "FAIL: lint self-test" >&2; exit 1; }
fi
python3 tests/lint.py "$@"

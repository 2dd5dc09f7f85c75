# Shared helpers for integration scripts: sourced, never run. Each script gets
# its own temporary directory (named with $$) that is removed on exit, and
# fails with a message naming the check that did not hold.
set -u
BUILD=${BUILD:-build}
CRUN=${CRUN:-$PWD/$BUILD/crun}
PYTHON=${PYTHON:-/usr/bin/python3}
FAKE_WORKER=$PWD/$BUILD/tests/fake_worker
TOP=$PWD
T=$(mktemp -d "/tmp/crun-test-$(basename "$0" .sh)-$$-XXXX")
_cleanups=""

# Run "$@" at exit (last registered first).
at_exit() { _cleanups="$*; $_cleanups"; }
_on_exit() { rc=$?; eval "$_cleanups" >/dev/null 2>&1; rm -rf "$T"; exit $rc; }
trap _on_exit EXIT
trap 'exit 130' INT TERM

fail() { echo "FAIL: $(basename "$0"): $*" >&2; exit 1; }
skip() { echo "SKIP: $(basename "$0"): $*" >&2; exit 77; }
note() { echo "   $*"; }

# expect_eq WHAT GOT WANT
expect_eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
# expect_grep WHAT PATTERN FILE
expect_grep() { grep -q -e "$2" "$3" || { echo "--- $3:" >&2; tail -n 30 "$3" >&2; fail "$1: '$2' not found in $3"; }; }
expect_nogrep() { ! grep -q -e "$2" "$3" || { echo "--- $3:" >&2; tail -n 30 "$3" >&2; fail "$1: '$2' unexpectedly found in $3"; }; }

# vmem_limit KB: a `ulimit -v` bound for crun, or "unlimited" under
# AddressSanitizer, which reserves terabytes of address space (the plain
# build's run keeps the bound).
vmem_limit() { if ldd "$CRUN" 2>/dev/null | grep -q libasan; then echo unlimited; else echo "$1"; fi; }
need_root() { [ "$(id -u)" -eq 0 ] || skip "needs root ($1)"; }
need_torch() { "$PYTHON" -c 'import torch.distributed' 2>/dev/null || skip "no PyTorch in $PYTHON"; }
# need_torch2: PYTHON becomes the first interpreter of TORCH_PYTHONS (tests/run.sh;
# default the test venv's) whose torch is 2.x.
need_torch2() {
	for _p in ${TORCH_PYTHONS:-$TOP/.venv/bin/python}; do
		"$_p" -c 'import sys, torch.distributed, torch; sys.exit(torch.__version__ < "2")' 2>/dev/null &&
			{ PYTHON=$_p; export PYTHON; return 0; }
	done
	skip "no PyTorch 2.x among TORCH_PYTHONS (${TORCH_PYTHONS:-$TOP/.venv/bin/python})"
}

# A TCP port on 127.0.0.1 that is free right now (the kernel picks it).
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for SECONDS CMD...: poll a condition in a test script (not in crun).
wait_for() {
	_n=$(( $1 * 10 )); shift
	while [ $_n -gt 0 ]; do "$@" && return 0; sleep 0.1; _n=$((_n-1)); done
	return 1
}

# exited PID: the process is gone or a zombie (kill -0 succeeds on a zombie).
exited() {
	_st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -z "$_st" ] || [ "$_st" = Z ]
}
# wait_pid SECONDS PID [LOG...]: wait for a child of this shell, at most
# SECONDS; the status is the child's. A child still running then is killed
# (KILL) and the script fails naming it (showing the LOG files' ends): no wait
# in a test is unbounded.
wait_pid() {
	wait_for "$1" exited "$2" || {
		kill -KILL "$2" 2>/dev/null
		for _l in "$@"; do [ -f "$_l" ] && { echo "--- $_l:" >&2; tail -n 20 "$_l" >&2; }; done
		fail "pid $2 still running after $1 s"
	}
	wait "$2"
}

now_ms() { date +%s%3N; }
# ms_until BOUND_MS CMD...: poll CMD every 20 ms; print the elapsed ms and
# succeed when it holds within BOUND_MS (it gives up 5 s after the bound).
ms_until() {
	_b=$1 _t0=$(now_ms); shift
	while ! "$@"; do
		[ $(( $(now_ms) - _t0 )) -le $(( _b + 5000 )) ] || { echo "never"; return 1; }
		sleep 0.02
	done
	_e=$(( $(now_ms) - _t0 )); echo "$_e"
	[ "$_e" -le "$_b" ]
}

# Is something listening on TCP port $1 (in this network namespace)?
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

#!/bin/sh
# Run every test: the Criterion unit binaries, then each integration script.
# A script exits 0 (pass), 77 (skipped: it printed why) or anything else (fail).
# TESTS="pattern..." runs only those matching one of the (space-separated)
# patterns; TESTS_EXCLUDE="pattern..." leaves out those matching one.
#
# Strict by default: a skip (exit 77) counts as a failure unless the suite is
# allowed to skip: TEST_ALLOW_SKIP=1 allows every suite to (a developer run
# without root), TEST_ALLOW_SKIP="slurm_multi slurm_single" only those. CI
# (CI set) ignores TEST_ALLOW_SKIP: as root every suite must run.
# Each suite runs under `timeout` in a process group of its own, killed whole
# (TERM, then KILL 10 s later) after TEST_TIMEOUT seconds (default 900).
BUILD=${BUILD:-build}
export BUILD
export CRUN="${CRUN:-$PWD/$BUILD/crun}"
export PYTHON="${PYTHON:-/usr/bin/python3}"
# Under `make asan`: Criterion's own runner leak, see tests/lsan.supp (the
# unit binaries unwind malloc stacks in full, so the runner's is matched).
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
export TORCH_PYTHONS="${TORCH_PYTHONS:-/usr/bin/python3 $PWD/.venv/bin/python}"
# Suites marked "# needs: torchrun" compare crun with a torchrun: they run
# once per reference interpreter (TORCH_PYTHONS and the reference torchrun
# 2.14 of .venv-214/).
export TORCHRUN_REFS="${TORCHRUN_REFS:-$TORCH_PYTHONS $PWD/.venv-214/bin/python}"
ALLOW=${TEST_ALLOW_SKIP:-}
if [ -n "${CI:-}" ] && [ -n "$ALLOW" ]; then
	echo "== CI: ignoring TEST_ALLOW_SKIP='$ALLOW' (every suite must run)"
	ALLOW=""
fi
pass=0 fail=0 skip=0 failed=""
match() {
	for _m in ${TESTS_EXCLUDE:-}; do case "$1" in *$_m*) return 1 ;; esac; done
	[ -z "${TESTS:-}" ] && return 0
	for _m in $TESTS; do case "$1" in *$_m*) return 0 ;; esac; done
	return 1
}
may_skip() {
	case "$ALLOW" in "") return 1 ;; 1|all) return 0 ;; esac
	for _a in $ALLOW; do [ "$_a" = "$1" ] && return 0; done
	return 1
}
# run NAME CMD...: run one suite, bounded, and count its result (listed as
# NAME, or as $_label when set).
run() {
	_name=$1; shift
	_lab=${_label:-$_name}
	_start=$(date +%s)
	timeout -k 10 "$TEST_TIMEOUT" "$@"; _rc=$?
	_el=$(( $(date +%s) - _start ))
	case $_rc in
	0) pass=$((pass+1)); echo "   ok ($_el s)" ;;
	77) if may_skip "$_name"; then
		skip=$((skip+1)); echo "   skipped (allowed by TEST_ALLOW_SKIP)"
	    else
		fail=$((fail+1)); failed="$failed $_lab"
		echo "   FAILED: skipped, and skips are not allowed (TEST_ALLOW_SKIP=$_name to allow)"
	    fi ;;
	124) fail=$((fail+1)); failed="$failed $_lab"
		echo "   FAILED: TIMED OUT after $TEST_TIMEOUT s (TEST_TIMEOUT), process group killed" ;;
	*) fail=$((fail+1)); failed="$failed $_lab"
		if [ "$_rc" = 137 ] && [ "$_el" -ge "$TEST_TIMEOUT" ]; then
			echo "   FAILED: TIMED OUT after $TEST_TIMEOUT s, killed with SIGKILL"
		else
			echo "   FAILED (status $_rc, $_el s)"
		fi ;;
	esac
}

# The structural rules of the tree (tests/lint.sh: its self-test, then the tree).
if match tests/lint.sh; then
	echo "== lint"
	run lint sh tests/lint.sh
fi

for t in "$BUILD"/tests/test_*; do
	case "$t" in *.d) continue ;; esac
	[ -x "$t" ] || continue
	match "$t" || continue
	echo "== unit $(basename "$t")"
	ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
		run "$(basename "$t")" "$t" --jobs=2 --timeout=60 --short-filename
done

# torch_version PY: the version PY's torch reports ("" when it does not import).
torch_version() {
	[ -x "$1" ] && "$1" -c 'import torch.distributed, torch; print(torch.__version__.split("+")[0])' 2>/dev/null
}
# no_torch PY: why PY cannot run a torch suite (the run says it and exits 77).
no_torch() {
	if [ -x "$1" ]; then echo "no importable torch in '$1' (TORCH_PYTHONS)"
	else echo "interpreter '$1' not found (TORCH_PYTHONS; make test-venv makes .venv)"; fi
}

for t in tests/integration/*.sh; do
	[ -f "$t" ] || continue
	_s=$(basename "$t" .sh)
	case "$_s" in lib*) continue ;; esac
	match "$t" || continue
	if grep -q '^# needs: torch$' "$t"; then
		_pys=$TORCH_PYTHONS
	elif grep -q '^# needs: torchrun$' "$t"; then
		_pys=$TORCHRUN_REFS
	else
		echo "== integration $_s"
		run "$_s" sh "$t"
		continue
	fi
	for _py in $_pys; do
		_v=$(torch_version "$_py")
		echo "== integration $_s [torch ${_v:-none} $_py]"
		_label="$_s[${_v:-$_py}]"
		if [ -n "$_v" ]; then
			run "$_s" env PYTHON="$_py" sh "$t"
		else
			run "$_s" sh -c 'echo "SKIP: $0"; exit 77' "$(no_torch "$_py")"
		fi
		_label=""
	done
done

[ -z "$failed" ] || echo "== failed:$failed"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ $((pass + skip)) -gt 0 ]

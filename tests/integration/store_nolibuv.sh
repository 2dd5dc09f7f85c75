#!/bin/sh
# A torch built without libuv (Debian 13's python3-torch, every Windows wheel
# since 2.4) refuses TCPStore(use_libuv=True), its default, for clients too,
# and torch's _create_c10d_store builds the agent store's client without
# passing use_libuv: every worker died in init_process_group with "use_libuv
# was requested but PyTorch was build without libuv support". crun asks the
# interpreter once (cached by path, PYTHONPATH and mtimes) and gives such
# workers USE_LIBUV=0 and TORCHELASTIC_USE_AGENT_STORE=False.
#
# The torch here (the venv's 2.x) has libuv; py/nolibuv/sitecustomize.py on
# PYTHONPATH makes it refuse libuv exactly as such a build does (the same
# check, the same message): 1 shows that it reproduces the failure (crun told
# not to ask), then real gloo DDP jobs: alone, a restart, two agents with the
# torch without libuv on both, on the store host only and on the other node
# only, the cache, a hanging interpreter and a signal while asking.
# tests/integration/trixie_torch.sh runs the real thing in a Debian 13 root.
. tests/integration/lib.sh
need_torch2
NL=$TOP/tests/integration/py/nolibuv
JOB=$TOP/tests/integration/py/ddp_gloo.py
# A cache of this suite's own: every run starts by asking.
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"
CACHE="$TMPDIR/crun-$(id -u)"
unset USE_LIBUV PYTHONPATH

# job OUT ARGS...: a standalone 2-rank DDP job (crun's ARGS; the worker's in
# WARGS), its output in $T/OUT.
job() {
	_o=$1; shift
	rm -rf "$T/$_o.d"; mkdir -p "$T/$_o.d"
	# shellcheck disable=SC2086
	"$CRUN" --standalone --nproc_per_node=2 "$@" "$JOB" --out "$T/$_o.d" --steps 1 ${WARGS:-} >"$T/$_o" 2>&1
}
# ranks DIR WORLD ATTEMPT STORE: every rank's line in DIR says so.
ranks() {
	_r=0
	while [ $_r -lt "$2" ]; do
		expect_grep "$1: rank $_r" "^rank $_r/$2 attempt $3 sum .* store $4 new_group ok objects ok" "$T/$1.d/rank.$_r"
		_r=$((_r + 1))
	done
}

# 1. The failure this suite is about: without asking, the agent store.
PYTHONPATH=$NL job never --store_probe_timeout=0 && fail "1: the job succeeded without asking: the shim does not refuse libuv"
expect_grep "1: torch's own error" "use_libuv was requested but PyTorch was build without libuv support" "$T/never"
note "1: reproduced: with --store_probe_timeout=0 every worker dies with the libuv error"

# 2. Alone: asked once, one line, worker rank 0 hosts the store.
PYTHONPATH=$NL job alone --verbose || { cat "$T/alone" >&2; fail "2: job exited $?"; }
expect_grep "2: asked" "asking .* which workers' store its torch accepts" "$T/alone"
expect_eq "2: one line says so" "$(grep -c "is built without libuv" "$T/alone")" 1
expect_nogrep "2: no libuv error" "use_libuv was requested" "$T/alone"
ranks alone 2 0 False
expect_grep "2: rank 0 hosts the store" "store_server here$" "$T/alone.d/rank.0"
expect_grep "2: rank 1 its client" "store_server none$" "$T/alone.d/rank.1"
expect_grep "2: USE_LIBUV" "^USE_LIBUV=0$" "$T/alone.d/rank.1"
expect_grep "2: cached" "^store no-libuv$" "$CACHE"/torchstore-*
note "2: alone: asked once, said once, worker rank 0 hosts the store, USE_LIBUV=0"

# 3. The next run takes the cache: not asked, the same outcome, even
# against a USE_LIBUV=1 from the user's shell (such a torch accepts only 0).
USE_LIBUV=1 PYTHONPATH=$NL job cached --verbose || { cat "$T/cached" >&2; fail "3: job exited $?"; }
expect_nogrep "3: not asked again" "asking .* which workers' store" "$T/cached"
expect_grep "3: still said" "is built without libuv" "$T/cached"
ranks cached 2 0 False
expect_grep "3: USE_LIBUV" "^USE_LIBUV=0$" "$T/cached.d/rank.0"
note "3: the next run takes the cached answer (not asked), USE_LIBUV=1 overridden"

# 4. An answer given for another torch (its version.py's mtime differs: an
# upgrade) is asked anew; another PYTHONPATH is another key: the same torch
# with libuv keeps the agent store.
for f in "$CACHE"/torchstore-*; do sed -i 's/^tstat [0-9]*/tstat 12345/; s/^store no-libuv$/store agent/' "$f"; done
PYTHONPATH=$NL job stale --verbose || { cat "$T/stale" >&2; fail "4: job exited $?"; }
expect_grep "4: a stale answer is not believed" "asking .* which workers' store" "$T/stale"
ranks stale 2 0 False
job libuv --verbose || { cat "$T/libuv" >&2; fail "4: job exited $?"; }
expect_grep "4: its own key" "asking .* which workers' store" "$T/libuv"
expect_nogrep "4: nothing said" "without libuv" "$T/libuv"
ranks libuv 2 0 True
expect_grep "4: rank 0 a client" "store_server none$" "$T/libuv.d/rank.0"
expect_grep "4: USE_LIBUV untouched" "^USE_LIBUV=unset$" "$T/libuv.d/rank.0"
note "4: an answer for another torch is not believed; with libuv the agent store stays"

# 5. A restart: each round's store is worker rank 0's, on a new port.
WARGS="--fail-on-attempt 0" PYTHONPATH=$NL job restart --max_restarts=1 || { cat "$T/restart" >&2; fail "5: job exited $?"; }
expect_grep "5: attempt 0 failed" "failing on purpose on attempt 0" "$T/restart"
ranks restart 2 1 False
note "5: a failed attempt restarts on a store of its own"

# 6. Two agents (the first to listen is the store host, group rank 0), the
# torch without libuv on both, on the store host only, on the other node
# only: every job succeeds; where the agent hosts the store, a node without
# libuv reaches it as a plain client.
two() {
	_nm=$1 _pa=$2 _pb=$3
	_p=$(free_port)
	rm -rf "$T/$_nm.d"; mkdir -p "$T/$_nm.d"
	PYTHONPATH=$_pa "$CRUN" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$_p" --rdzv_id="$_nm" "$JOB" --out "$T/$_nm.d" --steps 1 >"$T/$_nm.a" 2>&1 &
	_a=$!
	# The first agent hosts the store (group rank 0) once it listens.
	wait_for 30 sh -c "ss -Hltn 'sport = :$_p' | grep -q ." || fail "6 $_nm: the store host does not listen"
	PYTHONPATH=$_pb "$CRUN" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$_p" --rdzv_id="$_nm" "$JOB" --out "$T/$_nm.d" --steps 1 >"$T/$_nm.b" 2>&1 &
	_b=$!
	wait_pid 120 $_a "$T/$_nm.a" || { cat "$T/$_nm.a" >&2; fail "6 $_nm: the first agent exited $?"; }
	wait_pid 120 $_b "$T/$_nm.b" || { cat "$T/$_nm.b" >&2; fail "6 $_nm: the second agent exited $?"; }
	cat "$T/$_nm.a" "$T/$_nm.b" >"$T/$_nm"
	expect_nogrep "6 $_nm: no libuv error" "use_libuv was requested" "$T/$_nm"
}
two both "$NL" "$NL"
ranks both 4 0 False
expect_grep "6 both: worker rank 0's store" "store 127.0.0.1:[0-9]* (worker rank 0's)" "$T/both"
two host "$NL" ""
ranks host 4 0 False
two other "" "$NL"
for r in 0 1 2 3; do
	expect_grep "6 other: rank $r" "^rank $r/4 attempt 0 sum 10 want 10 .* store_server none$" "$T/other.d/rank.$r"
done
# Who was the store host decides which ranks may keep the agent store's way.
_lu=$(grep -l "^USE_LIBUV=0$" "$T"/other.d/rank.* | wc -l)
expect_eq "6 other: the node without libuv's ranks have USE_LIBUV=0" "$_lu" 2
expect_eq "6 other: the others keep the agent store" "$(grep -l "store True" "$T"/other.d/rank.* | wc -l)" 2
note "6: two agents: without libuv on both, the store host only, the other only: all succeed"

# 7. An interpreter that never answers: asked for --store_probe_timeout,
# then the agent store as before; a signal while asking ends crun at once
# and leaves no probe behind.
M=olibuv$$  # pgrep patterns "[n]$M" never match pgrep's own shell
FAKE="$T/fakepy"
cat >"$FAKE" <<EOF
#!/bin/sh
[ "\$1" = -c ] && exec "$PYTHON" -c 'import time; time.sleep(30)' n$M
exec "$PYTHON" "\$@"
EOF
chmod +x "$FAKE"
_t0=$(now_ms)
PYTHON="$FAKE" job hang --verbose --store_probe_timeout=1 || { cat "$T/hang" >&2; fail "7: job exited $?"; }
expect_grep "7: asked" "asking .* which workers' store" "$T/hang"
ranks hang 2 0 True
wait_for 5 sh -c "! pgrep -f '[n]$M' >/dev/null" || fail "7: the probe outlived its timeout"
PYTHON="$FAKE" "$CRUN" --standalone --nproc_per_node=2 "$JOB" >"$T/sig" 2>&1 &
_c=$!
wait_for 10 pgrep -f "[n]$M" >/dev/null || fail "7: no probe started"
kill -TERM $_c
wait_pid 10 $_c "$T/sig"; _rc=$?
expect_eq "7: exit status after SIGTERM while asking" $_rc 143
wait_for 5 sh -c "! pgrep -f '[n]$M' >/dev/null" || fail "7: the probe outlived crun"
note "7: a silent interpreter costs --store_probe_timeout once; SIGTERM while asking exits 143, no probe left"
exit 0

#!/bin/sh
# crun for Windows (make windows: scripts/windows.sh, mingw-w64), run here
# under Wine (Debian's wine64): no Windows machine can be had here.
#   a. crun.exe is built, and imports only Windows' own DLLs (libuv, inih,
#      jansson, libsodium and mingw's runtime are inside)
#   b. --version; a usage error is one line, exit 2; what needs Linux
#      (binding) is said in one line, and the job goes on
#   c. `crun.exe store`: real PyTorch 2.13's TCPStore client runs the store
#      transcript (py/store_ops.py) against it, line for line as against
#      the Linux `crun store`; PyTorch 1.13 (Debian's, the 1.13 framing) too
#   d. libcrun's C client built for Windows (store_cli.exe) under Wine: the
#      same transcript against crun.exe store and against the Linux one,
#      in torch 2.x's framing and in 1.13's
#   e. two gloo ranks of PyTorch 2.13 form a group through crun.exe store
#      in agent-store mode and all_reduce
#   f. two Linux crun agents meet in a rendezvous whose store is crun.exe,
#      behind a secret (the secret file given as a Windows path); a client
#      without the secret is turned away, the job's four ranks run
#   g. a connection sending garbage is closed with one line naming it, and
#      the store goes on serving
#   h. SIGINT (which Wine turns into a Ctrl-C console event) stops it
#      cleanly: exit status 0
#   j. the standalone agent: two workers (fake_worker.exe, built for
#      Windows) get the worker contract, and speak the TCPStore wire to the
#      agent's workers' store at MASTER_ADDR:MASTER_PORT (a barrier of every
#      rank); --tee prefixes their lines
#   k. a failing worker: the group restarts (--max_restarts=1) and succeeds;
#      without restarts crun exits with the failed rank's status and writes
#      the failure report
#   l. Ctrl-C (SIGINT to crun.exe): the console's, not forwarded; after
#      --shutdown_timeout the workers are ended, exit 130; crun.exe
#      killed (SIGKILL): its workers die with it; a worker's own child is
#      ended with it when its group restarts, while crun.exe runs on (the
#      worker's Job Object)
#   m. two crun.exe agents meet in a c10d rendezvous on loopback, and a
#      crun.exe agent with a Linux one: four ranks each time
#   n. the win_amd64 wheel: pip (told the platform is win_amd64) installs it
#      into a folder: crun.exe among the scripts, the same bytes, it runs,
#      and the installed files' record names it
#   i. `crun.exe status` reads a running 2-node Linux job behind a secret
#      (nodes, ranks, round, state) as the Linux `crun status` does; without
#      the secret it says the store wants one (exit 3), a wrong run id
#      exits 1
. tests/integration/lib.sh
PY213=$TOP/.venv/bin/python
[ -x "$PY213" ] || fail "no $PY213 (make test-venv)"
[ -x "$CRUN" ] || fail "no $CRUN (build first)"
WINE=$(command -v wine64 || command -v wine || true)
[ -n "$WINE" ] || [ ! -x /usr/lib/wine/wine64 ] || WINE=/usr/lib/wine/wine64
[ -n "$WINE" ] || fail "no wine64 (scripts/install-deps.sh installs it)"
# Wine's own folder, made once (its first start takes seconds), beside the
# build; nothing of Wine's outlives the test.
export WINEPREFIX="$TOP/build-win/wine" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
WINESERVER=$(command -v wineserver || echo /usr/lib/wine/wineserver)
at_exit "$WINESERVER -k"

note "a. built with mingw-w64, everything static"
sh scripts/windows.sh >"$T/build.out" 2>"$T/build.err" ||
	{ tail -n 20 "$T/build.err" >&2; fail "a. scripts/windows.sh failed"; }
EXE=$TOP/build-win/crun.exe CLI=$TOP/build-win/store_cli.exe
# winpath PATH: a Linux path as Wine's Windows programs see it (drive Z:).
winpath() { printf 'Z:%s' "$1" | tr / '\\'; }
WFW=$(winpath "$TOP/build-win/fake_worker.exe")
x86_64-w64-mingw32-objdump -p "$EXE" | sed -n 's/^.*DLL Name: //p' | tr 'a-z' 'A-Z' | sort >"$T/dlls"
[ -s "$T/dlls" ] || fail "a. crun.exe names no DLL at all: not a PE file?"
extra=$(grep -v -x -e KERNEL32.DLL -e MSVCRT.DLL -e WS2_32.DLL -e ADVAPI32.DLL -e USER32.DLL \
	-e IPHLPAPI.DLL -e USERENV.DLL -e PSAPI.DLL -e SHELL32.DLL -e OLE32.DLL -e DBGHELP.DLL "$T/dlls" || true)
expect_eq "a. DLLs beyond Windows' own" "$extra" ""
note "crun.exe: $(wc -c <"$EXE") bytes, imports $(tr '\n' ' ' <"$T/dlls")"

note "b. --version, usage errors, what needs Linux"
"$WINE" "$EXE" --version >"$T/v.out" 2>"$T/v.err" || fail "b. --version failed: $(cat "$T/v.err")"
expect_grep "b. version" "^crun [0-9.]*" "$T/v.out"
rc=0; "$WINE" "$EXE" --nproc_per_node=zero x.exe >"$T/b.out" 2>"$T/b.err" || rc=$?
expect_eq "b. exit status of a usage error" "$rc" 2
expect_eq "b. one line" "$(wc -l <"$T/b.err")" 1
expect_grep "b. names the option" "nproc_per_node" "$T/b.err"
rc=0; "$WINE" "$EXE" --standalone --nproc_per_node=2 --numa_binding=node --no_python "$WFW" \
	>"$T/b2.out" 2>"$T/b2.err" || rc=$?
expect_eq "b. binding: the job goes on" "$rc" 0
expect_eq "b. binding needs Linux, said once" "$(grep -c 'binding workers (node) needs Linux' "$T/b2.err")" 1

# tx FILE: its transcript; same REF FILE: FILE's is REF's (line ends aside,
# and a wait's timeout read to within the 2 s both allow: 0.5 s is 0.6 on a
# busy host).
tx() { tr -d '\r' <"$1" | sed 's/^wait never timeout [0-9.]*$/wait never timeout (< 2 s)/'; }
same() { tx "$1" >"$T/same.ref"; tx "$2" | diff -u "$T/same.ref" - >&2; }

# start_store NAME CMD...: a store on a port the kernel picks; sets PORT
# and SPID.
start_store() {
	_sn=$1; shift
	"$@" store --port 0 --host 127.0.0.1 >"$T/$_sn.out" 2>"$T/$_sn.err" &
	SPID=$!
	at_exit "kill -KILL $SPID"
	wait_for 30 grep -qs 'listening on' "$T/$_sn.err" ||
		fail "$_sn never listened: $(cat "$T/$_sn.err")"
	PORT=$(tr -d '\r' <"$T/$_sn.err" | sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' | head -n 1)
}

note "c. crun.exe store, real PyTorch clients"
for py in "$PY213" /usr/bin/python3; do
	"$py" -c 'import torch.distributed' 2>/dev/null || fail "c. no PyTorch in $py"
	v=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])')
	start_store "linux-$v" "$CRUN"
	"$py" tests/integration/py/store_ops.py "$PORT" >"$T/ref-$v.txt" 2>"$T/ref-$v.err" ||
		fail "c. torch $v vs Linux crun store: $(tail -n 3 "$T/ref-$v.err")"
	expect_grep "c. torch $v's reference transcript" "^done" "$T/ref-$v.txt"
	start_store "win-$v" "$WINE" "$EXE"
	"$py" tests/integration/py/store_ops.py "$PORT" >"$T/win-$v.txt" 2>"$T/win-$v.err" ||
		fail "c. torch $v vs crun.exe store: $(tail -n 3 "$T/win-$v.err")"
	same "$T/ref-$v.txt" "$T/win-$v.txt" || fail "c. torch $v: crun.exe store answers differently"
	note "torch $v vs crun.exe store: the same $(wc -l <"$T/win-$v.txt") lines as vs Linux crun store"
	eval "REF_${v%%.*}=\$T/ref-\$v.txt"
done

note "d. libcrun's client built for Windows"
for gen in g3 g0; do
	flag=; ref=$REF_2
	[ $gen = g0 ] && flag=--g0 ref=$REF_1
	start_store "cli-win-$gen" "$WINE" "$EXE"
	timeout 120 "$WINE" "$CLI" $flag 127.0.0.1 "$PORT" >"$T/cw.txt" 2>"$T/cw.err" ||
		fail "d. store_cli.exe ($gen) vs crun.exe store: $(tail -n 3 "$T/cw.err")"
	same "$ref" "$T/cw.txt" || fail "d. store_cli.exe ($gen) vs crun.exe store differs"
	start_store "cli-linux-$gen" "$CRUN"
	timeout 120 "$WINE" "$CLI" $flag 127.0.0.1 "$PORT" >"$T/cl.txt" 2>"$T/cl.err" ||
		fail "d. store_cli.exe ($gen) vs Linux crun store: $(tail -n 3 "$T/cl.err")"
	same "$ref" "$T/cl.txt" || fail "d. store_cli.exe ($gen) vs Linux crun store differs"
done
note "store_cli.exe (g3, g0) vs crun.exe store and Linux crun store: same results as torch"

note "e. gloo through crun.exe store"
start_store gloo "$WINE" "$EXE"
for r in 0 1; do
	RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
	TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=0 \
		timeout 120 "$PY213" tests/integration/py/gloo_allreduce.py >"$T/gloo$r.log" 2>&1 &
	eval "g$r=\$!"
done
wait "$g0" || { cat "$T/gloo0.log" >&2; fail "e. gloo rank 0 failed"; }
wait "$g1" || { cat "$T/gloo1.log" >&2; fail "e. gloo rank 1 failed"; }
for r in 0 1; do
	expect_grep "e. rank $r all_reduce" "all_reduce -> \[3.0, 3.0, 3.0, 3.0\]" "$T/gloo$r.log"
done

note "f. two Linux agents meet through crun.exe store, behind a secret"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/secret"
chmod 600 "$T/secret"
"$WINE" "$EXE" store --port 0 --host 127.0.0.1 --secret-file "$(winpath "$T/secret")" \
	>"$T/sec.out" 2>"$T/sec.err" &
SPID=$!
at_exit "kill -KILL $SPID"
wait_for 30 grep -qs 'listening on' "$T/sec.err" || fail "f. never listened: $(cat "$T/sec.err")"
PORT=$(tr -d '\r' <"$T/sec.err" | sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' | head -n 1)
if "$PY213" -c "
import datetime, sys, torch.distributed as d
s = d.TCPStore('127.0.0.1', $PORT, None, False, datetime.timedelta(seconds=5))
s.set('x', 'y')" >"$T/intruder.out" 2>&1; then
	fail "f. a client without the secret was served"
fi
expect_grep "f. the store names the refusal" "refusing connection from 127.0.0.1" "$T/sec.err"
cat >"$T/w.sh" <<'EOF'
echo "rank $RANK of $WORLD_SIZE group $GROUP_RANK"
EOF
for x in a b; do
	"$CRUN" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=winjob \
		--rdzv_conf=is_host=false,secret_file="$T/secret",join_timeout=60 \
		--no_python sh "$T/w.sh" >"$T/f.$x.out" 2>"$T/f.$x.err" &
	eval "p$x=\$!"
done
wait_pid 120 "$pa" "$T/f.a.err"; rc_a=$?
wait_pid 120 "$pb" "$T/f.b.err"; rc_b=$?
expect_eq "f. exit statuses" "$rc_a $rc_b" "0 0"
cat "$T/f.a.out" "$T/f.b.out" | grep -o 'rank [0-9] of 4' | sort >"$T/f.ranks"
expect_eq "f. the four ranks" "$(tr '\n' ' ' <"$T/f.ranks")" "rank 0 of 4 rank 1 of 4 rank 2 of 4 rank 3 of 4 "

note "g. garbage on a connection"
start_store garbage "$WINE" "$EXE"
"$PY213" -c "
import socket
s = socket.create_connection(('127.0.0.1', $PORT))
s.sendall(b'\xff' * 64 + b'GET / HTTP/1.0\r\n\r\n')
s.settimeout(10)
assert s.recv(100) == b'', 'the store answered garbage'
" || fail "g. the garbage connection was not closed"
"$PY213" tests/integration/py/store_ops.py "$PORT" >"$T/after.txt" 2>"$T/after.err" ||
	fail "g. the store stopped serving: $(tail -n 3 "$T/after.err")"
same "$REF_2" "$T/after.txt" || fail "g. after garbage, the answers differ"
wait_for 10 grep -q 'closing connection' "$T/garbage.err" ||
	fail "g. no line names the closed connection: $(cat "$T/garbage.err")"

note "h. SIGINT: a Ctrl-C event, a clean stop"
kill -INT "$SPID"
wait_pid 20 "$SPID" "$T/garbage.err"; rc=$?
expect_eq "h. exit status after Ctrl-C" "$rc" 0

note "i. crun.exe status of a running Linux job"
SP=$(free_port)
KA="keep_alive_interval=0.2,join_timeout=30,secret_file=$T/secret"
for x in a b; do
	"$CRUN" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$SP" \
		--rdzv_id=stwin --rdzv_conf="$KA" --no_python sh -c 'while [ ! -e "$0" ]; do sleep 0.1; done' \
		"$T/stop" >"$T/i.$x.out" 2>&1 &
	eval "p$x=\$!"
	at_exit "kill -9 $! 2>/dev/null"
done
# jq KEYS FILE: nodes, ranks, round and state of a status --json
jq() {
	"$PY213" -c "import json,sys; j=json.load(open(sys.argv[1]))
print(j['state'], j['round'], len(j['nodes']), sorted(r for n in j['nodes'] for r in n['ranks']))" "$1"
}
running() {
	"$CRUN" status --rdzv_endpoint="127.0.0.1:$SP" --rdzv_id=stwin --rdzv_conf="secret_file=$T/secret" \
		--json >"$T/st-linux.json" 2>/dev/null && [ "$(jq "$T/st-linux.json" | cut -d' ' -f1)" = running ]
}
wait_for 60 running || fail "i. the Linux job never ran: $(tail -n 5 "$T/i.a.out")"
"$WINE" "$EXE" status --rdzv_endpoint="127.0.0.1:$SP" --rdzv_id=stwin \
	--rdzv_conf="secret_file=$(winpath "$T/secret")" --json >"$T/st-win.json" 2>"$T/st-win.err" ||
	fail "i. crun.exe status failed: $(cat "$T/st-win.err")"
expect_eq "i. crun.exe status reads what Linux crun status reads" "$(jq "$T/st-win.json")" "$(jq "$T/st-linux.json")"
note "crun.exe status: $(jq "$T/st-win.json")"
rc=0; "$WINE" "$EXE" status --rdzv_endpoint="127.0.0.1:$SP" --rdzv_id=stwin --timeout=5 \
	>"$T/st-nosec.out" 2>&1 || rc=$?
expect_eq "i. without the secret: exit status" "$rc" 3
expect_grep "i. without the secret: says why" "wants a secret" "$T/st-nosec.out"
rc=0; "$WINE" "$EXE" status --rdzv_endpoint="127.0.0.1:$SP" --rdzv_id=nosuchjob \
	--rdzv_conf="secret_file=$(winpath "$T/secret")" --timeout=5 >"$T/st-wrong.out" 2>&1 || rc=$?
expect_eq "i. a wrong run id: exit status" "$rc" 1
touch "$T/stop"
wait_pid 60 "$pa" "$T/i.a.out"; rc_a=$?
wait_pid 60 "$pb" "$T/i.b.out"; rc_b=$?
expect_eq "i. the job's exit statuses" "$rc_a $rc_b" "0 0"

note "j. the standalone agent: the contract, the workers' store, --tee"
timeout 120 "$WINE" "$EXE" --standalone --nproc_per_node=2 --tee=3 --no_python "$WFW" \
	env "$(winpath "$T/env")" store >"$T/j.out" 2>"$T/j.err" ||
	fail "j. the job failed: $(tail -n 5 "$T/j.err")"
for r in 0 1; do
	e=$T/env.$r
	[ -f "$e" ] || fail "j. rank $r wrote no environment"
	tr -d '\r' <"$e" >"$e.u"
	for kv in RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
		MASTER_ADDR=127.0.0.1 TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 \
		TORCHELASTIC_USE_AGENT_STORE=True ROLE_NAME=default; do
		grep -qx "$kv" "$e.u" || fail "j. rank $r: no $kv in its environment"
	done
	expect_grep "j. rank $r: MASTER_PORT" '^MASTER_PORT=[0-9][0-9]*$' "$e.u"
	expect_grep "j. rank $r: TORCHELASTIC_RUN_ID" '^TORCHELASTIC_RUN_ID=.' "$e.u"
	expect_grep "j. rank $r: its store barrier, prefixed" "^\[default$r\]:store ok $r 1" "$T/j.out"
done
expect_grep "j. the agent's word" "2 workers of .* succeeded" "$T/j.err"

note "k. a failing worker, a restart; exit statuses"
timeout 120 "$WINE" "$EXE" --standalone --nproc_per_node=2 --max_restarts=1 --no_python "$WFW" \
	append "$(winpath "$T/k.txt")" run fail-if-attempt 0 3 >"$T/k.out" 2>"$T/k.err" ||
	fail "k. the restarted job failed: $(tail -n 5 "$T/k.err")"
expect_grep "k. the restart said" "failed with exit code 3; restarting" "$T/k.err"
# (the first rank to fail ends the other's first attempt, maybe before
# it writes)
tr -d '\r' <"$T/k.txt" >"$T/k.u"
for line in "run [01] 0" "run 0 1" "run 1 1"; do
	grep -qx "$line" "$T/k.u" || fail "k. no '$line' (rank, attempt): $(tr '\n' ' ' <"$T/k.u")"
done
rc=0; timeout 120 "$WINE" "$EXE" --standalone --nproc_per_node=2 --no_python "$WFW" \
	fail-if-rank 1 7 >"$T/k2.out" 2>"$T/k2.err" || rc=$?
expect_eq "k. a failed group's exit status (rank 1's)" "$rc" 7
expect_grep "k. the root cause" "rank      : 1 (local_rank: 1)" "$T/k2.err"
expect_grep "k. the report is saved" "failure report saved to" "$T/k2.err"

# live_workers: fake_worker.exe processes still running (not zombies; a
# worker's command line starts with its Windows path, crun.exe's does not).
live_workers() {
	for p in $(pgrep -f '^[A-Z]:.*fake_worker[.]exe' || true); do
		exited "$p" || echo "$p"
	done | wc -l
}
no_workers() { [ "$(live_workers)" -eq 0 ]; }
# lines_in N FILE: FILE has N lines.
lines_in() { [ -f "$2" ] && [ "$(wc -l <"$2")" -eq "$1" ]; }
# hanging_job NAME: crun.exe with two workers that hang; sets HP once both run.
hanging_job() {
	rm -f "$T/$1.txt"
	"$WINE" "$EXE" --standalone --nproc_per_node=2 --shutdown_timeout=3 --no_python "$WFW" \
		append "$(winpath "$T/$1.txt")" up hang >"$T/$1.out" 2>"$T/$1.err" &
	HP=$!
	at_exit "kill -9 $HP 2>/dev/null"
	wait_for 30 lines_in 2 "$T/$1.txt" ||
		fail "l. $1: the workers never started: $(cat "$T/$1.err")"
	expect_eq "l. $1: two workers run" "$(live_workers)" 2
}
note "l. Ctrl-C, and a killed crun.exe"
hanging_job ctrlc
kill -INT "$HP"
wait_pid 30 "$HP" "$T/ctrlc.err"; rc=$?
expect_eq "l. exit status after Ctrl-C" "$rc" 130
# (Wine gives crun's Ctrl-C to crun alone: the workers, which a console
# would give it too, are ended after --shutdown_timeout)
expect_grep "l. Ctrl-C is the console's" "received SIGINT: the workers have it from the console too" "$T/ctrlc.err"
expect_eq "l. no stacks there, said once" "$(grep -c "stacks needs Linux" "$T/ctrlc.err")" 1
wait_for 10 no_workers || fail "l. workers left after Ctrl-C: $(live_workers)"
hanging_job killed
kill -KILL "$HP"
wait "$HP" 2>/dev/null
wait_for 10 no_workers ||
	fail "l. $(live_workers) workers outlived crun.exe, killed (its Job Objects did not close)"

# live_grandchildren: the workers' own children (fake_worker.exe child).
live_grandchildren() {
	for p in $(pgrep -f '^[A-Z]:.*fake_worker[.]exe pid .*g[.]txt hang' || true); do
		exited "$p" || echo "$p"
	done | wc -l
}
one_grandchild() { lines_in 2 "$T/g.txt" && [ "$(live_grandchildren)" -eq 1 ]; }
"$WINE" "$EXE" --standalone --nproc_per_node=1 --max_restarts=1 --no_python "$WFW" \
	child "$(winpath "$T/g.txt")" sleep 500 fail-if-attempt 0 3 hang >"$T/g.out" 2>"$T/g.err" &
HP=$!
at_exit "kill -9 $HP 2>/dev/null"
# Two grandchildren were started (one by each attempt); the first attempt's
# went with its worker's tree.
wait_for 30 one_grandchild ||
	fail "l. after a restart: $(wc -l <"$T/g.txt" 2>/dev/null) grandchildren started, $(live_grandchildren) run (want 2 and 1: the first attempt's outlived its worker?)"
kill -KILL "$HP"
wait "$HP" 2>/dev/null
wait_for 10 no_workers || fail "l. workers outlived crun.exe, killed"

note "m. c10d rendezvous: two crun.exe agents, then crun.exe with Linux crun"
# pair NAME CMD_B...: crun.exe as one node of a 2-node job, CMD_B the other
pair() {
	_pn=$1; shift
	_port=$(free_port)
	"$WINE" "$EXE" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$_port" \
		--rdzv_id="$_pn" --rdzv_conf=join_timeout=60 --no_python "$WFW" store \
		>"$T/$_pn.a.out" 2>"$T/$_pn.a.err" &
	_pa=$!
	"$@" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$_port" \
		--rdzv_id="$_pn" --rdzv_conf=join_timeout=60 --no_python "$FWB" store \
		>"$T/$_pn.b.out" 2>"$T/$_pn.b.err" &
	_pb=$!
	wait_pid 120 "$_pa" "$T/$_pn.a.err"; _ra=$?
	wait_pid 120 "$_pb" "$T/$_pn.b.err"; _rb=$?
	expect_eq "m. $_pn: exit statuses" "$_ra $_rb" "0 0"
	expect_eq "m. $_pn: four ranks met in the workers' store" \
		"$(cat "$T/$_pn.a.out" "$T/$_pn.b.out" | tr -d '\r' | grep -c '^store ok [0-3] 6$')" 4
}
FWB=$WFW pair winwin "$WINE" "$EXE"
FWB=$FAKE_WORKER pair winlinux "$CRUN"

note "n. the win_amd64 wheel"
WHL=$(sed -n 's/^windows: \(dist\/[^ ]*win_amd64[.]whl\) .*/\1/p' "$T/build.err")
[ -n "$WHL" ] && [ -f "$WHL" ] || fail "n. no win_amd64 wheel named: $(tail -n 3 "$T/build.err")"
"$PY213" -m pip install -q --no-index --no-deps --platform win_amd64 --only-binary=:all: \
	--target "$T/site" "$WHL" >"$T/pip.out" 2>&1 || fail "n. pip refused the wheel: $(tail -n 3 "$T/pip.out")"
cmp "$T/site/bin/crun.exe" "$EXE" || fail "n. the installed crun.exe is not the built one"
"$WINE" "$T/site/bin/crun.exe" --version >"$T/wv.out" 2>&1 || fail "n. the installed crun.exe does not run"
expect_grep "n. its version" "^crun [0-9.]*" "$T/wv.out"
expect_grep "n. a Windows classifier" "Operating System :: Microsoft :: Windows" \
	"$T/site/crun_launcher-"*.dist-info/METADATA
# (what crun_launcher.binary() looks for on Windows: crun.exe in the
# scripts' folder, by the installed files' record)
grep -q "bin/crun[.]exe,sha256=" "$T/site/crun_launcher-"*.dist-info/RECORD ||
	fail "n. the record does not name bin/crun.exe"
exit 0

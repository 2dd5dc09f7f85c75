#!/bin/sh
# crun for Windows (make windows: scripts/windows.sh, mingw-w64), run here
# under Wine (Debian's wine64): no Windows machine can be had here.
#   a. crun.exe is built, and imports only Windows' own DLLs (libuv, inih,
#      jansson, libsodium and mingw's runtime are inside)
#   b. --version; asking it to launch workers is refused in one line, exit 2
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
x86_64-w64-mingw32-objdump -p "$EXE" | sed -n 's/^.*DLL Name: //p' | tr 'a-z' 'A-Z' | sort >"$T/dlls"
[ -s "$T/dlls" ] || fail "a. crun.exe names no DLL at all: not a PE file?"
extra=$(grep -v -x -e KERNEL32.DLL -e MSVCRT.DLL -e WS2_32.DLL -e ADVAPI32.DLL -e USER32.DLL \
	-e IPHLPAPI.DLL -e USERENV.DLL -e PSAPI.DLL -e SHELL32.DLL -e OLE32.DLL -e DBGHELP.DLL "$T/dlls" || true)
expect_eq "a. DLLs beyond Windows' own" "$extra" ""
note "crun.exe: $(wc -c <"$EXE") bytes, imports $(tr '\n' ' ' <"$T/dlls")"

note "b. --version, and the agent refused"
"$WINE" "$EXE" --version >"$T/v.out" 2>"$T/v.err" || fail "b. --version failed: $(cat "$T/v.err")"
expect_grep "b. version" "^crun [0-9.]* (windows)" "$T/v.out"
rc=0; "$WINE" "$EXE" --nproc_per_node=2 train.py >"$T/b.out" 2>"$T/b.err" || rc=$?
expect_eq "b. exit status of a launch" "$rc" 2
expect_eq "b. one line" "$(wc -l <"$T/b.err")" 1
expect_grep "b. says what runs" "runs only .crun store. and .crun status." "$T/b.err"

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
	diff -u "$T/ref-$v.txt" "$T/win-$v.txt" >&2 || fail "c. torch $v: crun.exe store answers differently"
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
	tr -d '\r' <"$T/cw.txt" | diff -u "$ref" - >&2 || fail "d. store_cli.exe ($gen) vs crun.exe store differs"
	start_store "cli-linux-$gen" "$CRUN"
	timeout 120 "$WINE" "$CLI" $flag 127.0.0.1 "$PORT" >"$T/cl.txt" 2>"$T/cl.err" ||
		fail "d. store_cli.exe ($gen) vs Linux crun store: $(tail -n 3 "$T/cl.err")"
	tr -d '\r' <"$T/cl.txt" | diff -u "$ref" - >&2 || fail "d. store_cli.exe ($gen) vs Linux crun store differs"
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
"$WINE" "$EXE" store --port 0 --host 127.0.0.1 --secret-file "Z:$(echo "$T/secret" | tr / '\\')" \
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
diff -u "$REF_2" "$T/after.txt" >&2 || fail "g. after garbage, the answers differ"
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
	--rdzv_conf="secret_file=Z:$(echo "$T/secret" | tr / '\\')" --json >"$T/st-win.json" 2>"$T/st-win.err" ||
	fail "i. crun.exe status failed: $(cat "$T/st-win.err")"
expect_eq "i. crun.exe status reads what Linux crun status reads" "$(jq "$T/st-win.json")" "$(jq "$T/st-linux.json")"
note "crun.exe status: $(jq "$T/st-win.json")"
rc=0; "$WINE" "$EXE" status --rdzv_endpoint="127.0.0.1:$SP" --rdzv_id=stwin --timeout=5 \
	>"$T/st-nosec.out" 2>&1 || rc=$?
expect_eq "i. without the secret: exit status" "$rc" 3
expect_grep "i. without the secret: says why" "wants a secret" "$T/st-nosec.out"
rc=0; "$WINE" "$EXE" status --rdzv_endpoint="127.0.0.1:$SP" --rdzv_id=nosuchjob \
	--rdzv_conf="secret_file=Z:$(echo "$T/secret" | tr / '\\')" --timeout=5 >"$T/st-wrong.out" 2>&1 || rc=$?
expect_eq "i. a wrong run id: exit status" "$rc" 1
touch "$T/stop"
wait_pid 60 "$pa" "$T/i.a.out"; rc_a=$?
wait_pid 60 "$pb" "$T/i.b.out"; rc_b=$?
expect_eq "i. the job's exit statuses" "$rc_a $rc_b" "0 0"
exit 0

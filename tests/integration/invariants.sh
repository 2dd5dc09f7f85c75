#!/bin/sh
# Decisions that a single-line mutation of the code could change without the
# other suites noticing, each checked against a value this script
# computes itself rather than one crun reports:
#   1. every worker runs in a process group of its own (not the agent's), and
#      stopping the group takes the worker's own children (grandchildren);
#   2. loopback agents on one host are ordered store host first, then by pid,
#      the pids being those this script launched;
#   3. two agents on one host name with different addresses (--local_addr)
#      are ordered by address, not by pid;
#   4. a restarted job gets a fresh workers' store: nothing of the previous
#      generation's keys is seen (single node, and two nodes on loopback).
. tests/integration/lib.sh

lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }
v() { sed -n "s/^$1=//p" "$2"; }
# Is any pid listed in file $1 still running (and not a zombie)?
alive() { for _p in $(cat "$1"); do exited "$_p" || return 0; done; return 1; }
none_alive() { ! alive "$1"; }

# --- 1. process groups and grandchildren ----------------------------------
# Each worker records "pid pgid"; rank 0 starts a child of its own (a sleep:
# the grandchild of crun) and waits; rank 1 then fails, so crun stops rank 0.
# (A worker that exits by itself leaves its children running: see the report.)
cat >"$T/pg.sh" <<'EOF'
out=$1
echo "$$ $(ps -o pgid= -p $$ | tr -d ' ')" >>"$out/groups"
if [ "$LOCAL_RANK" = 1 ]; then
	n=0
	while ! [ -s "$out/grandchildren" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n+1)); done
	exit 3
fi
sleep 1000 &
echo $! >>"$out/grandchildren"
wait
EOF
at_exit 'for p in $(cat "$T/grandchildren" 2>/dev/null); do kill -KILL $p; done'
"$CRUN" --nproc_per_node=2 --no_python sh "$T/pg.sh" "$T" >"$T/pg.out" 2>&1 &
crun=$!
wait_pid 30 $crun
expect_eq "status of the failed group" "$?" 3
agent_pgid=$(ps -o pgid= -p $$ | tr -d ' ')
expect_eq "two workers recorded their group" "$(wc -l <"$T/groups")" 2
while read -r pid pgid; do
	expect_eq "worker $pid leads its own process group" "$pgid" "$pid"
	[ "$pgid" != "$crun" ] && [ "$pgid" != "$agent_pgid" ] || fail "worker $pid is in the agent's group $pgid"
done <"$T/groups"
wait_for 3 none_alive "$T/grandchildren" ||
	fail "grandchildren outlived their stopped workers: $(cat "$T/grandchildren")"
note "1. workers in their own groups; grandchildren stopped with them"

# --- 2. rank order on one host: store host, then by pid -------------------
# Five agents on 127.0.0.1: the first hosts the store. The others share host
# name and address, so the order among them is by pid; the expected group
# ranks are computed from the pids $! gave us. Each worker (a shell) writes
# its group rank and its agent's pid: its parent is the worker's guard, a
# fork of the agent (src/proc/proc.c).
cat >"$T/who.sh" <<'EOF'
echo "$GROUP_RANK $(sed 's/.*) //' /proc/$PPID/stat | cut -d' ' -f2)" >>"$1/who"
EOF
PORT=$(free_port)
pids=""
for i in 0 1 2 3 4; do
	"$CRUN" --nnodes=5 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" \
		--rdzv_id=order --rdzv_conf=join_timeout=30 --no_python sh "$T/who.sh" "$T" >"$T/o$i.out" 2>&1 &
	pids="$pids $!"
	[ $i = 0 ] && { wait_for 10 listening $PORT || fail "the first agent never served the store"; }
done
for p in $pids; do wait_pid 40 $p "$T"/o?.out || { cat "$T"/o*.out >&2; fail "agent $p failed"; }; done
host=$(echo $pids | cut -d" " -f1)
rest=$(echo $pids | tr ' ' '\n' | tail -n +2 | sort -n | tr '\n' ' ')
want="0 $host"
g=1
for p in $rest; do want="$want
$g $p"; g=$((g+1)); done
expect_eq "group ranks by pid (launched:$pids)" "$(sort -n "$T/who")" "$want"
note "2. group ranks: store host, then ascending pid"

# --- 3. one host name, two addresses ------------------------------------
# The agent started second has the lower address: by address it comes first,
# by pid (the next tie-break) it would not.
PORT=$(free_port)
"$CRUN" --nnodes=3 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" \
	--rdzv_id=addr --rdzv_conf=join_timeout=30 --no_python sh "$T/who.sh" "$T/addr" >"$T/ah.out" 2>&1 &
ah=$!
mkdir "$T/addr"
wait_for 10 listening $PORT || fail "the first agent never served the store"
for a in 3 2; do
	"$CRUN" --nnodes=3 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" \
		--rdzv_id=addr --local_addr=127.0.0.$a --no_python sh "$T/who.sh" "$T/addr" >"$T/a$a.out" 2>&1 &
	eval "a$a=\$!"
done
for p in $ah $a3 $a2; do wait_pid 40 $p "$T"/ah.out "$T"/a?.out || fail "agent $p failed"; done
expect_eq "one host name: ordered by address (.2 pid $a2, .3 pid $a3)" "$(sort -n "$T/addr/who")" "0 $ah
1 $a2
2 $a3"
note "3. one host name, two addresses: ordered by address"

# --- 4. a fresh workers' store per generation -----------------------------
# The worker speaks the store protocol itself (no torch): ADD "/gen" 1 and
# records the result. A fresh store answers 1 on every attempt; a store kept
# from the previous generation answers 2 on the second.
cat >"$T/gen.py" <<'EOF'
import os, socket, struct, sys, time
def recv(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("store closed the connection")
        b += c
    return b
s = socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), timeout=10)
def add(d, k=b"/gen"):  # ADD, opcode 3 in the <= 1.13 numbering
    s.sendall(bytes([3]) + struct.pack("<Q", len(k)) + k + struct.pack("<q", d))
    return struct.unpack("<q", recv(s, 8))[0]
got = add(1)
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
# Recorded at once: a rank still waiting below may be stopped any time.
with open(sys.argv[1], "a") as f:
    f.write("attempt %s rank %s add %d\n" % (attempt, os.environ["RANK"], got))
# Every rank of this generation has added before any leaves (bounded).
for _ in range(200):
    if add(0) >= int(os.environ["WORLD_SIZE"]):
        break
    time.sleep(0.05)
if attempt == "0":  # rank 0 fails; the others wait to be stopped for the restart
    if os.environ["RANK"] == "0":
        sys.exit(5)
    time.sleep(60)
EOF
"$CRUN" --nproc_per_node=1 --max_restarts=1 "$T/gen.py" "$T/gen1" >"$T/gen1.out" 2>&1 ||
	fail "single node restart: crun exited $?: $(cat "$T/gen1.out")"
expect_eq "single node: each generation's store starts empty" "$(cat "$T/gen1")" "attempt 0 rank 0 add 1
attempt 1 rank 0 add 1"
# Two nodes: both ranks ADD, so a fresh store answers {1,2} in each
# generation, a kept one {3,4} in the second.
PORT=$(free_port)
for n in a b; do
	"$CRUN" --nnodes=2 --nproc_per_node=1 --max_restarts=1 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=gen --rdzv_conf=join_timeout=30 \
		"$T/gen.py" "$T/gen2" >"$T/gen2$n.out" 2>&1 &
	eval "g_$n=\$!"
	[ $n = a ] && { wait_for 10 listening $PORT || fail "no store host"; }
done
wait_pid 40 $g_a "$T/gen2a.out" "$T/gen2b.out" "$T/gen2" || { cat "$T"/gen2?.out >&2; fail "node a failed"; }
wait_pid 40 $g_b "$T/gen2a.out" "$T/gen2b.out" || { cat "$T"/gen2?.out >&2; fail "node b failed"; }
for a in 0 1; do
	expect_eq "two nodes: generation $a's store starts empty" \
		"$(sed -n "s/^attempt $a rank . add //p" "$T/gen2" | sort -n | tr '\n' ' ')" "1 2 "
done
note "4. every generation starts with an empty workers' store (1 and 2 nodes)"
exit 0

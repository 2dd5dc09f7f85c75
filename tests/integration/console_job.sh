#!/bin/sh
# --console=collapse,job: the lines of every node's ranks, collapsed, on one
# console (the agent's that hosts the rendezvous store).
#   1. Two agents of 4 shell ranks: the common lines once as [0-7]:, rank
#      5's own line as n1:[5]:, each rank's order kept; the other agent
#      shows no worker line; the per-rank log files keep every line.
#   2. Behind a rendezvous secret: the lines take the store's own secret.
#   2b. A restart (rank 5 fails in the first attempt): the second round's
#      lines are collapsed for the job again.
#   3. The store is `crun store`, not an agent: no job console answers, and
#      each node shows its own lines (collapsed per node), none lost, one
#      line says so.
#   4. Real PyTorch 2.x ranks on two agents (a gloo group): the warning,
#      the config and the traceback once for the job; rank 1's KeyError
#      apart, with its node; each rank's tqdm bar whole.
. tests/integration/lib.sh

W=--console_window=5

cat >"$T/w.sh" <<'EOS'
echo "hello from everyone"
echo "config: lr=0.1"
[ "$RANK" = 5 ] && echo "rank five is special"
echo "step of rank $RANK"
echo "done"
EOS

# count PATTERN FILE: lines matching exactly
count() { grep -c -x -F -e "$1" "$2" || true; }

# pair NAME OPTS...: a job of two agents (a hosts the store, b joins), each
# with 4 ranks of $PROG; waits for both; sets rc_a and rc_b.
PROG="--no_python sh $T/w.sh"
pair() {
	name=$1; shift
	port=$(free_port)
	# shellcheck disable=SC2086
	"$CRUN" --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$port" --rdzv_id="$name" "$@" \
		--log_dir="$T/$name.logs.a" $PROG >"$T/$name.a.out" 2>"$T/$name.a.err" &
	pa=$!
	wait_for 20 listening "$port" || fail "$name: a never listened"
	# shellcheck disable=SC2086
	"$CRUN" --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$port" --rdzv_id="$name" "$@" \
		--log_dir="$T/$name.logs.b" $PROG >"$T/$name.b.out" 2>"$T/$name.b.err" &
	pb=$!
	wait_pid 120 $pb "$T/$name.b.err"; rc_b=$?
	wait_pid 120 $pa "$T/$name.a.err"; rc_a=$?
}

# shell_job NAME: the checks of a job of w.sh whose console is a's.
shell_job() {
	o="$T/$1.a.out"
	expect_eq "$1: exit statuses" "$rc_a $rc_b" "0 0"
	for l in '[0-7]:hello from everyone' '[0-7]:config: lr=0.1' '[0-7]:done' \
		'n1:[5]:rank five is special'; do
		expect_eq "$1: $l" "$(count "$l" "$o")" 1
	done
	for r in 0 1 2 3 4 5 6 7; do
		n=$((r / 4))
		expect_eq "$1: rank $r's step" "$(count "n$n:[$r]:step of rank $r" "$o")" 1
	done
	awk '/rank five is special/ {a = NR} /step of rank 5/ {b = NR} END {exit !(a && b && a < b)}' \
		"$o" || fail "$1: rank 5's lines out of order"
	expect_eq "$1: nothing else on a" "$(wc -l <"$o")" 12
	expect_eq "$1: no worker line on b" "$(wc -l <"$T/$1.b.out")" 0
}

note "1. two agents, one console"
pair job1 --console=collapse,job $W --tee=3
shell_job job1
for r in 4 5 6 7; do
	f=$(ls "$T"/job1.logs.b/*/attempt_0/$((r - 4))/stdout.log)
	expect_eq "1: rank $r's log file" "$(grep -c . "$f")" "$([ $r = 5 ] && echo 5 || echo 4)"
done
note "   12 lines on a for 8 ranks (plain: 33 over two consoles), none on b"

note "2. behind a rendezvous secret"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/secret"
chmod 600 "$T/secret"
pair job2 --console=collapse,job $W --tee=3 --rdzv_conf=secret_file="$T/secret"
shell_job job2

note "2b. a restart"
cat >"$T/r.sh" <<'EOS'
n=$TORCHELASTIC_RESTART_COUNT
echo "attempt $n hello"
[ "$RANK$n" = 50 ] && { echo "failing in attempt 0"; exit 1; }
[ "$n" = 0 ] && exec sleep 60 # until the failure stops the round
echo "attempt $n done"
EOS
PROG="--no_python sh $T/r.sh"
pair job2b --console=collapse,job $W --max_restarts=1
expect_eq "2b: exit statuses" "$rc_a $rc_b" "0 0"
expect_eq "2b: rank 5's failure once" "$(count 'n1:[5]:failing in attempt 0' "$T/job2b.a.out")" 1
expect_eq "2b: the second round collapsed" "$(count '[0-7]:attempt 1 hello' "$T/job2b.a.out")" 1
expect_eq "2b: ... to its end" "$(count '[0-7]:attempt 1 done' "$T/job2b.a.out")" 1
expect_nogrep "2b: nothing of the first round after the second began" \
	'attempt 0' "$(sed -n '/attempt 1 hello/,$p' "$T/job2b.a.out" >"$T/2b.tail"; echo "$T/2b.tail")"
expect_eq "2b: no worker line on b" "$(wc -l <"$T/job2b.b.out")" 0
PROG="--no_python sh $T/w.sh"

note "3. the store is crun store: each node shows its own"
"$CRUN" store --port 0 --host 127.0.0.1 2>"$T/store.err" &
spid=$!
at_exit "kill $spid"
wait_for 10 grep -q 'listening on' "$T/store.err" || fail "crun store never listened"
SPORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$T/store.err" | head -n 1)
for x in a b; do
	"$CRUN" --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$SPORT" --rdzv_id=job3 --rdzv_conf=is_host=false \
		--console=collapse,job $W --tee=3 --no_python sh "$T/w.sh" \
		>"$T/job3.$x.out" 2>"$T/job3.$x.err" &
	eval "p$x=\$!"
done
wait_pid 120 "$pb" "$T/job3.b.err"; rc_b=$?
wait_pid 120 "$pa" "$T/job3.a.err"; rc_a=$?
expect_eq "3: exit statuses" "$rc_a $rc_b" "0 0"
for x in a b; do
	expect_grep "3: $x says so" "no job console answered" "$T/job3.$x.err"
	expect_eq "3: $x's own lines, collapsed" "$(count '[default0-3]:hello from everyone' "$T/job3.$x.out")" 1
	expect_eq "3: $x's lines all there" "$(grep -c 'step of rank' "$T/job3.$x.out")" 4
done

note "4. real PyTorch ranks on two agents"
need_torch2
PROG="$PYTHON $TOP/tests/integration/py/collapse_ddp.py"
pair job4 --console=collapse,job $W --nproc_per_node=2
expect_eq "4: exit statuses" "$rc_a $rc_b" "1 1"
o="$T/job4.a.out" e="$T/job4.a.err"
expect_eq "4: config once" "$(count '[0-3]:config: lr=0.1 batch=32' "$o")" 1
expect_eq "4: world sum once" "$(count '[0-3]:world sum 4' "$o")" 1
expect_eq "4: the warning once" "$(grep -c '^\[0-3\]:.*UserWarning: the same warning from every rank' "$e")" 1
expect_eq "4: the traceback once" "$(count '[0-3]:Traceback (most recent call last):' "$e")" 1
expect_eq "4: rank 1 apart" "$(count 'n0:[1]:[rank1]: KeyError: "rank one'"'"'s own error"' "$e")" 1
expect_eq "4: the others' error" "$(count '[0,2-3]:ValueError: the common error' "$e")" 1
for r in 0 1 2 3; do
	expect_eq "4: rank $r's bar whole" \
		"$(grep -c "^n$((r / 2)):\[$r\]:.*steps: 100%.* 3/3 " "$e")" 1
done
# (b's own failure report names its failure as "[0]:", alone on its line)
expect_eq "4: no worker line on b" "$(wc -l <"$T/job4.b.out")" 0
expect_nogrep "4: no worker line on b's stderr" '^\(n[0-9]*:\)\?\[[0-9,-]*\]:.' "$T/job4.b.err"
note "   PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)'): one console for the job"

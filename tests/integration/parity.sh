#!/bin/sh
# needs: torchrun
# crun beside the torchrun of $PYTHON's PyTorch (tests/run.sh runs this once
# per interpreter of TORCHRUN_REFS: Debian's 1.13, through tests/helpers/
# torchrun.py, the test venv's 2.13 and .venv-214's 2.14), same worker, same
# flags: the worker contract, the single-node default, the log layout, exit
# statuses, the error files @record writes and FileTimer clients are
# compared, and every
# difference must be one of the intended ones named below (a new one fails
# the test). docs/compatibility.md lists them with the reasons.
. tests/integration/lib.sh
need_torch
TORCHRUN="$PYTHON $TOP/tests/helpers/torchrun.py"
TV=$("$PYTHON" -c 'import torch; print(torch.__version__.split(".")[0])')
note "torchrun of PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)') ($PYTHON)"

cat >"$T/dump.py" <<'EOF2'
import os, sys
with open(sys.argv[1] + "." + os.environ["LOCAL_RANK"], "w") as f:
    for k in sorted(os.environ):
        f.write(f"{k}={os.environ[k]}\n")
    f.write("ARGV=" + " ".join(sys.argv[2:]) + "\n")
sys.exit(int(sys.argv[2]))
EOF2

# run NAME LAUNCHER...: the launcher with a clean environment; status in $T/NAME.rc
run() {
	name=$1; shift
	env -i PATH="$PATH" HOME="$T" TMPDIR="$T" PYTHON="$PYTHON" "$@" >"$T/$name.out" 2>&1
	echo $? >"$T/$name.rc"
}
common="--standalone --nproc_per_node=2 --max_restarts=0"
run crun "$CRUN" $common --log_dir="$T/lc" -r 3 "$T/dump.py" "$T/ec" 0 a b
run torch $TORCHRUN $common --monitor_interval=0.1 --log_dir="$T/lt" -r 3 "$T/dump.py" "$T/et" 0 a b
expect_eq "success: crun" "$(cat "$T/crun.rc")" 0
expect_eq "success: torchrun" "$(cat "$T/torch.rc")" 0

# --- the worker contract, rank by rank -------------------------------------
# Variables either launcher sets (the rest is the clean environment both got).
# Intended differences, by name:
#   MASTER_ADDR          torchrun --standalone says localhost; crun 127.0.0.1
#                        (its store listens there; localhost may be ::1 first)
#   MASTER_PORT, TORCHELASTIC_RUN_ID   random in both (compared for presence;
#                        torchrun's run id is a uuid4, crun's names the host)
#   TORCHELASTIC_ERROR_FILE            under each launcher's own log layout
#   PYTHONFAULTHANDLER   crun sets it (1) for Python workers, so that their
#                        stacks can be taken before a kill (docs/operations.md)
# and with torchrun 1.13 only (2.x does as crun does):
#   TORCHELASTIC_USE_AGENT_STORE       crun serves the workers' store (True);
#                        torchrun 1.13 --standalone leaves it to rank 0 (False)
#   NCCL_ASYNC_ERROR_HANDLING          1.13's name; crun sets only the current
#                        TORCH_NCCL_ASYNC_ERROR_HANDLING (as torchrun 2.x)
#   TORCHELASTIC_SIGNALS_TO_HANDLE     crun exports it, as torchrun 2.x does
intended="MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID TORCHELASTIC_ERROR_FILE PYTHONFAULTHANDLER"
[ "$TV" = 1 ] && intended="$intended TORCHELASTIC_USE_AGENT_STORE NCCL_ASYNC_ERROR_HANDLING TORCH_NCCL_ASYNC_ERROR_HANDLING TORCHELASTIC_SIGNALS_TO_HANDLE"
v() { sed -n "s/^$1=//p" "$T/$2.$r.s"; }
for r in 0 1; do
	[ -f "$T/ec.$r" ] && [ -f "$T/et.$r" ] || fail "rank $r did not run under both"
	for f in ec et; do
		grep -v -e '^_=' -e '^PWD=' -e '^SHLVL=' -e '^OLDPWD=' "$T/$f.$r" | sort >"$T/$f.$r.s"
	done
	diff "$T/ec.$r.s" "$T/et.$r.s" | sed -n 's/^[<>] \([^=]*\)=.*/\1/p' | sort -u >"$T/diff.$r"
	for k in $(cat "$T/diff.$r"); do
		case " $intended " in *" $k "*) ;; *)
			grep "^$k=" "$T/ec.$r.s" "$T/et.$r.s" >&2
			fail "rank $r: $k differs and is not an intended difference" ;;
		esac
	done
	# The intended ones hold as described.
	expect_eq "torchrun's MASTER_ADDR" "$(v MASTER_ADDR et)" localhost
	expect_eq "crun's MASTER_ADDR" "$(v MASTER_ADDR ec)" 127.0.0.1
	[ -n "$(v MASTER_PORT ec)" ] && [ -n "$(v TORCHELASTIC_RUN_ID ec)" ] || fail "crun lacks MASTER_PORT/RUN_ID"
	expect_eq "crun's agent store" "$(v TORCHELASTIC_USE_AGENT_STORE ec)" True
	expect_eq "crun's NCCL name" "$(v TORCH_NCCL_ASYNC_ERROR_HANDLING ec)" 1
	expect_eq "crun: no deprecated NCCL name" "$(v NCCL_ASYNC_ERROR_HANDLING ec)" ""
	expect_eq "crun's signals" "$(v TORCHELASTIC_SIGNALS_TO_HANDLE ec)" "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
	expect_eq "crun's faulthandler" "$(v PYTHONFAULTHANDLER ec)" 1
	expect_eq "torchrun's faulthandler" "$(v PYTHONFAULTHANDLER et)" ""
	if [ "$TV" = 1 ]; then
		expect_eq "torchrun's 1.13 NCCL name" "$(v NCCL_ASYNC_ERROR_HANDLING et)" 1
	else
		# Named so that a torchrun 2.x that changed them fails here, not
		# only in the diff above.
		for k in TORCHELASTIC_USE_AGENT_STORE TORCH_NCCL_ASYNC_ERROR_HANDLING TORCHELASTIC_SIGNALS_TO_HANDLE; do
			expect_eq "rank $r: $k as torchrun $TV" "$(v $k ec)" "$(v $k et)"
		done
	fi
	expect_eq "argv ($r)" "$(v ARGV ec)" "$(v ARGV et)"
	for k in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK ROLE_RANK ROLE_NAME; do
		[ -n "$(v $k ec)" ] || fail "rank $r: crun did not set $k"
	done
done

# --- the log layout ------------------------------------------------------------
# Both: <log_dir>/<run_id>_<random>/attempt_0/<local_rank>/{stdout,stderr}.log
(cd "$T"/lc/*/ && find . -type f | sort) >"$T/layout.c"
(cd "$T"/lt/*/ && find . -type f | sort) >"$T/layout.t"
diff "$T/layout.c" "$T/layout.t" >&2 || fail "log layouts below the run directory differ"
for x in c:lc:ec t:lt:et; do
	IFS=: read -r who dir env <<EOF2
$x
EOF2
	case "$(basename "$T"/$dir/*)" in "$(sed -n 's/^TORCHELASTIC_RUN_ID=//p' "$T/$env.0")"_?*) ;;
		*) fail "$who's run dir $(basename "$T"/$dir/*) is not <run_id>_<random>" ;; esac
done
# The error file each launcher gives a worker lies in that layout.
expect_eq "crun's error file" "$(sed -n 's/^TORCHELASTIC_ERROR_FILE=//p' "$T/ec.1")" "$(echo "$T"/lc/*)/attempt_0/1/error.json"
expect_eq "torchrun's error file" "$(sed -n 's/^TORCHELASTIC_ERROR_FILE=//p' "$T/et.1")" "$(echo "$T"/lt/*)/attempt_0/1/error.json"

# --- exit status semantics ------------------------------------------------------
# Intended difference: torchrun exits 1 whatever failed; crun exits with the
# failed worker's status (3 here), so schedulers and scripts can tell.
run crun3 "$CRUN" $common "$T/dump.py" "$T/x" 3
run torch3 $TORCHRUN $common --monitor_interval=0.1 "$T/dump.py" "$T/y" 3
expect_eq "failure: torchrun" "$(cat "$T/torch3.rc")" 1
expect_eq "failure: crun (the worker's status)" "$(cat "$T/crun3.rc")" 3
expect_grep "torchrun's report" "ChildFailedError" "$T/torch3.out"
expect_grep "crun's report, same layout" "exitcode  *: 3" "$T/crun3.out"
expect_grep "torchrun's report" "exitcode  *: 3" "$T/torch3.out"
# A usage error is 2 for both (argparse's status).
run crun2 "$CRUN" --nproc_per_node=x "$T/dump.py" "$T/z" 0
run torch2 $TORCHRUN --no_such_flag "$T/dump.py" "$T/z" 0
expect_eq "usage error: torchrun" "$(cat "$T/torch2.rc")" 2
expect_eq "usage error: crun" "$(cat "$T/crun2.rc")" 2
# --- the single-node default ---------------------------------------------------
# No --standalone, no endpoint, no port, one node: torchrun 2.x runs a c10d
# rendezvous on a free port with a fresh run id (1.13: the static backend on
# 29500, run id "none"); crun does as 2.x does, with either.
rm -f "$T"/ec.* "$T"/et.*
run crund "$CRUN" --nproc_per_node=2 "$T/dump.py" "$T/ec" 0
run torchd $TORCHRUN --nproc_per_node=2 --monitor_interval=0.1 "$T/dump.py" "$T/et" 0
expect_eq "default: crun" "$(cat "$T/crund.rc")" 0
expect_eq "default: torchrun" "$(cat "$T/torchd.rc")" 0
r=0
for f in ec et; do sort "$T/$f.0" >"$T/$f.0.s"; done
p=$(v MASTER_PORT ec)
[ -n "$p" ] && [ "$p" != 29500 ] || fail "crun's single-node default port is '$p', not a free one"
case "$(v TORCHELASTIC_RUN_ID ec)" in ""|none) fail "crun's single-node run id is '$(v TORCHELASTIC_RUN_ID ec)'" ;; esac
if [ "$TV" = 1 ]; then
	expect_eq "torchrun 1.13's default port" "$(v MASTER_PORT et)" 29500
else
	[ "$(v MASTER_PORT et)" != 29500 ] || fail "torchrun $TV took 29500: has its default changed?"
	expect_eq "torchrun $TV's default store" "$(v TORCHELASTIC_USE_AGENT_STORE et)" True
fi

# --- two nodes (c10d, two agents on loopback) --------------------------------------
# Rank by rank, the same variables; only the store's address and port and the
# error file's directory differ (as above).
cat >"$T/dumpr.py" <<'EOF2'
import os, sys
with open(sys.argv[1] + "." + os.environ["RANK"], "w") as f:
    for k in sorted(os.environ):
        f.write(f"{k}={os.environ[k]}\n")
EOF2
for x in crun torch; do
	p=$(free_port)
	[ $x = crun ] && L=$CRUN || L="$TORCHRUN --monitor_interval=0.1"
	for i in 0 1; do
		# shellcheck disable=SC2086
		env -i PATH="$PATH" HOME="$T" TMPDIR="$T" PYTHON="$PYTHON" $L --nnodes=2 --nproc_per_node=1 \
			--rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$p --rdzv_id=job2 \
			"$T/dumpr.py" "$T/m$x" >"$T/m$x$i.out" 2>&1 &
		eval "pid$i=\$!"
		[ $i = 1 ] || wait_for 30 listening "$p" || fail "$x: no store host on $p"
	done
	wait_pid 120 "$pid0" "$T/m${x}0.out" || fail "$x: first agent failed"
	wait_pid 120 "$pid1" "$T/m${x}1.out" || fail "$x: second agent failed"
done
for r in 0 1; do
	[ -f "$T/mcrun.$r" ] && [ -f "$T/mtorch.$r" ] || fail "two nodes: rank $r did not run under both"
	diff "$T/mcrun.$r" "$T/mtorch.$r" | sed -n 's/^[<>] \([^=]*\)=.*/\1/p' | sort -u >"$T/mdiff.$r"
	for k in $(cat "$T/mdiff.$r"); do
		case " MASTER_ADDR MASTER_PORT TORCHELASTIC_ERROR_FILE PYTHONFAULTHANDLER " in *" $k "*) ;; *)
			[ "$TV" = 1 ] && case " $intended " in *" $k "*) continue ;; esac
			grep "^$k=" "$T/mcrun.$r" "$T/mtorch.$r" >&2
			fail "two nodes, rank $r: $k differs and is not an intended difference" ;;
		esac
	done
	expect_eq "two nodes, rank $r: crun's run id" "$(sed -n 's/^TORCHELASTIC_RUN_ID=//p' "$T/mcrun.$r")" job2
done

# --- error files written by @record ----------------------------------------------
# Rank 1 raises in a function decorated with torch's record: each launcher
# finds the worker's error file in its layout, reports it as the root cause,
# and copies it to its own TORCHELASTIC_ERROR_FILE (the scheduler's) as is.
cat >"$T/rec.py" <<'EOF2'
import os
from torch.distributed.elastic.multiprocessing.errors import record
@record
def main():
    if os.environ["LOCAL_RANK"] == "1":
        raise ValueError("boom in rank 1")
main()
EOF2
run crunr env TORCHELASTIC_ERROR_FILE="$T/lec.json" "$CRUN" $common --log_dir="$T/rc" "$T/rec.py"
run torchr env TORCHELASTIC_ERROR_FILE="$T/let.json" $TORCHRUN $common --monitor_interval=0.1 --log_dir="$T/rt" "$T/rec.py"
expect_eq "@record failure: torchrun" "$(cat "$T/torchr.rc")" 1
expect_eq "@record failure: crun (the worker's status)" "$(cat "$T/crunr.rc")" 1
# shape FILE: the error file's keys, message, error code and last traceback line.
shape() {
	"$PYTHON" -c 'import json,sys
d=json.load(open(sys.argv[1]))
m=d["message"]
print(sorted(d), sorted(m), sorted(m["extraInfo"]), m["message"], m["errorCode"],
      m["extraInfo"]["py_callstack"].strip().splitlines()[-1])' "$1"
}
for x in c t; do
	[ -f "$T/le$x.json" ] || fail "launcher $x wrote no error file"
	[ -f "$(echo "$T"/r$x/*/attempt_0/1/error.json)" ] || fail "launcher $x: no worker error file in its layout"
	expect_grep "launcher $x: root cause" "error_file: $(echo "$T"/r$x/*)/attempt_0/1/error.json" "$T/$([ $x = c ] && echo crunr || echo torchr).out"
done
expect_eq "launcher error files" "$(shape "$T/lec.json")" "$(shape "$T/let.json")"
expect_grep "crun reports the exception" "ValueError: boom in rank 1" "$T/crunr.out"
expect_grep "torchrun reports the exception" "ValueError: boom in rank 1" "$T/torchr.out"

# --- FileTimer clients -----------------------------------------------------------
# torch's own FileTimerClient in rank 1 lets a 1 s timer expire: both
# launchers kill that rank with SIGKILL. torchrun 1.13 then fails the job
# (status 1); torchrun 2.x's FileTimerServer kills its own agent with the same
# signal (status 137), leaving the other workers behind. crun stops the other
# workers, reports the killed rank and exits with its status: 137, as 2.x.
cat >"$T/timer.py" <<'EOF2'
import os, time
from torch.distributed.elastic.timer import FileTimerClient, configure, expires
configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
if os.environ["LOCAL_RANK"] == "1":
    with expires(after=1, scope="step"):
        time.sleep(60)
time.sleep(40)  # what torchrun 2.x leaves behind ends by itself
EOF2
for x in crun torch; do
	[ $x = crun ] && L=$CRUN || L="$TORCHRUN --monitor_interval=0.1"
	s=$(date +%s)
	# shellcheck disable=SC2086
	run ${x}t env TORCHELASTIC_ENABLE_FILE_TIMER=1 timeout 50 $L $common "$T/timer.py"
	el=$(( $(date +%s) - s ))
	[ "$el" -lt 35 ] || fail "$x: a 1 s FileTimer took $el s to end the job"
done
expect_grep "crun: rank 1 killed" "exitcode  *: 137 (pid: [0-9]*, signal 9: SIGKILL)" "$T/crunt.out"
expect_grep "crun names the timer" "timer 'step' of rank 1 (pid [0-9]*) expired: sending SIGKILL" "$T/crunt.out"
expect_eq "FileTimer expiry: crun" "$(cat "$T/crunt.rc")" 137
if [ "$TV" = 1 ]; then
	expect_grep "torchrun: rank 1 killed" "Signal 9 (SIGKILL) received" "$T/torcht.out"
	expect_eq "FileTimer expiry: torchrun $TV" "$(cat "$T/torcht.rc")" 1
else
	expect_eq "FileTimer expiry: torchrun $TV (its agent killed too)" "$(cat "$T/torcht.rc")" 137
fi
exit 0

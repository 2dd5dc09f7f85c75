#!/bin/sh
# needs: torch
# crun beside Debian's torchrun (PyTorch 1.13, through tests/helpers/
# torchrun.py), same worker, same flags: the worker contract, the exit
# status semantics and the log layout are compared, and every difference
# must be one of the intended ones named below (a new one fails the test).
. tests/integration/lib.sh
need_torch
TORCHRUN="$PYTHON $TOP/tests/helpers/torchrun.py"

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
#   MASTER_PORT, TORCHELASTIC_RUN_ID   random in both (compared for presence)
#   TORCHELASTIC_USE_AGENT_STORE       crun serves the workers' store (True);
#                        torchrun 1.13 --standalone leaves it to rank 0 (False)
#   TORCHELASTIC_ERROR_FILE            under each launcher's own log layout
#   NCCL_ASYNC_ERROR_HANDLING          1.13's name; crun sets only the current
#                        TORCH_NCCL_ASYNC_ERROR_HANDLING (as torchrun 2.x)
#   TORCHELASTIC_SIGNALS_TO_HANDLE     crun exports it, as torchrun 2.x does
intended="MASTER_ADDR MASTER_PORT TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_ERROR_FILE NCCL_ASYNC_ERROR_HANDLING TORCH_NCCL_ASYNC_ERROR_HANDLING TORCHELASTIC_SIGNALS_TO_HANDLE"
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
	v() { sed -n "s/^$1=//p" "$T/$2.$r.s"; }
	expect_eq "torchrun's MASTER_ADDR" "$(v MASTER_ADDR et)" localhost
	expect_eq "crun's MASTER_ADDR" "$(v MASTER_ADDR ec)" 127.0.0.1
	[ -n "$(v MASTER_PORT ec)" ] && [ -n "$(v TORCHELASTIC_RUN_ID ec)" ] || fail "crun lacks MASTER_PORT/RUN_ID"
	expect_eq "crun's agent store" "$(v TORCHELASTIC_USE_AGENT_STORE ec)" True
	expect_eq "torchrun's 1.13 NCCL name" "$(v NCCL_ASYNC_ERROR_HANDLING et)" 1
	expect_eq "crun's NCCL name" "$(v TORCH_NCCL_ASYNC_ERROR_HANDLING ec)" 1
	expect_eq "crun: no deprecated NCCL name" "$(v NCCL_ASYNC_ERROR_HANDLING ec)" ""
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
exit 0

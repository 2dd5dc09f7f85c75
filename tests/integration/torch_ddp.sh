#!/bin/sh
# needs: torch
# Real PyTorch under crun: gloo init_process_group(env://) + all_reduce +
# DistributedDataParallel with 3 workers through crun's agent store
# (TORCHELASTIC_USE_AGENT_STORE=True); every rank must report the right sum
# and identical replicas. Then a failure on attempt 0, which must be
# restarted and form a fresh process group in a fresh store; then the old way,
# worker rank 0 hosting its own TCPStore on the port crun held for it. Each
# run also checks new_group, all_gather_object and broadcast_object_list, and
# which worker listens on MASTER_PORT (none in agent-store mode).
. tests/integration/lib.sh
need_torch

export PYTHON
"$CRUN" --standalone --nproc_per_node=3 tests/integration/py/ddp_gloo.py --out "$T" \
	>"$T/out" 2>&1 || { cat "$T/out"; fail "DDP run exited $?"; }
for r in 0 1 2; do
	expect_grep "rank $r result" "^rank $r/3 attempt 0 sum 6 want 6 replicas_equal True store True new_group ok objects ok store_server none$" "$T/rank.$r"
done

rm -f "$T"/rank.*
"$CRUN" --standalone --nproc_per_node=2 --max_restarts=1 tests/integration/py/ddp_gloo.py \
	--out "$T" --fail-on-attempt 0 >"$T/out2" 2>&1 || { cat "$T/out2"; fail "restart run exited $?"; }
expect_grep "restarted" "restart 1 of 1" "$T/out2"
for r in 0 1; do
	expect_grep "rank $r after restart" "^rank $r/2 attempt 1 sum 3 want 3 replicas_equal True store True new_group ok objects ok store_server none$" "$T/rank.$r"
done

rm -f "$T"/rank.*
"$CRUN" --standalone --nproc_per_node=2 --no_agent_store tests/integration/py/ddp_gloo.py \
	--out "$T" >"$T/out3" 2>&1 || { cat "$T/out3"; fail "--no_agent_store run exited $?"; }
for r in 0 1; do
	expect_grep "rank $r, own store" "^rank $r/2 attempt 0 sum 3 want 3 replicas_equal True store False new_group ok objects ok" "$T/rank.$r"
done
expect_grep "rank 0 hosts its own store" "store False .* store_server here$" "$T/rank.0"
expect_grep "rank 1 is its client" "store False .* store_server none$" "$T/rank.1"
exit 0

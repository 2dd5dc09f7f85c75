#!/bin/sh
# needs: torch
# On a torch with libuv, USE_LIBUV only picks which server a worker would
# build; under crun (agent store) no worker builds one: with USE_LIBUV=1 and
# USE_LIBUV=0 (and TORCH_TCPSTORE_USE_LIBUV, and env://?use_libuv= in the
# worker's init_method) the gloo job of py/ddp_gloo.py succeeds, no worker
# listens on MASTER_PORT, and no "use_libuv was requested" error appears.
# The same check sees rank 0's own server under --no_agent_store (so it can
# fail). A torch built without libuv refuses even a client asked for it:
# store_nolibuv.sh and trixie_torch.sh.
. tests/integration/lib.sh
need_torch
export PYTHON
JOB=tests/integration/py/ddp_gloo.py

for l in 1 0; do
	rm -f "$T"/rank.*
	USE_LIBUV=$l TORCH_TCPSTORE_USE_LIBUV=$l "$CRUN" --standalone --nproc_per_node=2 \
		"$JOB" --out "$T" --init-method "env://?use_libuv=$l" >"$T/out$l" 2>&1 || { cat "$T/out$l" >&2; fail "USE_LIBUV=$l: job exited $?"; }
	expect_nogrep "USE_LIBUV=$l: no libuv error" "libuv support" "$T/out$l"
	for r in 0 1; do
		expect_grep "USE_LIBUV=$l: rank $r a client" "^rank $r/2 attempt 0 sum 3 want 3 .* store True .* store_server none$" "$T/rank.$r"
	done
	note "USE_LIBUV=$l: job succeeded, no worker hosts a store, no libuv error"
done

rm -f "$T"/rank.*
USE_LIBUV=1 "$CRUN" --standalone --nproc_per_node=2 --no_agent_store "$JOB" --out "$T" >"$T/own" 2>&1 ||
	{ cat "$T/own" >&2; fail "--no_agent_store job exited $?"; }
expect_grep "the check sees rank 0's own server" "store False .* store_server here$" "$T/rank.0"
note "--no_agent_store: rank 0 hosts the server (where use_libuv applies), and the check says so"
exit 0

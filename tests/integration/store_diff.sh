#!/bin/sh
# PyTorch 2.x's own TCPStore client against crun's agent store and `crun
# store`, compared with PyTorch's own server (py/store_diff.py): one random
# sequence of every TCPStore operation from 3 clients, with use_libuv=1 (the
# 2.x default) and use_libuv=0 (client and reference server; USE_LIBUV and
# TORCH_TCPSTORE_USE_LIBUV set to match), each result compared. The seed is
# printed; STORE_DIFF_SEED= replays it, STORE_DIFF_OPS= sets the length.
# Last, the comparison is shown to catch a difference: with the one kept on
# purpose (STORE_DIFF_QUIRKS=1, see store_diff.py) it must fail.
. tests/integration/lib.sh
need_torch2
SEED=${STORE_DIFF_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
OPS=${STORE_DIFF_OPS:-200}
DIFF=$TOP/tests/integration/py/store_diff.py
note "seed $SEED ($OPS ops; STORE_DIFF_SEED=$SEED replays), $("$PYTHON" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null)"

# start_crun_store: run `crun store` on a kernel-chosen port; sets CP.
start_crun_store() {
	"$CRUN" store --port 0 --host 127.0.0.1 --quiet 2>"$T/store.log" &
	_pid=$!
	at_exit "kill $_pid"
	wait_for 10 grep -q "listening on" "$T/store.log" ||
		fail "crun store did not start: $(cat "$T/store.log")"
	CP=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$T/store.log" | head -n 1)
}

# diff_run LIBUV OUT [ENV...]: the comparison in a worker under crun (its
# agent store and a fresh crun store as subjects).
diff_run() {
	_l=$1 _o=$2; shift 2
	start_crun_store
	env "$@" USE_LIBUV="$_l" TORCH_TCPSTORE_USE_LIBUV="$_l" TORCH_CPP_LOG_LEVEL=ERROR \
		timeout 600 "$CRUN" --standalone --nproc_per_node=1 "$DIFF" "$SEED" "$OPS" 3 "$_l" \
		agent=agent store="127.0.0.1:$CP" >"$_o" 2>&1
}

for l in 1 0; do
	diff_run "$l" "$T/diff$l.out" || {
		grep "store_diff" "$T/diff$l.out" >&2; tail -n 5 "$T/diff$l.out" >&2
		fail "use_libuv=$l: crun's stores differ from PyTorch's server (seed $SEED)"
	}
	expect_grep "use_libuv=$l: agent store compared" "agent: the same $OPS results" "$T/diff$l.out"
	expect_grep "use_libuv=$l: crun store compared" "store: the same $OPS results" "$T/diff$l.out"
	note "use_libuv=$l: agent store and crun store: the same $OPS results as PyTorch's server"
done

# The comparison can fail: the kept difference must be caught.
SEED=1 OPS=60
if diff_run 1 "$T/quirk.out" STORE_DIFF_QUIRKS=1; then
	fail "a known difference (compare_set waking a wait) was not caught"
fi
expect_grep "the difference is named" "differs from torch's server" "$T/quirk.out"
expect_grep "at a compare_set-ended wait" "park_cas" "$T/quirk.out"
note "a known difference is caught: $(grep -m1 'torch: ' "$T/quirk.out" | cut -c1-100)"
exit 0

#!/bin/sh
# The limits tables of crun(1) and the README are the ones the binary prints
# from its option tables (scripts/limits-doc.sh --check), and --help lists
# the same limits.
. tests/integration/lib.sh

CRUN="$CRUN" sh scripts/limits-doc.sh --check 2>"$T/diff" ||
	fail "committed limits blocks are stale: $(cat "$T/diff")"
"$CRUN" --help >"$T/help" || fail "--help exited $?"
expect_grep "--help has a Limits section" "^Limits" "$T/help"
for o in store_max_key_size store_max_value_size store_max_keys \
	store_max_memory store_max_conns store_max_output store_idle_timeout \
	console_buffer config_max_bytes config_max_value config_max_expansion \
	metrics_max_conns metrics_idle_timeout; do
	expect_grep "limit --$o in --help" "^  --$o  " "$T/help"
	expect_grep "limit --$o in crun(1)" "^\\.B \\\\-\\\\-$o\$" docs/crun.1
	expect_grep "limit --$o in the README" "| \`--$o\`" README.md
done
for k in etcd_max_body etcd_max_message etcd_turn_bytes heartbeat_timeout; do
	expect_grep "rdzv_conf $k in --help" "^  rdzv_conf $k" "$T/help"
	expect_grep "rdzv_conf $k in the README" "\`--rdzv_conf=$k=\`" README.md
done
"$CRUN" --print-limits=html >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status of --print-limits=html" "$rc" 2
expect_grep "--print-limits=html refused" "expected markdown or man" "$T/e"

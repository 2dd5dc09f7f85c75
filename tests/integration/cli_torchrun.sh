#!/bin/sh
# Every torchrun flag is accepted, checked against torchrun's own lists, not
# crun's option table: 1.13's flags read at test time from the installed
# torch/distributed/run.py (TORCHRUN_PY), 2.x's from the list written down
# from upstream source in tests/data/torchrun-2.x-flags.txt. Each spelling is
# given as --flag=value and as --flag value (switches alone) to
# `crun --print-config ... /bin/true`, which must exit 0. Flags the list marks
# "gap" (2.x flags crun does not implement yet, issue 11) must instead exit 2
# with one error line naming the flag: the test documents today's state.
. tests/integration/lib.sh

RUN_PY=${TORCHRUN_PY:-/usr/lib/python3/dist-packages/torch/distributed/run.py}
[ -f "$RUN_PY" ] || skip "no torchrun run.py at $RUN_PY (python3-torch)"
"$PYTHON" tests/integration/py/torchrun_flags.py run "$RUN_PY" >"$T/v113" ||
	fail "cannot read torchrun's flags from $RUN_PY"
"$PYTHON" tests/integration/py/torchrun_flags.py list tests/data/torchrun-2.x-flags.txt >"$T/v2" ||
	fail "cannot read tests/data/torchrun-2.x-flags.txt"

# accepts WHERE ARGS...: crun --print-config ARGS /bin/true exits 0.
accepts() {
	_w=$1; shift
	"$CRUN" --print-config "$@" /bin/true >"$T/o" 2>"$T/e" ||
		fail "$_w: crun rejects $* (status $?): $(head -n 2 "$T/e")"
}
# gap WHERE FLAG ARGS...: exit 2, one error line naming FLAG.
gap() {
	_w=$1 _f=$2; shift 2
	"$CRUN" --print-config "$@" /bin/true >"$T/o" 2>"$T/e"; _rc=$?
	expect_eq "$_w: status of the known gap $*" "$_rc" 2
	expect_eq "$_w: error lines for $*" "$(grep -c '^crun: error:' "$T/e")" 1
	grep -qF -- "'$_f'" "$T/e" || fail "$_w: the error for $* does not name $_f: $(cat "$T/e")"
}
check() { # WHERE FILE
	where=$1 n=0 g=0
	while IFS='|' read -r names kind sample state; do
		for f in $names; do
			if [ "$kind" = switch ]; then
				one=$f two=""
			else
				# --flag=value, and --flag value (short flags: -r value only).
				case "$f" in --*) one="$f=$sample" ;; *) one="" ;; esac
				two="$f $sample"
			fi
			if [ "$state" = gap ]; then
				# shellcheck disable=SC2086
				gap "$where" "$f" ${one:-$two}; g=$((g+1))
				continue
			fi
			[ -z "$one" ] || accepts "$where" "$one"
			# shellcheck disable=SC2086
			[ -z "$two" ] || accepts "$where" $two
			n=$((n+1))
		done
	done <"$2"
	[ $n -ge 15 ] || fail "$where: only $n flags checked"
	note "$where: $n spellings accepted, $g known gaps refused with exit 2"
}
check "torchrun 1.13 ($RUN_PY)" "$T/v113"
check "torchrun 2.x (tests/data)" "$T/v2"
exit 0

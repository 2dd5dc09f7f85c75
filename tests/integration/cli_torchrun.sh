#!/bin/sh
# needs: torchrun
# Every flag of the torchrun of $PYTHON's PyTorch is accepted, read from
# torchrun's own argument parser (torch.distributed.run.get_args_parser), not
# from crun's option table or a copy: tests/run.sh runs this once per
# interpreter of TORCHRUN_REFS (Debian's 1.13, the test venv's 2.13, and
# .venv-214's 2.14). Each
# spelling is given as --flag=value and as --flag value (switches alone) to
# `crun --print-config ... /bin/true`, which must exit 0.
. tests/integration/lib.sh
need_torch

V=$("$PYTHON" -c 'import torch; print(torch.__version__)')
"$PYTHON" tests/integration/py/torchrun_flags.py >"$T/flags" ||
	fail "cannot read torchrun $V's flags from its parser"

# accepts ARGS...: crun --print-config ARGS /bin/true exits 0.
accepts() {
	"$CRUN" --print-config "$@" /bin/true >"$T/o" 2>"$T/e" ||
		fail "torchrun $V: crun rejects $* (status $?): $(head -n 2 "$T/e")"
}
n=0
while IFS='|' read -r names kind sample; do
	for f in $names; do
		if [ "$kind" = switch ]; then
			accepts "$f"
		else
			# --flag=value, and --flag value (short flags: -r value only).
			case "$f" in --*) accepts "$f=$sample" ;; esac
			accepts "$f" "$sample"
		fi
		n=$((n+1))
	done
done <"$T/flags"
[ $n -ge 15 ] || fail "torchrun $V: only $n flags checked"
note "torchrun $V ($PYTHON): $n spellings accepted"
exit 0

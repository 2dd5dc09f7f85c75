#!/bin/sh
# No orphans after a normal exit: whatever a worker left behind when it
# exited (here in sessions and process groups of their own, so its process
# group does not reach them) is stopped before crun exits, SIGTERM first and
# SIGKILL after --shutdown_timeout for what ignores it.
. tests/integration/lib.sh

M=$$ # a marker in argv, so only this suite's processes are counted
# count PATTERN: live processes whose command line holds PATTERN (from /proc).
count() {
	_n=0
	for _d in /proc/[0-9]*; do
		{ tr "\0" " " <"$_d/cmdline"; } 2>/dev/null | grep -q -e "$1" || continue
		_st=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "$_d/status" 2>/dev/null)
		[ -n "$_st" ] && [ "$_st" != Z ] && _n=$((_n + 1))
	done
	echo $_n
}
at_exit "pkill -KILL -f 'sleep 333[0-9]$M'"

# Each of two workers starts 30 children in sessions of their own (five of
# them ignoring SIGTERM) and exits 0 before they do.
cat >"$T/leave.sh" <<EOS
#!/bin/sh
i=0
while [ \$i -lt 25 ]; do setsid sleep 3331$M.\$LOCAL_RANK & i=\$((i + 1)); done
i=0
while [ \$i -lt 5 ]; do setsid sh -c "trap '' TERM; exec sleep 3332$M.\$LOCAL_RANK" & i=\$((i + 1)); done
while [ "\$(pgrep -f "sleep 333[12]$M.\$LOCAL_RANK" | wc -l)" -lt 30 ]; do sleep 0.05; done
touch "$T/started.\$LOCAL_RANK"
exit 0
EOS
chmod +x "$T/leave.sh"
timeout -s KILL 60 "$CRUN" --standalone --nproc_per_node=2 --shutdown_timeout=2 \
	"$T/leave.sh" >"$T/sh.out" 2>&1
rc=$?
[ -e "$T/started.0" ] && [ -e "$T/started.1" ] || { tail -n 20 "$T/sh.out" >&2; fail "the workers did not start their children"; }
expect_eq "status of workers that exited 0 leaving children behind" $rc 0
n=$(count "sleep 333[12]$M")
expect_eq "setsid children alive after crun exited" "$n" 0

# The same from a PyTorch worker: children in new sessions (subprocess's
# start_new_session) outlive neither the worker nor crun.
if "$PYTHON" -c 'import torch' 2>/dev/null; then
	cat >"$T/leave.py" <<EOS
import subprocess, torch
for _ in range(20):
    subprocess.Popen(["sleep", "3333$M"], start_new_session=True)
print("torch", torch.__version__, "left 20 children", flush=True)
EOS
	timeout -s KILL 60 "$CRUN" --standalone --nproc_per_node=2 --shutdown_timeout=2 \
		"$T/leave.py" >"$T/py.out" 2>&1
	rc=$?
	expect_grep "the torch workers ran" "left 20 children" "$T/py.out"
	expect_eq "status of torch workers that left children behind" $rc 0
	expect_eq "torch workers' children alive after crun exited" "$(count "sleep 3333$M")" 0
else
	note "no torch in $PYTHON: the torch case is left out"
fi
exit 0

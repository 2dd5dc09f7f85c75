#!/bin/sh
# Worker binding : --numa_binding and --cpu_bind=auto.
#
# This machine has 2 CPUs, so the real affinity is checked over a topology
# whose PUs are 0 and 1 (tests/data/hwloc/2n1c-2gpu.xml: 2 NUMA nodes of one
# core, the first GPU by PCI order on node 1), loaded through HWLOC_XMLFILE:
# each worker's Cpus_allowed_list is read from /proc/<pid>/status while it
# runs, and its memory policy from /proc/<pid>/numa_maps. A restricted
# starting mask comes from taskset. The larger topologies (2 sockets x 2 NUMA
# x 8 cores; 8 GPUs on 2 sockets) are checked through the plan that
# --print-config and --verbose print. A bind the kernel refuses fails the
# worker's start with a message naming the rank and its cpus.
. tests/integration/lib.sh

D=$TOP/tests/data/hwloc
export HWLOC_THISSYSTEM=1
unset CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES CRUN_BINDING_MASK

# A worker that says its pid, then waits (bounded) for the test to look.
cat >"$T/w.sh" <<'EOF'
#!/bin/sh
echo $$ >"$DIR/pid.$LOCAL_RANK.tmp" && mv "$DIR/pid.$LOCAL_RANK.tmp" "$DIR/pid.$LOCAL_RANK"
i=0
while [ ! -e "$DIR/go" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
EOF
chmod +x "$T/w.sh"

cpus_of() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }
# The process-wide policy shows on the first mapping of numa_maps.
mpol_of() { head -n 1 "/proc/$1/numa_maps" | cut -d' ' -f2; }

# run NAME NPROC [crun args...]: start crun with w.sh as NPROC workers, wait
# for every worker's pid, record "cpus mpol" per local rank in $T/NAME.r<i>,
# let them finish; crun's stderr is in $T/NAME.err.
run() {
	_nm=$1 _np=$2; shift 2
	rm -rf "$T/$_nm.d"; mkdir "$T/$_nm.d"
	DIR="$T/$_nm.d" "$@" --nproc_per_node="$_np" --no_python "$T/w.sh" \
		>"$T/$_nm.out" 2>"$T/$_nm.err" &
	_pid=$!
	_i=0
	while [ $_i -lt "$_np" ]; do
		wait_for 20 test -e "$T/$_nm.d/pid.$_i" ||
			{ touch "$T/$_nm.d/go"; cat "$T/$_nm.err" >&2; fail "$_nm: worker $_i never started"; }
		_w=$(cat "$T/$_nm.d/pid.$_i")
		echo "$(cpus_of "$_w") $(mpol_of "$_w")" >"$T/$_nm.r$_i"
		_i=$((_i+1))
	done
	touch "$T/$_nm.d/go"
	wait_pid 30 "$_pid" "$T/$_nm.err" || { cat "$T/$_nm.err" >&2; fail "$_nm: crun exited $?"; }
}
r() { cat "$T/$1.r$2"; }

# --- baseline: no binding, the workers keep crun's affinity ------------------
base=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
run none 2 "$CRUN"
expect_eq "unbound rank 0" "$(r none 0)" "$base default"
expect_eq "unbound rank 1" "$(r none 1)" "$base default"

# --- node: each rank on its GPU's node (GPU 0 is on node 1) -------------------
HWLOC_XMLFILE=$D/2n1c-2gpu.xml run node 2 "$CRUN" --numa-binding=node --verbose \
	--event_log="$T/node.ev"
expect_eq "node: rank 0 (GPU 0 on node 1)" "$(r node 0)" "1 default"
expect_eq "node: rank 1 (GPU 1 on node 0), memory preferred" "$(r node 1)" "0 prefer:0"
expect_grep "verbose line of rank 0" "rank 0 local rank 0: cpus 1 numa 1 memory unchanged gpu 0 (0000:10:00.0)" "$T/node.err"
expect_grep "verbose line of rank 1" "rank 1 local rank 1: cpus 0 numa 0 memory preferred gpu 1 (0000:80:00.0)" "$T/node.err"
expect_grep "node 1 is not this machine's memory" "local rank 0: numa node(s) 1 outside the memory nodes allowed" "$T/node.err"
"$PYTHON" - "$T/node.ev" <<'PY' || fail "worker_binding events (above)"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
b = {e["local_rank"]: e for e in evs if e["name"] == "crun.worker_binding"}
assert sorted(b) == [0, 1], b
assert (b[0]["cpus"], b[0]["numa"], b[0]["gpu"], b[0]["mode"]) == ("1", "1", 0, "node"), b[0]
assert (b[1]["cpus"], b[1]["memory"], b[1]["fallback"]) == ("0", "preferred", False), b[1]
PY

# --- exclusive and core-complex: one core (one complex) a GPU here ------------
for m in exclusive core-complex; do
	HWLOC_XMLFILE=$D/2n1c-2gpu.xml run "$m" 2 "$CRUN" --numa_binding="$m"
	expect_eq "$m: rank 0" "$(r "$m" 0)" "1 default"
	expect_eq "$m: rank 1" "$(r "$m" 1)" "0 prefer:0"
done

# --- auto without GPUs: the NUMA layout, one rank a node ----------------------
CUDA_VISIBLE_DEVICES= HWLOC_XMLFILE=$D/2n1c-2gpu.xml run auto 2 "$CRUN" --cpu_bind=auto
expect_eq "auto: rank 0" "$(r auto 0)" "0 default"
expect_eq "auto: rank 1" "$(r auto 1)" "1 default"
expect_nogrep "auto is quiet without --verbose" "local rank" "$T/auto.err"

# --- job file and environment spellings ---------------------------------------
printf '[job]\ncpu_bind = auto\n' >"$T/job.ini"
HWLOC_XMLFILE=$D/2n1c-2gpu.xml run ini 2 "$CRUN" --config "$T/job.ini"
expect_eq "job-file cpu_bind: rank 0" "$(r ini 0)" "1 default"
expect_eq "job-file cpu_bind: rank 1" "$(r ini 1)" "0 default"
PET_NUMA_BINDING=node HWLOC_XMLFILE=$D/2n1c-2gpu.xml run env 2 "$CRUN"
expect_eq "PET_NUMA_BINDING: rank 1" "$(r env 1)" "0 prefer:0"

# --- a restricted starting mask: bound inside it, never outside ---------------
if taskset -c 1 true 2>/dev/null; then
	HWLOC_XMLFILE=$D/2n1c-2gpu.xml run mask 2 taskset -c 1 "$CRUN" --cpu-bind=auto
	expect_eq "mask: rank 0 (node 1: inside)" "$(r mask 0)" "1 default"
	expect_eq "mask: rank 1 (node 0: outside, the starting mask)" "$(r mask 1)" "1 default"
	expect_grep "fallback said" "local rank 1: no cpu of numa node 0 is in the starting mask 1: bound to the starting mask" "$T/mask.err"
	# Real hardware, no XML: the one node's cpus within the mask.
	run real 2 taskset -c 1 "$CRUN" --numa_binding=socket
	expect_eq "real topology under taskset: rank 0" "$(r real 0)" "1 default"
	expect_eq "real topology under taskset: rank 1" "$(r real 1)" "1 default"
else
	note "taskset cannot pin to cpu 1 here: restricted-mask run left out"
fi

# --- a bind the kernel refuses: a clear failure, not an unbound worker --------
# Local rank 0 gets this machine's cpu 0, rank 1 cpu 1000 (no machine here
# has it).
mkdir "$T/refused.d"
DIR="$T/refused.d" CRUN_BINDING_MASK=0,1000 HWLOC_SYNTHETIC="pack:2 [numa] core:1 pu:1(indexes=0,1000)" \
	"$CRUN" --numa_binding=node --nproc_per_node=2 --no_python "$T/w.sh" \
	>"$T/refused.out" 2>"$T/refused.err" &
p=$!
touch "$T/refused.d/go"
wait_pid 30 $p "$T/refused.err"; rc=$?
[ "$rc" -ne 0 ] || fail "refused bind: crun exited 0"
expect_grep "refusal named" "crun: cannot bind local rank 1 to cpus 1000: the kernel refused the cpu binding (sched_setaffinity)" "$T/refused.err"
[ ! -e "$T/refused.d/pid.1" ] || fail "refused bind: local rank 1 ran anyway"

# --- the plan of the larger topologies, through --print-config ----------------
# plan NAME XML NPROC ARGS...: the "binding:" lines of --print-config.
plan() {
	_nm=$1 _x=$2 _np=$3; shift 3
	CRUN_BINDING_MASK=${MASK:-0-63} HWLOC_XMLFILE=$D/$_x "$CRUN" --print-config \
		--nproc_per_node="$_np" "$@" true >"$T/$_nm.plan" 2>&1 ||
		{ cat "$T/$_nm.plan" >&2; fail "$_nm: --print-config exited $?"; }
	sed -n 's/^binding: local rank \([0-9]*\): cpus \([^ ]*\) numa \([^ ]*\).*/\2@\3/p' "$T/$_nm.plan" | tr '\n' ' '
}
expect_eq "8 GPUs, node" "$(plan g-node 8gpu.xml 8 --numa-binding=node)" \
	"0-7@0 0-7@0 8-15@1 8-15@1 16-23@2 16-23@2 24-31@3 24-31@3 "
expect_eq "8 GPUs, socket" "$(plan g-socket 8gpu.xml 8 --numa-binding=socket)" \
	"0-15@0-1 0-15@0-1 0-15@0-1 0-15@0-1 16-31@2-3 16-31@2-3 16-31@2-3 16-31@2-3 "
expect_eq "8 GPUs, exclusive" "$(plan g-excl 8gpu.xml 8 --numa-binding=exclusive)" \
	"0-3@0 4-7@0 8-11@1 12-15@1 16-19@2 20-23@2 24-27@3 28-31@3 "
expect_eq "8 GPUs, core-complex" "$(MASK=2-31 plan g-cc 8gpu.xml 8 --numa-binding=core-complex)" \
	"4-7@0 2-3@0 8-11@1 12-15@1 16-19@2 20-23@2 24-27@3 28-31@3 "
expect_eq "8 GPUs, auto" "$(plan g-auto 8gpu.xml 8 --cpu-bind=auto)" \
	"0-3@0 4-7@0 8-11@1 12-15@1 16-19@2 20-23@2 24-27@3 28-31@3 "
expect_grep "plan source" "binding (resolved) *= node from 8 GPUs by PCI locality" "$T/g-node.plan"
expect_grep "gpu in the plan" "local rank 7: .* gpu 7 (0000:bd:00.0)" "$T/g-node.plan"
expect_eq "8 GPUs, 4 visible" "$(CUDA_VISIBLE_DEVICES=4,5,6,7 plan g-vis 8gpu.xml 4 --numa-binding=node)" \
	"16-23@2 16-23@2 24-31@3 24-31@3 "
expect_eq "2x2x8, exclusive (SMT)" "$(plan s-excl 2s2n8c.xml 8 --numa-binding=exclusive)" \
	"0-7@0 8-15@0 16-23@1 24-31@1 32-39@2 40-47@2 48-55@3 56-63@3 "
expect_eq "2x2x8, socket" "$(plan s-socket 2s2n8c.xml 4 --numa-binding=socket)" \
	"0-31@0-1 0-31@0-1 32-63@2-3 32-63@2-3 "
expect_eq "2x2x8, restricted mask" "$(MASK=8-23 plan s-mask 2s2n8c.xml 4 --numa-binding=node)" \
	"8-15@0 8-15@0 16-23@1 16-23@1 "
expect_eq "no NUMA information" "$(HWLOC_XMLFILE= HWLOC_SYNTHETIC='core:4 pu:1' CRUN_BINDING_MASK=0-3 \
	"$CRUN" --print-config --nproc_per_node=2 --cpu_bind=auto true |
	sed -n 's/^binding: local rank [0-9]*: cpus \([^ ]*\) numa \([^ ]*\).*/\1@\2/p' | tr '\n' ' ')" "0-1@0 2-3@0 "

# --- bad values: usage errors (exit 2) naming the option ----------------------
bad() { # WANT ARGS...
	_w=$1; shift
	"$CRUN" "$@" true >"$T/bad.out" 2>&1; _rc=$?
	expect_eq "status of $*" "$_rc" 2
	expect_grep "message of $*" "$_w" "$T/bad.out"
}
bad "numa_binding.*expected node, socket, exclusive or core-complex" --numa_binding=nodes
bad "cpu_bind.*expected none or auto" --cpu-bind=yes
bad "not allowed with --numa_binding" --numa-binding=node --cpu_bind=auto
CRUN_CPU_BIND=sometimes "$CRUN" true >"$T/bad.out" 2>&1; expect_eq "bad CRUN_CPU_BIND status" $? 2
expect_grep "bad CRUN_CPU_BIND named" "CRUN_CPU_BIND" "$T/bad.out"
HWLOC_XMLFILE=$T/missing.xml "$CRUN" --numa-binding=node --nproc_per_node=1 true >"$T/bad.out" 2>&1
[ $? -ne 0 ] || fail "a missing HWLOC_XMLFILE was accepted"
expect_grep "missing topology named" "cannot load the hwloc topology of '$T/missing.xml'" "$T/bad.out"
CRUN_BINDING_MASK=zero "$CRUN" --cpu_bind=auto --nproc_per_node=1 true >"$T/bad.out" 2>&1
[ $? -ne 0 ] || fail "a bad CRUN_BINDING_MASK was accepted"
expect_grep "bad mask named" "the starting cpu mask: 'zero'" "$T/bad.out"
"$CRUN" --help >"$T/help" 2>&1
expect_grep "--help lists --cpu_bind" "cpu_bind" "$T/help"
expect_grep "--help lists --verbose" "verbose" "$T/help"
exit 0

#!/bin/sh
# INI job files through the real binary: every shipped example in configs/
# parses and --print-config shows its values with "job file" sources;
# single-node.ini runs (entrypoint replaced by the fake worker) and its [env]
# reaches the workers; `crun job.ini extra...` replaces the file's args;
# precedence command line > environment > file; bad job files exit 2 with
# file:line. Multi-node examples are checked through --print-config here;
# multinode.sh and multihost.sh run multi-node jobs.
. tests/integration/lib.sh

unset PET_NPROC_PER_NODE PET_NNODES PET_MAX_RESTARTS PET_RDZV_ENDPOINT OMP_NUM_THREADS
unset SLURM_JOB_ID SLURM_JOB_NUM_NODES SLURM_NNODES SLURM_JOB_NODELIST SLURM_STEP_ID
export TMPDIR="$T" # the examples' log_dir defaults under $TMPDIR
C=$TOP/configs

# show FILE [flags...]: --print-config into $T/pc; must exit 0.
show() {
	f=$1; shift
	"$CRUN" --config "$C/$f" --print-config "$@" >"$T/pc" 2>"$T/pc.err" ||
		fail "--print-config of $f exited $?: $(cat "$T/pc.err")"
}
# has WHAT OPTION VALUE SOURCE: one line of $T/pc.
has() {
	grep -E "^$2 +=  *$3 +# $4" "$T/pc" >/dev/null || {
		cat "$T/pc" >&2
		fail "$1: want '$2 = $3 # $4'"
	}
}

# --- every shipped example parses ----------------------------------------
for f in "$C"/*.ini; do
	if [ "$(basename "$f")" = slurm.ini ]; then
		# slurm = true outside a SLURM step is a usage error, said clearly.
		"$CRUN" --config "$f" --print-config >/dev/null 2>"$T/e"
		expect_eq "slurm.ini outside SLURM" "$?" 2
		expect_grep "slurm.ini outside SLURM" "not inside a SLURM job" "$T/e"
		continue
	fi
	show "$(basename "$f")"
	expect_grep "$(basename "$f") has job-file values" "# job file ($C/" "$T/pc"
done
[ -f "$C/single-node.ini" ] && [ -f "$C/two-node-hetero.ini" ] &&
	[ -f "$C/elastic.ini" ] && [ -f "$C/slurm.ini" ] || fail "an example is missing"

show single-node.ini
has single nproc_per_node 4 "job file \($C/single-node.ini:[0-9]+: nproc_per_node\)"
has single standalone true "job file"
has single log_dir "$T/crun-logs" "job file .*: dir\)"
has single tee 3 "job file"
# The script is found next to the job file, not in the current directory.
expect_grep "single entrypoint" "^entrypoint *= $C/../examples/train.py --epochs 3 --run-name single node demo$" "$T/pc"
expect_grep "single env" "^env: PYTHONUNBUFFERED=1" "$T/pc"

show two-node-hetero.ini
has hetero nnodes 2 "job file"
has hetero nproc_per_node 4 "job file"
has hetero rdzv_backend c10d "job file .*: backend\)"
has hetero rdzv_endpoint 127.0.0.1:29400 "job file .*: endpoint\)"
has hetero rdzv_id hetero-demo "job file .*: id\)"
has hetero rdzv_conf join_timeout=300 "job file"
has hetero local_ranks_filter 0 "job file .*: filter\)"
# The second node: the flag beats the file.
show two-node-hetero.ini --nproc_per_node=2
has "hetero node1" nproc_per_node 2 "command line"
has "hetero node1" nnodes 2 "job file"
RDZV_HOST=10.0.0.5 show two-node-hetero.ini
has "hetero endpoint from the environment" rdzv_endpoint 10.0.0.5:29400 "job file"

show elastic.ini
has elastic nnodes 2:4 "job file"
has elastic max_restarts 3 "job file"
has elastic rdzv_conf "join_timeout=600,last_call_timeout=30,close_timeout=30,heartbeat_timeout=10,keep_alive_interval=1,keep_alive_max_attempt=5" "job file"
has elastic redirects 3 "job file"
NPROC=2 show elastic.ini
has "elastic nproc from \${NPROC}" nproc_per_node 2 "job file"

# As inside a step of a 2-node job (exported: dash does not export the
# assignments that prefix a function call).
(export SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NODEID=0 \
	SLURM_JOB_NUM_NODES=2 SLURM_NNODES=2 SLURM_JOB_NODELIST='n[1-2]' SLURM_SUBMIT_DIR=$T
 show slurm.ini) || exit 1
has slurm slurm true "job file"
has slurm log_dir "$T/logs/4242" "job file"
has slurm signals_to_handle SIGTERM,SIGINT,SIGUSR1 "job file"

# --- precedence: command line > environment > file > default -------------
PET_NPROC_PER_NODE=2 show single-node.ini
has "env over file" nproc_per_node 2 "environment \(PET_NPROC_PER_NODE\)"
PET_NPROC_PER_NODE=2 show single-node.ini --nproc_per_node=3
has "command line over env" nproc_per_node 3 "command line"
has "default" redirects 0 "default"

# --- single-node.ini runs, entrypoint replaced on the command line --------
"$CRUN" --config "$C/single-node.ini" "$FAKE_WORKER" env "$T/env" >"$T/out" 2>&1 ||
	fail "single-node.ini run exited $?: $(tail -n 20 "$T/out")"
expect_eq "workers of single-node.ini" "$(ls "$T"/env.* | wc -l)" 4
for r in 0 1 2 3; do
	f="$T/env.$r"
	v() { sed -n "s/^$1=//p" "$f"; }
	expect_eq "[env] PYTHONUNBUFFERED of $r" "$(v PYTHONUNBUFFERED)" 1
	expect_eq "[env] OMP_NUM_THREADS of $r" "$(v OMP_NUM_THREADS)" 2
	expect_eq "WORLD_SIZE of $r" "$(v WORLD_SIZE)" 4
done
# [env] sets OMP_NUM_THREADS: no notice that crun sets it to 1.
expect_eq "OMP_NUM_THREADS notice with [env] setting it" "$(grep -c 'setting OMP_NUM_THREADS' "$T/out")" 0
id=$(sed -n 's/^TORCHELASTIC_RUN_ID=//p' "$T/env.0")
[ -d "$(echo "$T/crun-logs/${id}"_*)/attempt_0/3" ] || fail "no logs under $T/crun-logs/$id (log_dir from the file)"

# --- crun job.ini [extra args]: the file's entrypoint, the extras as args --
cat >"$T/job.ini" <<EOF
; a job that runs the fake worker
[job]
entrypoint = $FAKE_WORKER
args = env "$T/from-file"
nproc_per_node = 2

[env]
FROM_JOB_FILE = \${GREETING:-hello} world
EOF
GREETING=hi "$CRUN" "$T/job.ini" >"$T/out" 2>&1 || fail "crun job.ini exited $?: $(cat "$T/out")"
expect_eq "args from the file" "$(ls "$T"/from-file.* | wc -l)" 2
expect_eq "expanded [env]" "$(sed -n 's/^FROM_JOB_FILE=//p' "$T/from-file.1")" "hi world"
"$CRUN" "$T/job.ini" env "$T/from-cli" >"$T/out" 2>&1 || fail "crun job.ini args exited $?: $(cat "$T/out")"
expect_eq "extra args replace the file's" "$(ls "$T"/from-cli.* | wc -l)" 2
expect_eq "file args not used again" "$(ls "$T"/from-file.* | wc -l)" 2
expect_eq "default in [env]" "$(sed -n 's/^FROM_JOB_FILE=//p' "$T/from-cli.0")" "hello world"

# --- bad job files: exit 2, one error line with file:line -----------------
# bad WANT TEXT: write TEXT as $T/bad.ini, run it, expect status 2 and WANT.
bad() {
	printf '%s\n' "$2" >"$T/bad.ini"
	"$CRUN" --config "$T/bad.ini" /bin/true >"$T/o" 2>"$T/e"; rc=$?
	expect_eq "status for '$1'" "$rc" 2
	expect_eq "error lines for '$1'" "$(grep -c '^crun: error:' "$T/e")" 1
	grep -qF -- "$T/bad.ini:$1" "$T/e" || fail "want '$T/bad.ini:$1' in: $(cat "$T/e")"
	[ ! -s "$T/o" ] || fail "bad job file wrote to stdout"
}
bad "2: unknown section [jobs]" "; x
[jobs]"
bad "3: unknown key 'nnode' in [job] (did you mean 'nnodes'?)" "[job]
nproc_per_node = 2
nnode = 2"
bad "3: duplicate key 'nnodes' (first set at line 2)" "[job]
nnodes = 1
nnodes = 2"
bad "1: key 'nnodes' outside a section" "nnodes = 1"
bad "2: malformed line 'oops': expected 'key = value' or '[section]'" "[job]
oops"
bad "2: dir: undefined variable 'CRUN_TEST_NOPE'" "[logs]
dir = \${CRUN_TEST_NOPE}"
bad "2: args: '\$' must start \${NAME}" "[job]
args = \$HOME"
bad "3: nnodes: invalid value '0': expected N or MIN:MAX" "[job]

nnodes = 0"
bad "2: standalone: invalid value 'maybe'" "[job]
standalone = maybe"
bad "2: rdzv_conf: invalid value 'x' for 'join_timeout'" "[rendezvous]
join_timeout = x"
bad "2: 'RANK' is set by crun for each worker" "[env]
RANK = 1"

# 114,001 ${X} of a 20 KB X (a 576 KB file) would expand to
# 2.3 GB; it is refused at the line where the file's expansion passes 4 MiB,
# in bounded memory (ulimit -v: the unbounded expansion took 4.4 GB).
"$PYTHON" -c '
import sys
lines = ["[job]", "entrypoint = x", "[env]"]
n = 0
while n < 114001:
    k = min(40, 114001 - n)
    lines.append("V%d = %s" % (len(lines), "${X}" * k))
    n += k
sys.stdout.write("\n".join(lines) + "\n")
' >"$T/expand.ini"
X=$(printf "%020000d" 0) && export X
(ulimit -v "$(vmem_limit 1048576)"; exec "$CRUN" --config "$T/expand.ini" /bin/true) \
	>"$T/o" 2>"$T/e"; rc=$?
unset X
expect_eq "status for an expansion past the limit" "$rc" 2
expect_grep "expansion limit named" \
	"expand.ini:[0-9]*: V[0-9]*: the job file's values pass 4194304 bytes after \${} expansion (config_max_expansion)" "$T/e"

# The bounds are options read before the file: a lower one applies to it.
X=$(printf "%02000d" 0) && export X
printf '[job]\nentrypoint = /bin/true\nargs = ${X}\n' >"$T/small.ini"
"$CRUN" --config "$T/small.ini" >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status for 2000 bytes of \${X} by default" "$rc" 0
"$CRUN" --config_max_value=1K --config "$T/small.ini" >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status for 2000 bytes of \${X} with --config_max_value=1K" "$rc" 2
expect_grep "value bound named" "small.ini:3: args: value longer than 1024 bytes after .* (config_max_value)" "$T/e"
CRUN_CONFIG_MAX_EXPANSION=1000 "$CRUN" --config "$T/small.ini" >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status with CRUN_CONFIG_MAX_EXPANSION=1000" "$rc" 2
expect_grep "file bound named" "(config_max_expansion)" "$T/e"
"$CRUN" --config_max_expansion=lots --config "$T/small.ini" >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status for --config_max_expansion=lots" "$rc" 2
expect_grep "bad bound named" "config_max_expansion.*'lots'" "$T/e"
unset X

# --config_max_bytes: a file of exactly the bound runs, one byte more is
# refused naming the bound and the option (the command line or CRUN_*).
printf '[job]\nentrypoint = /bin/true\n' >"$T/sized.ini"
n=$(wc -c <"$T/sized.ini")
"$CRUN" --config_max_bytes="$n" "$T/sized.ini" >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status for a job file of exactly --config_max_bytes" "$rc" 0
printf '#\n' >>"$T/sized.ini"
CRUN_CONFIG_MAX_BYTES=$((n + 1)) "$CRUN" "$T/sized.ini" >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status for a job file one byte over CRUN_CONFIG_MAX_BYTES" "$rc" 2
expect_grep "size bound named" \
	"sized.ini: job file larger than $((n + 1)) bytes (config_max_bytes)" "$T/e"

"$CRUN" --config "$T/missing.ini" /bin/true >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status for a missing job file" "$rc" 2
expect_grep "missing job file" "$T/missing.ini: cannot open job file: No such file" "$T/e"
"$CRUN" "$T/missing.ini" >"$T/o" 2>"$T/e"; rc=$?
expect_eq "status for a missing positional job file" "$rc" 2
exit 0

#!/bin/sh
# --env_check: two agents on loopback, each with its own fake NVIDIA driver
# tree (CRUN_NVIDIA_PROC) and its own fake torch package first on PYTHONPATH,
# run a Python entrypoint that does not import torch. warn: the job runs and
# both nodes print one line per differing item naming both nodes and values
# (and log an env_check event); strict: both exit 1 with that message and no
# worker runs; off: nothing is said; matching nodes: nothing is said. Then
# forged descriptors with a garbage or oversized fingerprint, and a forged
# env-check record, are refused with a message naming the key.
. tests/integration/lib.sh
. tests/integration/lib_etcd.sh
need_etcd
RAW="$PYTHON $TOP/tests/integration/py/raw_store.py"
H=$(hostname)

# tree NAME DRIVER-LINE TORCH CUDA: a fake /proc/driver/nvidia and site-packages.
tree() {
	mkdir -p "$T/$1/proc/driver/nvidia/gpus" "$T/$1/site/torch"
	printf '%s\n' "$2" >"$T/$1/proc/driver/nvidia/version"
	: >"$T/$1/site/torch/__init__.py"
	printf "__version__ = '%s'\ncuda: Optional[str] = '%s'\n" "$3" "$4" >"$T/$1/site/torch/version.py"
}
tree n1 "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023" 2.1.0+cu121 12.1
tree n2 "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build" 2.0.1+cu118 11.8
tree n3 "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023" 2.1.0+cu121 12.1
# The workers' nccl: a dist-info on n1 and n3, a bundled library on n2.
mkdir -p "$T/n1/site/nvidia_nccl_cu12-2.18.1.dist-info" "$T/n3/site/nvidia_nccl_cu12-2.18.1.dist-info" "$T/n2/site/nvidia/nccl/lib"
printf 'Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.18.1\n' |
	tee "$T/n1/site/nvidia_nccl_cu12-2.18.1.dist-info/METADATA" >"$T/n3/site/nvidia_nccl_cu12-2.18.1.dist-info/METADATA"
{ head -c 4096 /dev/zero; printf 'NCCL version 2.19.3+cuda12.3'; head -c 4096 /dev/zero; } >"$T/n2/site/nvidia/nccl/lib/libnccl.so.2"
cat >"$T/job.py" <<'EOF'
import os, sys
assert "torch" not in sys.modules
open(sys.argv[1] + "." + os.environ["RANK"], "w").write("ran\n")
EOF

# agent NAME TREE ADDR [flags...]: one node in the background.
agent() {
	name=$1 tr=$2 addr=$3; shift 3
	eval "_px=\${PYX_$name:-\$PYTHON}"
	CRUN_NVIDIA_PROC="$T/$tr/proc/driver/nvidia/gpus" CRUN_SYSFS="$T/nosys" \
	PYTHONPATH="$T/$tr/site" PYTHON_EXEC="$_px" \
	"$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend="${BACKEND:-c10d}" \
		--rdzv_endpoint="${EP:-127.0.0.1:$PORT}" --rdzv_id="$JOB" --local_addr="$addr" \
		--event_log="$T/$JOB.$name.ev" "$@" "$T/job.py" "$T/$JOB.ran" >"$T/$JOB.$name.out" 2>&1 &
	eval "pid_$name=\$!"
}
# pair TREE-A TREE-B [flags...]: run both nodes; sets rc_a and rc_b.
pair() {
	ta=$1 tb=$2; shift 2
	PORT=$(free_port)
	agent a "$ta" 127.0.0.1 "$@"
	[ -n "${EP:-}" ] || wait_for 10 listening "$PORT" || { cat "$T/$JOB.a.out" >&2; fail "$JOB: agent a never served the store"; }
	agent b "$tb" 127.0.0.2 "$@"
	wait_pid 60 "$pid_a" "$T/$JOB.a.out"; rc_a=$?
	wait_pid 60 "$pid_b" "$T/$JOB.b.out"; rc_b=$?
}
DRV="nodes differ in the NVIDIA driver: 535.104.05 on $H (127.0.0.1); 550.54.14 on $H (127.0.0.2)"
TOR="nodes differ in the torch version: 2.1.0+cu121 on $H (127.0.0.1); 2.0.1+cu118 on $H (127.0.0.2)"
CUD="nodes differ in torch's CUDA build: 12.1 on $H (127.0.0.1); 11.8 on $H (127.0.0.2)"
NCC="nodes differ in the NCCL version: 2.18.1 on $H (127.0.0.1); 2.19.3 on $H (127.0.0.2)"

# 0. --print-config shows this node's fingerprint.
CRUN_NVIDIA_PROC="$T/n2/proc/driver/nvidia/gpus" PYTHONPATH="$T/n2/site" PYTHON_EXEC="$PYTHON" \
	"$CRUN" --print-config "$T/job.py" >"$T/pc.out" 2>&1 || { cat "$T/pc.out" >&2; fail "--print-config failed"; }
expect_grep "print-config fingerprint" "^fingerprint *= driver:550.54.14,torch:2.0.1+cu118,cuda:11.8,nccl:2.19.3 " "$T/pc.out"

# 1. warn (the default): the job runs; both nodes name both nodes and values.
JOB=warn; pair n1 n2
expect_eq "warn: a's exit status" "$rc_a" 0
expect_eq "warn: b's exit status" "$rc_b" 0
expect_eq "warn: both workers ran" "$(cat "$T"/warn.ran.* | tr -d '\n')" "ranran"
for n in a b; do
	for want in "$DRV" "$TOR" "$CUD" "$NCC"; do
		expect_grep "warn: $n's line" "^crun: $want\$" "$T/warn.$n.out"
	done
	expect_eq "warn: $n says 4 lines" "$(grep -c 'nodes differ' "$T/warn.$n.out")" 4
	"$PYTHON" - "$T/warn.$n.ev" "$TOR" <<'EOF' || fail "warn: $n's env_check event"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
ec = [e for e in evs if e["name"] == "crun.env_check"]
assert len(ec) == 1, ec
assert ec[0]["mode"] == "warn" and ec[0]["refused"] is False, ec
assert sys.argv[2] in ec[0]["differences"] and len(ec[0]["differences"]) == 4, ec
assert ec[0]["round"] == 0 and ec[0]["run_id"] == "warn", ec
EOF
done

# 2. strict: the round is refused; both exit 1 with the message; no worker.
JOB=strict; pair n1 n2 --env_check=strict
expect_eq "strict: a's exit status" "$rc_a" 1
expect_eq "strict: b's exit status" "$rc_b" 1
for n in a b; do
	expect_grep "strict: $n's message" "env_check=strict refused round 0: $DRV;$TOR" "$T/strict.$n.out"
	grep -q '"refused":true' "$T/strict.$n.ev" || fail "strict: $n logged no refused env_check event"
done
[ ! -e "$T/strict.ran.0" ] && [ ! -e "$T/strict.ran.1" ] || fail "strict: a worker ran"

# 3. off (here through CRUN_ENV_CHECK): nothing compared, nothing said.
JOB=off; export CRUN_ENV_CHECK=off; pair n1 n2; unset CRUN_ENV_CHECK
expect_eq "off: exit statuses" "$rc_a $rc_b" "0 0"
for n in a b; do expect_nogrep "off: $n" "nodes differ\|env_check" "$T/off.$n.out"; done

# 4. Matching nodes (strict, so a false difference would fail the job).
JOB=same; pair n1 n3 --env_check=strict
expect_eq "same: exit statuses" "$rc_a $rc_b" "0 0"
for n in a b; do expect_nogrep "same: $n" "nodes differ" "$T/same.$n.out"; done

# 5. The etcd backend runs the same rendezvous code: the same lines, the same
# refusal (the node order is by address there too).
etcd_cluster 1
BACKEND=etcd EP=$ETCD_EP
JOB=etcdwarn; pair n1 n2
expect_eq "etcd warn: exit statuses" "$rc_a $rc_b" "0 0"
for n in a b; do
	for want in "$DRV" "$TOR" "$CUD" "$NCC"; do
		expect_grep "etcd warn: $n's line" "^crun: $want\$" "$T/etcdwarn.$n.out"
	done
done
JOB=etcdstrict; pair n1 n2 --env_check=strict
expect_eq "etcd strict: exit statuses" "$rc_a $rc_b" "1 1"
for n in a b; do expect_grep "etcd strict: $n's message" "env_check=strict refused round 0: $DRV" "$T/etcdstrict.$n.out"; done
BACKEND= EP=

# 6. An interpreter too slow to answer costs at most --env_check_timeout: b's
# has no torch where its path is derived from (its name says no version), so
# it is asked, and it answers only after 20 s; b's descriptor goes without a
# fingerprint after 0.5 s, nothing is compared, the job runs at once.
mkdir -p "$T/bare/proc/driver/nvidia/gpus" "$T/bare/site"
cat >"$T/slowpy" <<EOF
#!/bin/sh
[ "\$1" = -S ] && exec sleep 20
exec "$PYTHON" "\$@"
EOF
chmod +x "$T/slowpy"
JOB=slow; PYX_b="$T/slowpy"; t0=$(now_ms)
pair n1 bare --env_check=strict --env_check_timeout=0.5
el=$(( $(now_ms) - t0 )); PYX_b=
note "slow interpreter: the job took $el ms"
expect_eq "slow: exit statuses" "$rc_a $rc_b" "0 0"
expect_grep "slow: b says so" "fingerprint was not ready after 0.5 s" "$T/slow.b.out"
[ "$el" -lt 15000 ] || fail "slow: the job took $el ms (the interpreter's 20 s were waited for)"

# 6b. torch/version.py on the workers' path is a FIFO nobody writes (a hung
# NFS or FUSE mount blocks a read the same way): it is not waited for, the
# job succeeds and both nodes exit at once (rather than hang after success).
mkdir -p "$T/fifo/proc/driver/nvidia/gpus" "$T/fifo/site/torch"
mkfifo "$T/fifo/site/torch/version.py"
JOB=fifo; t0=$(now_ms)
pair fifo fifo
el=$(( $(now_ms) - t0 ))
note "a FIFO on the path: the job took $el ms"
expect_eq "fifo: exit statuses" "$rc_a $rc_b" "0 0"
expect_grep "fifo: a's worker succeeded" "succeeded" "$T/fifo.a.out"
[ "$el" -lt 20000 ] || fail "fifo: the job took $el ms"

# 7. Forged records in a store anyone can write: refused with the key named.
"$CRUN" store --port 0 --host 127.0.0.1 2>"$T/store.err" &
spid=$!
at_exit "kill $spid"
wait_for 10 grep -q 'listening on' "$T/store.err" || fail "crun store never listened"
SPORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$T/store.err" | head -n 1)
# forged JOB EXPECTED-MESSAGE KEY=VALUE...: seed the keys, run one agent that
# arrives second (and closes), expect a clean exit 1 and the message.
forged() {
	job=$1 want=$2; shift 2
	set -- set crun/job "$job" "$@"
	$RAW 127.0.0.1 "$SPORT" "$@" >/dev/null || fail "$job: cannot seed the store"
	timeout 30 "$CRUN" --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$SPORT" --rdzv_id="$job" \
		--rdzv_conf=join_timeout=10 /bin/true >"$T/$job.out" 2>&1
	rc=$?
	[ $rc -lt 128 ] || { cat "$T/$job.out" >&2; fail "$job: agent died of signal $((rc - 128))"; }
	[ $rc -ne 124 ] || { cat "$T/$job.out" >&2; fail "$job: agent hung"; }
	expect_eq "$job: exit status" $rc 1
	expect_grep "$job: message" "$want" "$T/$job.out"
}
ESC=$(printf '\033')
forged fpjunk "malformed rendezvous record 'crun/fpjunk/r0/node/1' written by evil: fingerprint item 'torch' has a byte outside" \
	set crun/fpjunk/r0/join 1 set crun/fpjunk/r0/expect 2 \
	set crun/fpjunk/r0/node/1 "0 0 1 1 evil 10.0.0.9 default env=torch:2.1${ESC}[2J"
LONG=$(head -c 200 /dev/zero | tr '\0' 9)
forged fplong "malformed rendezvous record 'crun/fplong/r0/node/1' written by evil: fingerprint item 'driver' longer than 63 bytes" \
	set crun/fplong/r0/join 1 set crun/fplong/r0/expect 2 \
	set crun/fplong/r0/node/1 "0 0 1 1 evil 10.0.0.9 default env=driver:$LONG"
HUGE=$(head -c 5000 /dev/zero | tr '\0' x)
forged fphuge "malformed rendezvous record 'crun/fphuge/r0/node/1'.*record of [0-9]* bytes (at most 1024)" \
	set crun/fphuge/r0/join 1 set crun/fphuge/r0/expect 2 \
	set crun/fphuge/r0/node/1 "0 0 1 1 evil 10.0.0.9 default env=$HUGE"
forged fpitem "malformed rendezvous record 'crun/fpitem/r0/node/1' written by evil: unknown fingerprint item 'python'" \
	set crun/fpitem/r0/join 1 set crun/fpitem/r0/expect 2 \
	set crun/fpitem/r0/node/1 "0 0 1 1 evil 10.0.0.9 default env=torch:2.1,python:3.11"
# The closer's record, forged: a node that reads it stops, naming it.
forged ecjunk "malformed rendezvous record 'crun/ecjunk/r0/envcheck'.*printable ASCII" \
	set crun/ecjunk/r0/assigned ok set crun/ecjunk/r0/closed 1 set crun/ecjunk/r0/addrs 127.0.0.1 \
	set crun/ecjunk/r0/assign/1 "0 1 0 1 0 1 1" set crun/ecjunk/r0/envcheck "nodes differ${ESC}]0;owned${ESC}\\"
exit 0

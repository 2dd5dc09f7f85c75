#!/bin/sh
# The worker contract: the exact environment every worker of a single-node
# group sees, ${local_rank} substitution, and unique run ids.
. tests/integration/lib.sh

# Inherited NCCL setting must be kept; OMP_NUM_THREADS unset must become 1.
unset OMP_NUM_THREADS TORCH_NCCL_ASYNC_ERROR_HANDLING PET_NPROC_PER_NODE
NCCL_ASYNC_ERROR_HANDLING=0 "$CRUN" --standalone --nproc_per_node=3 --max_restarts=2 \
	--role=trainer --log_dir="$T/logs" --rdzv_id=ignored-by-standalone \
	"$FAKE_WORKER" env "$T/env" append "$T/args" "arg-\${local_rank}" \
	>"$T/out" 2>&1 || fail "crun exited $?: $(cat "$T/out")"

for r in 0 1 2; do
	f="$T/env.$r"
	[ -f "$f" ] || fail "worker $r wrote no environment"
	v() { sed -n "s/^$1=//p" "$f"; }
	expect_eq "LOCAL_RANK of $r" "$(v LOCAL_RANK)" "$r"
	expect_eq "RANK of $r" "$(v RANK)" "$r"
	expect_eq "GROUP_RANK" "$(v GROUP_RANK)" 0
	expect_eq "ROLE_RANK" "$(v ROLE_RANK)" "$r"
	expect_eq "ROLE_NAME" "$(v ROLE_NAME)" trainer
	expect_eq "LOCAL_WORLD_SIZE" "$(v LOCAL_WORLD_SIZE)" 3
	expect_eq "WORLD_SIZE" "$(v WORLD_SIZE)" 3
	expect_eq "GROUP_WORLD_SIZE" "$(v GROUP_WORLD_SIZE)" 1
	expect_eq "ROLE_WORLD_SIZE" "$(v ROLE_WORLD_SIZE)" 3
	expect_eq "TORCHELASTIC_RESTART_COUNT" "$(v TORCHELASTIC_RESTART_COUNT)" 0
	expect_eq "TORCHELASTIC_MAX_RESTARTS" "$(v TORCHELASTIC_MAX_RESTARTS)" 2
	expect_eq "NCCL_ASYNC_ERROR_HANDLING (inherited)" "$(v NCCL_ASYNC_ERROR_HANDLING)" 0
	expect_eq "TORCH_NCCL_ASYNC_ERROR_HANDLING" "$(v TORCH_NCCL_ASYNC_ERROR_HANDLING)" 1
	expect_eq "OMP_NUM_THREADS" "$(v OMP_NUM_THREADS)" 1
	expect_eq "TORCHELASTIC_SIGNALS_TO_HANDLE" "$(v TORCHELASTIC_SIGNALS_TO_HANDLE)" "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
	# The agent serves the workers' store by default (as torchrun 2.x does).
	expect_eq "TORCHELASTIC_USE_AGENT_STORE" "$(v TORCHELASTIC_USE_AGENT_STORE)" True
	expect_eq "MASTER_ADDR" "$(v MASTER_ADDR)" 127.0.0.1
	port=$(v MASTER_PORT)
	[ "$port" -gt 0 ] && [ "$port" -lt 65536 ] || fail "MASTER_PORT '$port'"
	id=$(v TORCHELASTIC_RUN_ID)
	[ -n "$id" ] && [ "$id" != none ] || fail "TORCHELASTIC_RUN_ID '$id'"
	ef=$(v TORCHELASTIC_ERROR_FILE)
	expect_eq "TORCHELASTIC_ERROR_FILE" "$ef" "$(echo "$T/logs/${id}"_*)/attempt_0/$r/error.json"
	[ -d "$(dirname "$ef")" ] || fail "error file directory $(dirname "$ef") missing"
done
# Every worker agrees on the run id and port.
expect_eq "one run id" "$(sed -n 's/^TORCHELASTIC_RUN_ID=//p' "$T"/env.* | sort -u | wc -l)" 1
expect_eq "one port" "$(sed -n 's/^MASTER_PORT=//p' "$T"/env.* | sort -u | wc -l)" 1
expect_eq "notice about OMP_NUM_THREADS" "$(grep -c OMP_NUM_THREADS "$T/out")" 1
# ${local_rank} substitution in arguments.
expect_eq "substituted args" "$(sort "$T/args" | tr '\n' ' ')" "arg-0 0 0 arg-1 1 0 arg-2 2 0 "

# A second standalone run gets a different run id.
"$CRUN" --standalone --nproc_per_node=1 "$FAKE_WORKER" env "$T/env2" || fail "second run"
id2=$(sed -n 's/^TORCHELASTIC_RUN_ID=//p' "$T/env2.0")
[ "$id2" != "$id" ] || fail "run ids repeat: $id"
[ "$id" != ignored-by-standalone ] || fail "--standalone must pick a fresh run id"

# Without --standalone, an explicit --rdzv_id is the run id; PET_ fallbacks work.
PET_NPROC_PER_NODE=2 OMP_NUM_THREADS=7 "$CRUN" --rdzv-id=myjob "$FAKE_WORKER" env "$T/env3" || fail "PET run"
expect_eq "PET_NPROC_PER_NODE" "$(ls "$T"/env3.* | wc -l)" 2
expect_eq "run id" "$(sed -n 's/^TORCHELASTIC_RUN_ID=//p' "$T/env3.1")" myjob
expect_eq "OMP_NUM_THREADS kept" "$(sed -n 's/^OMP_NUM_THREADS=//p' "$T/env3.1")" 7

# A .py entrypoint runs as $PYTHON -u SCRIPT, -m as $PYTHON -u -m MODULE.
# With --no_agent_store the agent reserves MASTER_PORT and hands it over
# free: worker rank 0 binds it (as its own TCPStore would), rank 1 reaches it.
cat >"$T/probe.py" <<'EOF'
import os, socket, sys, time
rank = int(os.environ["RANK"])
argv = open("/proc/self/cmdline", "rb").read().split(b"\0")[:-1]
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
out = open("%s.%d" % (sys.argv[1], rank), "w")
out.write("argv=%s\nstore=%s\n" % (" ".join(a.decode() for a in argv[:4]), os.environ["TORCHELASTIC_USE_AGENT_STORE"]))
if rank == 0:
    s = socket.socket()
    # As c10d's TCPStore does: SO_REUSEADDR shares the agent's reservation.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen()
    s.settimeout(20)
    c, _ = s.accept()
    out.write("rank 1 said %s\n" % c.recv(16).decode())
else:
    for _ in range(200):
        try:
            c = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            time.sleep(0.05)
    c.sendall(b"hello")
out.close()
EOF
"$CRUN" --nproc_per_node=2 --no_agent_store "$T/probe.py" "$T/py" >"$T/py.out" 2>&1 ||
	fail "--no_agent_store .py run exited $?: $(cat "$T/py.out")"
expect_eq ".py runs as PYTHON -u" "$(sed -n 's/^argv=//p' "$T/py.0")" "$PYTHON -u $T/probe.py $T/py"
expect_eq "no agent store" "$(sed -n 's/^store=//p' "$T/py.1")" False
expect_eq "rank 0 served MASTER_PORT, rank 1 reached it" "$(sed -n 's/^rank 1 said //p' "$T/py.0")" hello
cp "$T/probe.py" "$T/probemod.py"
PYTHONPATH="$T" "$CRUN" --nproc_per_node=2 --no_agent_store -m probemod "$T/m" >"$T/m.out" 2>&1 ||
	fail "-m run exited $?: $(cat "$T/m.out")"
expect_eq "-m runs as PYTHON -u -m" "$(sed -n 's/^argv=//p' "$T/m.1")" "$PYTHON -u -m probemod"
expect_eq "-m: rank 1 reached rank 0" "$(sed -n 's/^rank 1 said //p' "$T/m.0")" hello
exit 0

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
	case "$(v TORCHELASTIC_USE_AGENT_STORE)" in True|False) ;; *) fail "TORCHELASTIC_USE_AGENT_STORE='$(v TORCHELASTIC_USE_AGENT_STORE)'";; esac
	expect_eq "MASTER_ADDR" "$(v MASTER_ADDR)" 127.0.0.1
	port=$(v MASTER_PORT)
	[ "$port" -gt 0 ] && [ "$port" -lt 65536 ] || fail "MASTER_PORT '$port'"
	id=$(v TORCHELASTIC_RUN_ID)
	[ -n "$id" ] && [ "$id" != none ] || fail "TORCHELASTIC_RUN_ID '$id'"
	ef=$(v TORCHELASTIC_ERROR_FILE)
	expect_eq "TORCHELASTIC_ERROR_FILE" "$ef" "$T/logs/$id/attempt_0/$r/error.json"
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
exit 0

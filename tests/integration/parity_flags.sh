#!/bin/sh
# torchrun 2.x's flags: --virtual-local-rank gives each worker LOCAL_RANK=0
# and only its own device (the n-th entry of this node's list, per vendor);
# --duplicate-std{out,err}-filters copy matching lines (prefixed, whole) to
# <attempt>/filtered_std{out,err}.log whether or not the stream is redirected;
# --logs-specs=default is accepted (torchrun's own layout), other names are
# refused (cli.sh); --event-log-handler=console is accepted with one line saying
# what crun does instead; --numa-binding is applied (binding.sh); bad values
# exit 2.
. tests/integration/lib.sh
export CRUN_NVIDIA_PROC=/nonexistent CRUN_SYSFS=$T/sys
unset CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES ZE_AFFINITY_MASK

cat >"$T/dump.sh" <<'EOF2'
#!/bin/sh
env >"$1.$RANK"
EOF2
chmod +x "$T/dump.sh"
v() { sed -n "s/^$1=//p" "$2"; }

# --- virtual local rank: NVIDIA (or nothing found): CUDA_VISIBLE_DEVICES ---
CUDA_VISIBLE_DEVICES=3,5,7 "$CRUN" --standalone --nproc_per_node=3 --virtual-local-rank \
	"$T/dump.sh" "$T/cu" >"$T/o1" 2>&1 || fail "virtual local rank run failed"
for r in 0 1 2; do
	expect_eq "LOCAL_RANK of rank $r" "$(v LOCAL_RANK "$T/cu.$r")" 0
	expect_eq "RANK $r kept" "$(v RANK "$T/cu.$r")" "$r"
done
expect_eq "rank 0's device" "$(v CUDA_VISIBLE_DEVICES "$T/cu.0")" 3
expect_eq "rank 2's device" "$(v CUDA_VISIBLE_DEVICES "$T/cu.2")" 7
"$CRUN" --standalone --nproc_per_node=2 --virtual_local_rank "$T/dump.sh" "$T/n" >/dev/null 2>&1
expect_eq "no list: the local rank" "$(v CUDA_VISIBLE_DEVICES "$T/n.1")" 1
"$CRUN" --standalone --nproc_per_node=2 "$T/dump.sh" "$T/plain" >/dev/null 2>&1
expect_eq "without the flag LOCAL_RANK is the local rank" "$(v LOCAL_RANK "$T/plain.1")" 1

# AMD (fake KFD topology with 2 GPUs): HIP_VISIBLE_DEVICES.
for n in 1 2; do mkdir -p "$T/sys/class/kfd/kfd/topology/nodes/$n"; echo 77$n >"$T/sys/class/kfd/kfd/topology/nodes/$n/gpu_id"; done
ROCR_VISIBLE_DEVICES=1,0 "$CRUN" --standalone --nproc_per_node=gpu --virtual-local-rank \
	"$T/dump.sh" "$T/amd" >"$T/o2" 2>&1 || { cat "$T/o2"; fail "AMD run failed"; }
expect_eq "AMD: rank 0 sees ROCR's first entry" "$(v HIP_VISIBLE_DEVICES "$T/amd.0")" 1
expect_eq "AMD: rank 1" "$(v HIP_VISIBLE_DEVICES "$T/amd.1")" 0
rm -rf "$T/sys"

# --- duplicate filters ---------------------------------------------------------
cat >"$T/talk.sh" <<'EOF2'
#!/bin/sh
echo "step 1 loss,x 0.5"
echo "nothing here"
echo "epoch 2 done"
echo "warn: disk" >&2
echo "fine" >&2
EOF2
chmod +x "$T/talk.sh"
"$CRUN" --standalone --nproc_per_node=2 --log_dir="$T/logs" -r 1 \
	--duplicate-stdout-filters='loss,,x,epoch' --duplicate-stderr-filters=warn \
	"$T/talk.sh" >"$T/o3" 2>&1 || fail "filters run failed"
F=$(echo "$T"/logs/*/attempt_0)
expect_eq "filtered stdout lines" "$(wc -l <"$F/filtered_stdout.log")" 4
expect_grep "',,' is a literal comma" '^\[default1\]:step 1 loss,x 0.5$' "$F/filtered_stdout.log"
expect_grep "second filter" '^\[default0\]:epoch 2 done$' "$F/filtered_stdout.log"
expect_nogrep "unmatched line not copied" "nothing here" "$F/filtered_stdout.log"
expect_eq "filtered stderr" "$(cat "$F/filtered_stderr.log" | sort | tr '\n' ' ')" "[default0]:warn: disk [default1]:warn: disk "
expect_eq "redirected stdout still complete" "$(wc -l <"$F/1/stdout.log")" 3
expect_nogrep "-r 1 keeps stdout off the console" "nothing here" "$T/o3"
expect_grep "stderr still on the console" "^fine$" "$T/o3"

# --- accepted with a notice; bad values refused -------------------------------
"$CRUN" --standalone --numa-binding=socket --logs-specs=default --event-log-handler=console \
	"$FAKE_WORKER" exit 0 >"$T/o4" 2>&1 || fail "notices run failed"
expect_nogrep "numa binding applied, no notice" "not applied" "$T/o4"
expect_nogrep "logs_specs=default: what crun does, no notice" "logs_specs" "$T/o4"
expect_grep "event_log_handler notice" "event_log_handler=console: crun says each" "$T/o4"
"$CRUN" --numa-binding=bogus "$FAKE_WORKER" exit 0 >"$T/o5" 2>&1
expect_eq "bad numa binding" "$?" 2
expect_grep "bad numa binding named" "argument --numa_binding: invalid value 'bogus'" "$T/o5"
"$CRUN" --duplicate-stdout-filters="$(head -c 300 /dev/zero | tr '\0' a)" "$FAKE_WORKER" exit 0 >"$T/o6" 2>&1
expect_eq "oversized filter" "$?" 2
"$CRUN" --v >"$T/o7" 2>&1
expect_eq "--v is ambiguous (version, virtual-local-rank)" "$?" 2
exit 0

#!/bin/sh
# needs: torchrun
# Command lines that tools and READMEs write, run as they are under the
# torchrun of $PYTHON's PyTorch (tests/run.sh runs this once per interpreter
# of TORCHRUN_REFS: Debian's 1.13, 2.13, 2.14) and under crun: the training
# script is a probe that records its argv and worker contract, rank by rank,
# and prints one line; both launchers must exit the same, give every rank the
# same argv and contract, and show the same console lines. A case runs only
# where this torchrun has its flags. Intended differences (compared for
# presence only): MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RUN_ID where the
# launcher picks them (--standalone, a free port), and with torchrun 1.13
# TORCHELASTIC_USE_AGENT_STORE, as parity.sh says.
. tests/integration/lib.sh
need_torch
TORCHRUN="$PYTHON $TOP/tests/helpers/torchrun.py"
V=$("$PYTHON" -c 'import torch; print(torch.__version__)')
"$PYTHON" tests/integration/py/torchrun_flags.py >"$T/flags.all" ||
	fail "cannot read torchrun $V's flags"
cut -d'|' -f1 "$T/flags.all" | tr ' ' '\n' >"$T/flags"
has() { grep -qx -- "$1" "$T/flags"; }

mkdir "$T/w"
cat >"$T/w/probe.py" <<'EOF'
import json, os, sys
KEYS = ("RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE "
        "ROLE_RANK ROLE_NAME ROLE_WORLD_SIZE MASTER_ADDR MASTER_PORT "
        "TORCHELASTIC_RUN_ID TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS "
        "TORCHELASTIC_USE_AGENT_STORE").split()
rec = {"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in KEYS}}
with open(os.path.join(os.environ["PROBE_OUT"], "rank." + os.environ["RANK"]), "w") as f:
    json.dump(rec, f, sort_keys=True)
# One write: under PYTHONUNBUFFERED print() writes its pieces apart, and the
# ranks of a torchrun without prefixes share one console.
sys.stdout.write("hello from rank %s\n" % os.environ["RANK"])
sys.stdout.flush()
EOF
cp "$T/w/probe.py" "$T/w/probe_mod.py"

# launch WHO NAME ARGS...: one launcher (torchrun or crun) in a clean
# environment from $T/w; records in $T/NAME.WHO/, console in .out, status .rc.
launch() {
	who=$1 name=$2; shift 2
	d="$T/$name.$who"; mkdir -p "$d"
	if [ "$who" = crun ]; then set -- "$CRUN" "$@"; else set -- $TORCHRUN "$@"; fi
	(cd "$T/w" && env -i PATH="$PATH" HOME="$T" TMPDIR="$T" PYTHON="$PYTHON" \
		PROBE_OUT="$d" ${EXTRA_ENV:-} "$@") >"$d.out" 2>&1
	echo $? >"$d.rc"
}

# records WHO NAME: each rank's record, launcher-picked values blanked.
records() {
	"$PYTHON" - "$T/$2.$1" "${FIXED:-}" "$V" <<'EOF'
import json, os, sys
d, fixed = sys.argv[1], sys.argv[2].split()
# torchrun 1.13 --standalone leaves the store to rank 0; crun does as 2.x.
AS_1_13 = ("TORCHELASTIC_USE_AGENT_STORE",) if sys.argv[3].startswith("1.") else ()
for f in sorted(os.listdir(d)):
    r = json.load(open(os.path.join(d, f)))
    for k in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID") + AS_1_13:
        if k not in fixed:
            r["env"][k] = "<set>" if r["env"][k] else None
    print(f, json.dumps(r, sort_keys=True))
EOF
}

# both NAME ARGS...: run under torchrun and crun, compare.
both() {
	name=$1; shift
	launch torch "$name" "$@"
	launch crun "$name" "$@"
	expect_eq "$name: exit status (crun vs torchrun $V; $(tail -n 2 "$T/$name.crun.out" | tr '\n' ' '))" \
		"$(cat "$T/$name.crun.rc")" "$(cat "$T/$name.torch.rc")"
	records torch "$name" >"$T/$name.torch.rec"
	records crun "$name" >"$T/$name.crun.rec"
	[ -s "$T/$name.torch.rec" ] || { cat "$T/$name.torch.out" >&2; fail "$name: no rank ran under torchrun $V"; }
	cmp -s "$T/$name.torch.rec" "$T/$name.crun.rec" ||
		fail "$name: the workers see another argv or contract: $(diff "$T/$name.torch.rec" "$T/$name.crun.rec" | head -n 4)"
	for w in torch crun; do grep 'hello from rank' "$T/$name.$w.out" | sort >"$T/$name.$w.con"; done
	cmp -s "$T/$name.torch.con" "$T/$name.crun.con" ||
		fail "$name: other console lines: $(diff "$T/$name.torch.con" "$T/$name.crun.con" | head -n 4 | tr '\n' ' ')"
	cases="$cases $name"
}
cases=""

# TorchX's dist.ddp component (torchx/components/dist.py): --role '' --tee 3.
has --role && has --tee && both role_empty --nnodes=1 --nproc_per_node=2 --role '' --tee 3 probe.py
# ... and on two nodes (crun: the role travels in each node's descriptor);
# crun alone, so once: under the first reference interpreter.
if [ "$PYTHON" = "$(echo ${TORCHRUN_REFS:-$PYTHON} | cut -d' ' -f1)" ]; then
P=$(free_port)
mkdir "$T/two"
for n in 0 1; do
	(cd "$T/w" && PROBE_OUT="$T/two" "$CRUN" --nnodes=2 --nproc_per_node=$((n + 1)) --role '' \
		--rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$P" --rdzv_id=roles probe.py \
		>"$T/two.$n.out" 2>&1; echo $? >"$T/two.$n.rc") &
done
wait
for n in 0 1; do expect_eq "two nodes, --role '': node $n's status ($(tail -n 1 "$T/two.$n.out"))" "$(cat "$T/two.$n.rc")" 0; done
for r in 0 1 2; do
	grep -q '"ROLE_NAME": "", "ROLE_RANK": "'$r'", "ROLE_WORLD_SIZE": "3"' "$T/two/rank.$r" ||
		fail "two nodes, --role '': rank $r: $(cat "$T/two/rank.$r")"
done
fi
# PyTorch's own launcher test (test/distributed/launcher/test_run.py) and
# Kubernetes args: lists pass the quotes inside the argument.
both rdzv_conf_quoted --standalone --nproc_per_node=2 \
	"--rdzv_conf='join_timeout=5,last_call_timeout=1,timeout=5'" probe.py
grep -q "quotes around the value or its items removed" "$T/rdzv_conf_quoted.crun.out" ||
	fail "rdzv_conf_quoted: crun does not say it removed the quotes"
# karpathy/nanochat's speedrun.sh: -m MODULE -- ARGS; the same after a script.
both module_dashdash --standalone --nproc_per_node=1 -m probe_mod -- --depth=26 --run=x
both script_dashdash --standalone --nproc_per_node=1 probe.py -- --depth=26 -- x
both dashdash_first --standalone --nproc_per_node=1 -- probe.py -- x
# torchtitan's SkyPilot script: --local-ranks-filter -1 on nodes that print nothing.
if has --local-ranks-filter; then
	both filter_none --standalone --nproc_per_node=2 --local-ranks-filter -1 probe.py
	[ ! -s "$T/filter_none.crun.con" ] || fail "filter_none: a rank's line reached crun's console"
fi
# pytorch/examples' single-node static launch, the port only in the endpoint.
P=$(free_port)
FIXED=MASTER_PORT
both static_port --nnodes=1 --nproc_per_node=2 --rdzv_backend=static \
	--rdzv_endpoint="localhost:$P" probe.py
FIXED=""
grep -q "\"MASTER_PORT\": \"$P\"" "$T/static_port.crun.rec" || fail "static_port: MASTER_PORT is not $P"
# torchrun 2.14's prefix template, as the flag and as the environment variable.
if has --log-line-prefix-template; then
	both prefix_flag --standalone --nproc_per_node=2 --tee 3 \
		--log-line-prefix-template '${hostname}:${rank}: ' probe.py
	grep -q "^$(hostname):1: hello from rank 1" "$T/prefix_flag.crun.out" ||
		fail "prefix_flag: no '$(hostname):1: ' line"
fi
if "$PYTHON" -c 'import sys, torch.distributed.run as r; sys.exit("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE" not in open(r.__file__).read())'; then
	EXTRA_ENV='TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=<${role_name}:${local_rank}>'
	both prefix_env --standalone --nproc_per_node=2 --tee 3 probe.py
	EXTRA_ENV=""
	grep -q "^<default:0>hello from rank 0" "$T/prefix_env.crun.out" || fail "prefix_env: no '<default:0>' line"
fi
# More command lines as projects' own files write them (GPU counts made 2,
# node counts 1, the entry point the probe, ports free ones): SOURCE|ARGS,
# ARGS in shell quoting, @P a free port. A line runs where this torchrun has
# all its flags.
# They run against torchrun 2.x only (2.13, 2.14: what projects write for),
# which keeps CI in its time; 1.13 runs the cases above.
P=$(free_port)
n=0
while IFS='|' read -r src args; do
	case "$src" in '' | '#'*) continue ;; esac
	case "$V" in 1.*) continue ;; esac
	eval "set -- $(echo "$args" | sed "s/@P/$P/g")"
	skip=""
	for w in "$@"; do # torchrun's own flags: those before the entry point
		case "$w" in probe.py | -m) break ;; --*) has "${w%%=*}" || skip=$w ;; esac
	done
	[ -z "$skip" ] || continue
	n=$((n + 1))
	both "real$n" "$@"
done <<'EOF'
pytorch/torchtitan run_train.sh|--nproc_per_node=2 --rdzv_backend c10d --rdzv_endpoint=localhost:0 --local-ranks-filter 0 --role rank --tee 3 -m probe_mod --job.config_file x.toml
pytorch/torchchat run_dist.sh|--nproc-per-node=2 --master_port=@P --local-ranks-filter 0,1 --role rank --tee 3 probe.py --pp 2 llama3
pytorch/torchtitan run_8node.sh|--nproc_per_node 2 --rdzv_backend c10d --rdzv_id 101 --rdzv_endpoint 127.0.0.1:@P --local-ranks-filter 0 probe.py --job.config_file x.toml
karpathy/nanoGPT README, one node|--standalone --nproc_per_node=2 probe.py config/train_gpt2.py
karpathy/nanoGPT README, master node|--nproc_per_node=2 --nnodes=1 --node_rank=0 --master_addr=127.0.0.1 --master_port=@P probe.py
pytorch/examples ddp-tutorial-series|--standalone --nproc_per_node=2 probe.py 50 10
pytorch/examples distributed/ddp elastic|--nnodes=1 --nproc_per_node=2 --rdzv_id=100 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:@P probe.py
pytorch/tutorials ddp_tutorial|--nnodes=1 --nproc_per_node=2 --rdzv_id=100 --rdzv_backend=c10d --rdzv_endpoint=localhost:@P probe.py
huggingface/transformers examples README|--nproc_per_node 2 probe.py --model_name_or_path gpt2 --do_train --output_dir out
huggingface/accelerate docs|--nproc_per_node 2 probe.py
Lightning-AI docs, torchrun|--nproc_per_node=2 --nnodes=1 --node_rank 0 --master_addr localhost --master_port @P probe.py
NVIDIA/Megatron-LM examples|--nproc_per_node 2 --nnodes 1 --node_rank 0 --master_addr localhost --master_port @P probe.py --tensor-model-parallel-size 1
meta-pytorch/torchx dist.ddp|--rdzv_backend c10d --rdzv_endpoint localhost:@P --rdzv_id x --nnodes 1 --nproc_per_node 2 --tee 3 --role '' probe.py
pytorch test/distributed/launcher/test_run.py|--nnodes=1 --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=localhost:@P "--rdzv-conf='join_timeout=5,last_call_timeout=1,timeout=5'" --max-restarts=0 --start-method=spawn probe.py
SLURM job scripts, srun torchrun|--nnodes 1 --nproc_per_node 2 --rdzv_id 4242 --rdzv_backend c10d --rdzv_endpoint localhost:@P probe.py
meta-llama/llama README|--nproc_per_node 1 probe.py --ckpt_dir llama-2-7b-chat/ --tokenizer_path tokenizer.model --max_seq_len 512 --max_batch_size 6
tatsu-lab/stanford_alpaca README|--nproc_per_node=2 --master_port=@P probe.py --model_name_or_path m --data_path ./alpaca_data.json --bf16 True --output_dir out --fsdp "full_shard auto_wrap" --fsdp_transformer_layer_cls_to_wrap 'LlamaDecoderLayer' --tf32 True
lm-sys/FastChat docs/training.md|--nproc_per_node=2 --master_port=@P probe.py --model_name_or_path lmsys/vicuna-7b-v1.5 --data_path data/dummy_conversation.json --bf16 True --output_dir output_vicuna --evaluation_strategy "no" --lr_scheduler_type "cosine"
meta-llama/llama-recipes README|--nnodes 1 --nproc_per_node 2 probe.py --enable_fsdp --model_name /path_of_model_folder/8B --use_peft --peft_method lora --output_dir Path/to/save/PEFT/model
pytorch/vision references/classification README|--nproc_per_node=2 probe.py --model resnet50 --batch-size 32 --lr 0.1
pytorch/vision references/detection README|--nproc_per_node=2 probe.py --dataset coco --model fasterrcnn_resnet50_fpn --epochs 26 --lr-steps 16 22 --weights-backbone ResNet50_Weights.IMAGENET1K_V1
huggingface/pytorch-image-models distributed_train.sh|--nproc_per_node=2 probe.py --model resnet50 --amp
ultralytics/yolov5 README (python -m torch.distributed.run)|--nproc_per_node 2 probe.py --batch 64 --data coco.yaml --weights yolov5s.pt --device 0,1
skypilot-org/skypilot examples distributed_ddp|--nnodes=1 --nproc_per_node=2 --master_addr=127.0.0.1 --master_port=@P --node_rank=0 probe.py
volcengine/verl examples/sft run script|--standalone --nnodes=1 --nproc_per_node=2 -m probe_mod data.train_files=train.parquet data.micro_batch_size_per_gpu=4 model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct trainer.total_epochs=1
EOF
# Kubeflow Trainer's PyTorchJob sets PET_* and runs a plain `torchrun SCRIPT`.
EXTRA_ENV="PET_NNODES=1 PET_NPROC_PER_NODE=2 PET_RDZV_BACKEND=c10d PET_RDZV_ENDPOINT=localhost:$P PET_RDZV_ID=kf"
both kubeflow_pet probe.py --epochs 1
EXTRA_ENV=""
case "$V" in 1.*) ;; *) [ "$n" -ge 20 ] || fail "only $n of the projects' command lines ran under torchrun $V" ;; esac
note "torchrun $V: same argv, contract, console and status:$cases"
exit 0

#!/bin/sh
# `make demo`: a real job on this machine. First 4 PyTorch workers on one node
# (gloo all_reduce + DistributedDataParallel through crun's own store), then
# the same script as a 2-node job on loopback with 2 + 1 workers (two agents
# meeting in a c10d rendezvous), each rank printing its result.
set -eu
BUILD=${BUILD:-build}
CRUN="$PWD/$BUILD/crun"
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
SCRIPT=tests/integration/py/ddp_gloo.py

"$PYTHON" -c 'import torch.distributed' 2>/dev/null || {
	echo "demo: $PYTHON has no PyTorch (run scripts/install-deps.sh as root)" >&2
	exit 1
}

echo "== crun --standalone --nproc_per_node=4 $SCRIPT"
"$CRUN" --standalone --nproc_per_node=4 --tee=3 "$SCRIPT"

PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo
echo "== two nodes on this machine: 2 + 1 workers, c10d rendezvous at 127.0.0.1:$PORT"
"$CRUN" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=demo --tee=3 --role=nodeA "$SCRIPT" &
first=$!
# Let the first agent bind the endpoint, so it hosts the store (group rank 0).
n=0
while ! ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && [ $n -lt 100 ]; do
	sleep 0.05; n=$((n + 1))
done
"$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=demo --tee=3 --role=nodeB "$SCRIPT"
wait $first

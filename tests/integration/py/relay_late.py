"""A gloo worker for relay.sh's store-host lifetime case: after
init_process_group, group rank 0's workers (whose node serves the workers'
store) finish at once; every other worker sleeps --late seconds and then sets
and reads back a key in the job's store, as a worker that checkpoints or
logs through the store after its peers finished does. It writes
DIR/late.<RANK> ("ok" or the error) and exits 0 if the store answered, 7 if
not."""
import argparse
import os
import sys
import time

import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--late", type=float, default=3.0)
    args = ap.parse_args()
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    if os.environ["GROUP_RANK"] == "0":
        return 0
    time.sleep(args.late)
    out = os.path.join(args.dir, "late.%d" % rank)
    try:
        store = dist.distributed_c10d._get_default_store()
        store.set("late/%d" % rank, "v%d" % rank)
        got = store.get("late/%d" % rank)
        if got != ("v%d" % rank).encode():
            raise RuntimeError("read back %r" % got)
    except Exception as e:  # the store is gone: say how
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        with open(out, "w") as f:
            f.write("failed: %s\n" % why)
        return 7
    with open(out, "w") as f:
        f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/bin/sh
# --env_check costs the rendezvous nothing: a 2-node job on loopback (two
# agents started at once, c10d, one worker each), RUNS times (default 20) for
# each of --env_check=warn (the default) and --env_check=off, taking turns;
# with CRUN_BASE set (a build of another commit), that binary too. From the
# agents' event logs, per run: the last "crun.rdzv.joining" to the last
# "crun.rdzv.closed" (the rendezvous proper), and the last
# "crun.agent.started" to it (start-up included). Entrypoints: /bin/true
# (the fingerprint is the driver's files, read at once) and a Python script
# (the workers' site-packages are read on a thread). Fails when warn's median
# rendezvous exceeds off's by more than 50 % + 10 ms (a wait on the
# fingerprint, not noise, would).
. tests/integration/lib.sh
RUNS=${RUNS:-20}
echo 'pass' >"$T/nop.py"

# run TAG CRUN [flags...] -- ENTRY: one job, logs in $T/TAG.{a,b}.$i.ev
run() {
	tag=$1 c=$2; shift 2
	port=$(free_port)
	for n in a b; do
		PYTHON_EXEC=$PYTHON "$c" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
			--rdzv_endpoint=127.0.0.1:$port --rdzv_id="$tag$i" \
			--event_log="$T/$tag.$n.$i.ev" "$@" >"$T/$tag.$n.out" 2>&1 &
	done
	wait
}
rc=0
for entry in /bin/true "$T/nop.py"; do
	tags="warn off${CRUN_BASE:+ base}"
	rm -f "$T"/*.ev # event logs append
	i=1
	while [ $i -le "$RUNS" ]; do
		run warn "$CRUN" "$entry"
		run off "$CRUN" --env_check=off "$entry"
		[ -z "${CRUN_BASE:-}" ] || run base "$CRUN_BASE" "$entry"
		i=$((i + 1))
	done
	echo "entrypoint $(basename "$entry"):"
	"$PYTHON" - "$T" "$RUNS" $tags <<'PY' || rc=1
import json, statistics, sys
T, N, tags = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = {}
for tag in tags:
    r1, r2 = [], []
    for i in range(1, N + 1):
        t = {}
        for n in "ab":
            for l in open(f"{T}/{tag}.{n}.{i}.ev"):
                e = json.loads(l)
                t.setdefault(e["name"], []).append(e["timestamp"])
        if len(t.get("crun.rdzv.closed", [])) != 2:
            continue
        r1.append((max(t["crun.rdzv.closed"]) - max(t["crun.rdzv.joining"])) * 1000)
        r2.append((max(t["crun.rdzv.closed"]) - max(t["crun.agent.started"])) * 1000)
    if not r1 or len(r1) < N // 2:
        sys.exit(f"{tag}: only {len(r1)} of {N} runs formed a round")
    med[tag] = statistics.median(r1)
    print("  %-4s rendezvous: median %6.1f ms, mean %6.1f | start to round: median %6.1f ms, mean %6.1f (n=%d)"
          % (tag, med[tag], statistics.mean(r1), statistics.median(r2), statistics.mean(r2), len(r1)))
if med["warn"] > med["off"] * 1.5 + 10:
    sys.exit("warn's rendezvous (%.1f ms) is slower than off's (%.1f ms)" % (med["warn"], med["off"]))
PY
done
exit $rc

#!/bin/sh
# PyTorch's own launcher tests, test/distributed/launcher/test_run.py and
# its bin/ scripts, as Debian's source of PyTorch 2.6 has them (fetched by
# scripts/debian-source.sh, checked against the .dsc's SHA-256, cached in
# /var/cache/crun-sources), with every torch.distributed.run.main(args) of
# the tests run as a command line (py/pytorch_launcher_tests.py): under the
# torchrun of each interpreter of TORCHRUN_REFS that has PyTorch 2 (2.13 and
# 2.14; the file needs 2.2 or newer, so Debian's 1.13 is not one of them) and
# under crun (workers on the first of them), all at once. Every test that
# passes under a torchrun must pass under crun. The tests that look at
# torchrun's internals through mocks (an agent, events.record or
# torch.cuda replaced in the test's own process) cannot pass through a
# command line; each torchrun must still pass the ones that launch for real
# (the standalone, elastic, multi-agent, env-var and log tests), or the
# comparison would prove nothing.
. tests/integration/lib.sh
[ -x "$CRUN" ] || fail "no crun at $CRUN (make BUILD=$BUILD)"

SRC=$(sh scripts/debian-source.sh pytorch 2.6.0+dfsg-7 \
	24783f3515b228ee476e788608ea0beea80409dbc8e861b6b8035c592d79646e \
	'test/distributed/launcher/*') || fail "cannot fetch PyTorch's source (scripts/debian-source.sh)"
cp -R "$SRC/test/distributed/launcher" "$T/launcher"
DRIVER=$TOP/tests/integration/py/pytorch_launcher_tests.py

# run LABEL PY LAUNCHER...: the tests under LAUNCHER, in the background;
# verdicts in $T/LABEL.json, output in $T/LABEL.log.
run() {
	_l=$1 _py=$2; shift 2
	mkdir "$T/tmp.$_l"
	(cd "$T" && env TMPDIR="$T/tmp.$_l" PYTHON="$_py" "$_py" "$DRIVER" \
		"$T/launcher/test_run.py" "$T/$_l.json" "$@" >"$T/$_l.log" 2>&1) &
	pids="$pids $!"
}

pids="" refs="" first=""
for py in $TORCHRUN_REFS; do
	v=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) ||
		fail "no importable torch in '$py' (TORCHRUN_REFS)"
	case $v in
	1.*) note "torch $v ($py): not a reference here (test_run.py of PyTorch 2.6 needs torch 2.2 or newer)"
		continue ;;
	esac
	"$py" -c 'import expecttest' 2>/dev/null ||
		fail "'$py' lacks expecttest, which PyTorch's test utilities import (tests/requirements*.txt)"
	refs="$refs torchrun-$v"
	run "torchrun-$v" "$py" "$py" -m torch.distributed.run
	[ -n "$first" ] || first=$py
done
[ -n "$first" ] || fail "no interpreter of TORCHRUN_REFS ('$TORCHRUN_REFS') has PyTorch 2"
run crun "$first" "$CRUN"
for p in $pids; do wait "$p"; done

"$first" - "$T" $refs <<'EOF' || { tail -n 60 "$T/crun.log" >&2; fail "crun fails tests that torchrun passes (above)"; }
import json, os, re, sys
t, refs = sys.argv[1], sys.argv[2:]
# Launched for real: a harness that failed them would compare nothing.
REAL = ("test_launch_standalone test_launch_elastic test_launch_elastic_multiple_agents "
        "test_launch_with_env_vars test_launch_user_script_bash "
        "test_capture_logs_using_default_logs_specs test_init_method_env_with_torchelastic").split()
def load(label):
    path = os.path.join(t, label + ".json")
    if not os.path.exists(path):
        sys.exit("%s: the run wrote no verdicts (%s.log)" % (label, label))
    return json.load(open(path))
crun, bad, shown = load("crun"), [], set()
for ref in refs:
    v = load(ref)
    if set(v) != set(crun):
        bad.append("%s and crun ran different tests: %s" % (ref, sorted(set(v) ^ set(crun))))
    for name in REAL:
        if v.get(name) != "pass":
            bad.append("%s: %s does not pass (%s): the harness is broken" % (ref, name, v.get(name)))
    passed = sorted(n for n in v if v[n] == "pass")
    lost = [n for n in passed if crun.get(n) != "pass"]
    for n in lost:
        bad.append("%s passes under %s, under crun: %s" % (n, ref, crun.get(n)))
        if n not in shown:  # what crun and the workers said, for the record
            shown.add(n)
            out = open(os.path.join(t, "crun.log"), errors="replace").read().splitlines()
            at = [i for i, l in enumerate(out) if l.startswith(n + " (")]
            if at:
                end = next((i for i in range(at[0] + 1, len(out))
                            if re.match(r"^test_\w+ \(", out[i])), len(out))
                print("--- %s under crun (crun.log):" % n, file=sys.stderr)
                print("\n".join(out[at[0]:end][-80:]), file=sys.stderr)
    print("   %s passes %d of %d; crun passes all of those%s" % (
        ref, len(passed), len(v), "" if not lost else " but %d" % len(lost)))
    for n in sorted(set(v) - set(passed)):
        print("     not compared, fails under %s too: %s: %s" % (ref, n, v[n][6:100]))
extra = sorted(n for n in crun if crun[n] == "pass" and all(load(r).get(n) != "pass" for r in refs))
if extra:
    print("   crun also passes: %s" % ", ".join(extra))
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

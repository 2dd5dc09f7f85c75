#!/bin/sh
# The wheel (scripts/wheel.sh) where users are, not only where it is built:
#   a. x86_64: built, `auditwheel show` names manylinux_2_28_x86_64, the
#      binary asks for no glibc symbol newer than 2.28
#   b. reproducible: a second build, from a copy of the tree at another path
#      with build folders of its own, gives the same crun bytes and the same
#      wheel
#   c. a fresh virtual environment, made and used by a user who is not root,
#      with no compiler on PATH: pip installs the wheel from its file, and
#      `crun` (and `python -m crun_launcher`) from that environment runs a
#      real two-node gloo job (two agents on loopback, PyTorch 2.13 seen
#      through a .pth file: nothing is compiled or downloaded)
#   f. in that venv, `accelerate launch --multi_gpu` (which calls
#      torch.distributed.run.run() in its own process) runs torchrun, and
#      with CRUN_TORCHRUN=1 (the wheel's opt-in hook) crun
#   d. Debian 13's root (scripts/debian-root.sh trixie, glibc 2.41): the
#      wheel's crun runs a standalone job with the root's PyTorch
#   g. Debian 11's root (glibc 2.31): a standalone job of Debian's PyTorch
#      1.7, older than the agent store (worker rank 0 hosts the store)
#   e. aarch64: cross-built, auditwheel names manylinux_2_28_aarch64, and it
#      runs under Debian's qemu-user-static with Debian 12's arm64 C library
#      (its .deb, fetched by apt for arm64): --version, and a standalone
#      job of two workers
. tests/integration/lib.sh
need_root "a user of its own, debootstrap, namespaces"
PY213=$TOP/.venv/bin/python
[ -x "$PY213" ] || fail "no $PY213 (make test-venv)"

# a. x86_64
WHL=$(sh scripts/wheel.sh x86_64 2>"$T/a.err" | tail -n 1) || { cat "$T/a.err" >&2; fail "a. scripts/wheel.sh x86_64 failed"; }
case $WHL in */crun_launcher-*-py3-none-manylinux_2_28_x86_64.whl) ;; *) fail "a. wheel named '$WHL'" ;; esac
grep -q "auditwheel: manylinux_2_28_x86_64" "$T/a.err" || fail "a. no auditwheel verdict: $(tail -n 3 "$T/a.err")"
mkdir "$T/a"
(cd "$T/a" && "$PY213" -m zipfile -e "$TOP/$WHL" .) || fail "a. cannot unpack $WHL"
BIN=$(echo "$T"/a/crun_launcher-*.data/scripts/crun)
# (zipfile -e keeps no modes: the entry's own must say executable)
mode=$("$PY213" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(oct([i.external_attr >> 16 for i in z.infolist() if i.filename.endswith(".data/scripts/crun")][0]))' "$TOP/$WHL")
expect_eq "a. the mode of crun in the wheel" "$mode" 0o100755
chmod 755 "$BIN"
newest=$(objdump -T "$BIN" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
[ "$(printf '%s\n2.28\n' "$newest" | sort -V | tail -n 1)" = 2.28 ] ||
	fail "a. the binary needs glibc $newest"
note "a. $(basename "$WHL"): $(wc -c <"$TOP/$WHL") bytes, crun $(wc -c <"$BIN") bytes, glibc $newest at most"

# b. reproducible
mkdir "$T/copy"
git ls-files -co --exclude-standard -z | xargs -0 tar -cf - | tar -xf - -C "$T/copy"
EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 315532800)
W2=$(cd "$T/copy" && SOURCE_DATE_EPOCH=$EPOCH WHEEL_VENV="$TOP/build-wheel/venv" \
	sh scripts/wheel.sh x86_64 2>"$T/b.err" | tail -n 1) || { cat "$T/b.err" >&2; fail "b. second build failed"; }
cmp "$TOP/build-wheel/x86_64/crun/crun" "$T/copy/build-wheel/x86_64/crun/crun" ||
	fail "b. two builds of one tree give different crun binaries"
SOURCE_DATE_EPOCH=$EPOCH sh scripts/wheel.sh x86_64 >/dev/null 2>"$T/b1.err" || fail "b. rebuild failed"
cmp "$TOP/$WHL" "$T/copy/$W2" || fail "b. two builds of one tree give different wheels"
note "b. two builds at two paths: same crun ($(sha256sum "$BIN" | cut -c1-16)), same wheel"

# c. a user's fresh venv
id crunwheel >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin crunwheel ||
	fail "c. cannot add the user crunwheel"
U=$T/user
mkdir -p "$U/bin" "$U/out" && cp "$TOP/$WHL" "$U/" && cp tests/integration/py/ddp_gloo.py "$U/"
# The commands a job needs, and nothing that compiles.
for c in sh env cat ls rm mkdir sleep true; do ln -s "$(command -v $c)" "$U/bin/$c"; done
chmod 755 "$T" && chown -R crunwheel "$U"
as_user() { setpriv --reuid=crunwheel --regid=nogroup --clear-groups --reset-env env HOME="$U" PATH="$U/venv/bin:$U/bin" "$@"; }
as_user /usr/bin/python3 -m venv "$U/venv" || fail "c. python3 -m venv as crunwheel failed"
as_user sh -c 'command -v cc || command -v gcc || command -v zig' && fail "c. a compiler is on the user's PATH"
as_user "$U/venv/bin/python" -m pip install -q --no-index --disable-pip-version-check "$U/$(basename "$WHL")" \
	>"$T/c.pip" 2>&1 || { cat "$T/c.pip" >&2; fail "c. pip install of the wheel failed"; }
SITE=$(as_user "$U/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The checkout may lie where the user cannot go (/root): its venv's packages
# are bound at a path of the user's, read-only.
mkdir "$U/torch213"
mount --bind -o ro "$("$PY213" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" "$U/torch213" ||
	fail "c. cannot bind the venv's site-packages"
at_exit "umount -l '$U/torch213'"
echo "$U/torch213" >"$SITE/torch213.pth"
[ "$(as_user sh -c 'command -v crun')" = "$U/venv/bin/crun" ] || fail "c. crun is not the venv's ($(as_user sh -c 'command -v crun'))"
expect_eq "c. python -m crun_launcher --version" "$(as_user "$U/venv/bin/python" -m crun_launcher --version)" \
	"$("$BIN" --version)"
[ -f "$U/venv/share/man/man1/crun.1" ] || fail "c. no man page in the venv"
port=$(free_port)
for n in 0 1; do
	(cd "$U" && as_user crun --nnodes=2 --node_rank=$n --nproc_per_node=2 \
		--rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$port --rdzv_id=wheel \
		ddp_gloo.py --out "$U/out" >"$T/c.$n.out" 2>&1; echo $? >"$T/c.$n.rc") &
	eval "p$n=\$!"
done
wait_pid 180 "$p0" "$T/c.0.out"; wait_pid 60 "$p1" "$T/c.1.out"
for n in 0 1; do
	[ "$(cat "$T/c.$n.rc")" = 0 ] || { tail -n 30 "$T/c.$n.out" >&2; fail "c. node $n exited $(cat "$T/c.$n.rc")"; }
done
for r in 0 1 2 3; do
	expect_grep "c. rank $r" "^rank $r/4 attempt 0 sum 10 want 10 replicas_equal True" "$U/out/rank.$r"
done
owner=$(stat -c %U "$U/out/rank.0")
expect_eq "c. the workers' user" "$owner" crunwheel
note "c. pip install as crunwheel, no compiler on PATH: 2 nodes x 2 gloo ranks right"

# f. accelerate launch --multi_gpu calls torch.distributed.run.run() in its
# own process: torchrun unless CRUN_TORCHRUN=1 routes it to crun. Each
# worker records its parent's executable (its launcher's, or crun's guard);
# rank 1 exits with the status given, if any.
cat >"$U/probe.py" <<'PY'
import os, sys
exe = os.path.basename(os.readlink("/proc/%d/exe" % os.getppid()))
with open(os.path.join(sys.argv[1], "rank." + os.environ["RANK"]), "w") as f:
    f.write("%s %s %s\n" % (os.environ["RANK"], os.environ["WORLD_SIZE"], exe))
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 and os.environ["RANK"] == "1" else 0)
PY
# accel OPT-IN OUT [STATUS]: accelerate's launcher with 2 processes.
accel() {
	mkdir -p "$U/$2" && chown crunwheel "$U/$2"
	(cd "$U" && as_user env CRUN_TORCHRUN="$1" "$U/venv/bin/python" -m accelerate.commands.launch \
		--multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no --dynamo_backend no \
		probe.py "$U/$2" ${3:-} >"$T/f.$2.out" 2>&1)
}
accel 0 torchrun || { tail -n 20 "$T/f.torchrun.out" >&2; fail "f. accelerate launch (torchrun) failed"; }
accel 1 crun || { tail -n 20 "$T/f.crun.out" >&2; fail "f. accelerate launch (CRUN_TORCHRUN=1) failed"; }
py_exe=$(basename "$(readlink -f "$U/venv/bin/python")")
for r in 0 1; do
	expect_eq "f. rank $r without CRUN_TORCHRUN" "$(cat "$U/torchrun/rank.$r")" "$r 2 $py_exe"
	expect_eq "f. rank $r with CRUN_TORCHRUN=1" "$(cat "$U/crun/rank.$r")" "$r 2 crun"
done
expect_grep "f. crun's own line" "^crun: 2 workers of .* succeeded" "$T/f.crun.out"
accel 1 fails 3; rc=$?
expect_eq "f. accelerate's status when a worker exits 3" "$rc" 3
note "f. accelerate launch --multi_gpu: torchrun by default, crun with CRUN_TORCHRUN=1 (a failed worker's status 3 reaches the caller)"

# d. Debian 13
ROOT=$(sh scripts/debian-root.sh trixie) || fail "d. could not make the trixie root"
mkdir "$T/d"
sh scripts/debian-root-run.sh -b "$T" -b "$TOP" -C "$TOP" -e PYTHON=/usr/bin/python3 "$ROOT" \
	"$BIN" --standalone --nproc_per_node=2 tests/integration/py/ddp_gloo.py --out "$T/d" >"$T/d.out" 2>&1 ||
	{ tail -n 30 "$T/d.out" >&2; fail "d. the wheel's crun in the trixie root failed"; }
for r in 0 1; do expect_grep "d. rank $r" "^rank $r/2 attempt 0 sum 3 want 3" "$T/d/rank.$r"; done
note "d. Debian 13 ($(sed -n 's/^python3-torch\t//p' "$ROOT/.crun-root" | head -n 1) torch): standalone, 2 ranks right"

# g. Debian 11: glibc 2.31, and PyTorch 1.7, older than the agent store
ROOT=$(sh scripts/debian-root.sh bullseye) || fail "g. could not make the bullseye root"
mkdir "$T/g"
sh scripts/debian-root-run.sh -b "$T" -b "$TOP" -C "$TOP" -e PYTHON=/usr/bin/python3 "$ROOT" \
	"$BIN" --standalone --nproc_per_node=2 tests/integration/py/ddp_gloo.py --out "$T/g" >"$T/g.out" 2>&1 ||
	{ tail -n 30 "$T/g.out" >&2; fail "g. the wheel's crun in the bullseye root failed"; }
expect_grep "g. crun says why rank 0 hosts the store" "predates the agent store" "$T/g.out"
for r in 0 1; do expect_grep "g. rank $r" "^rank $r/2 attempt 0 sum 3 want 3 replicas_equal True" "$T/g/rank.$r"; done
expect_grep "g. rank 0 hosts the store" "store_server here" "$T/g/rank.0"
note "g. Debian 11 (glibc $(sh scripts/debian-root-run.sh "$ROOT" ldd --version | sed -n '1s/.* //p'), torch $(sed -n 's/^python3-torch\t//p' "$ROOT/.crun-root" | head -n 1)): standalone, 2 ranks right, rank 0 hosting the store"

# e. aarch64
WA=$(sh scripts/wheel.sh aarch64 2>"$T/e.err" | tail -n 1) || { cat "$T/e.err" >&2; fail "e. scripts/wheel.sh aarch64 failed"; }
grep -q "auditwheel: manylinux_2_28_aarch64" "$T/e.err" || fail "e. no auditwheel verdict: $(tail -n 3 "$T/e.err")"
mkdir "$T/e"
(cd "$T/e" && "$PY213" -m zipfile -e "$TOP/$WA" .) || fail "e. cannot unpack $WA"
ABIN=$(echo "$T"/e/crun_launcher-*.data/scripts/crun)
chmod 755 "$ABIN"
QEMU=$(command -v qemu-aarch64-static) || fail "e. no qemu-aarch64-static (scripts/install-deps.sh installs qemu-user-static)"
SYSROOT=$(sh scripts/debian-sysroot.sh arm64 libc6) || fail "e. no arm64 C library (scripts/debian-sysroot.sh)"
v=$("$QEMU" -L "$SYSROOT" "$ABIN" --version 2>&1) || fail "e. crun --version under qemu: $v"
expect_eq "e. aarch64 crun --version" "$v" "$("$BIN" --version)"
"$QEMU" -L "$SYSROOT" "$ABIN" --standalone --nproc_per_node=2 /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"' \
	>"$T/e.out" 2>&1 || { cat "$T/e.out" >&2; fail "e. a standalone job under qemu failed"; }
for r in 0 1; do expect_grep "e. rank $r" "rank $r of 2" "$T/e.out"; done
note "e. $(basename "$WA"): $(wc -c <"$TOP/$WA") bytes; under qemu: --version, 2 workers"

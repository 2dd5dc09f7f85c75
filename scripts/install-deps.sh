#!/bin/sh
# Install, idempotently, every Debian package that crun's build, tests, demo
# and benchmarks need. Called by make when a dependency is missing; safe to run
# by hand. Only packages that are not yet installed are fetched. Debian 12
# (bookworm) and 13 (trixie): a name written "a|b" is the first of its
# alternatives apt has a candidate for (names differ between releases), and
# one already installed satisfies it.
#
# It starts and stops no daemon. Several packages come with one (munge,
# slurmd, slurmctld, etcd-server, prometheus), which Debian starts when it
# installs them; the tests start private instances of their own (own ports,
# sockets and state, stopped by pid), and on a machine that runs these
# daemons for real (a SLURM node) they must be neither started nor stopped
# by `make demo`. So for the install only, /usr/sbin/policy-rc.d answers 101
# ("action forbidden") to every action: invoke-rc.d asks it, and so does
# deb-systemd-invoke where systemd is PID 1 (Debian 12 and 13), which covers
# the maintainer scripts of both init systems. The services stay installed
# as Debian sets them up (a systemd machine starts them at its next boot). A
# policy-rc.d that is already there is the site's: it is left as it is.
set -eu
. /etc/os-release 2>/dev/null || true

PKGS="build-essential pkg-config libuv1-dev libinih-dev libcurl4-openssl-dev
libjansson-dev libcriterion-dev python3 python3-torch python3-venv iproute2 procps psmisc
util-linux xxd clang libsodium-dev lcov"
# clang's sanitizer and libFuzzer runtimes: llvm-defaults' libclang-rt-dev
# follows the release's clang (14 on Debian 12, 19 on 13). clang-format is
# not needed: make format-check uses the pinned PyPI wheel (Makefile).
PKGS="$PKGS libclang-rt-dev|libclang-rt-14-dev"
# The SLURM tests start a real slurmctld, slurmd and munged.
PKGS="$PKGS slurm-wlm munge"
# The etcd rendezvous tests start real etcd members (etcdctl for debugging).
PKGS="$PKGS etcd-server|etcd etcd-client|etcd openssl"
# Metrics (libmicrohttpd; a real Prometheus scrapes the agents in the tests),
# CPU/NUMA binding (hwloc), firewall rules inside test namespaces, the scale
# curves' plots.
PKGS="$PKGS libmicrohttpd-dev prometheus libhwloc-dev hwloc nftables gnuplot-nox"
# The shells whose completion scripts crun prints (completion.sh loads them).
PKGS="$PKGS zsh tcsh"
# Upstream sources from Debian's mirror (scripts/debian-source.sh: PyTorch's
# own launcher tests).
PKGS="$PKGS curl xz-utils"
# The aarch64 wheel's smoke test (tests/integration/wheel.sh).
PKGS="$PKGS qemu-user-static"
# crun for Windows (make windows: mingw-w64) and its tests under Wine
# (tests/integration/windows.sh).
PKGS="$PKGS gcc-mingw-w64-x86-64 wine64|wine"

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
# candidate P: apt can install P on this release.
candidate() { apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: [^(]'; }

missing=""
for slot in $PKGS; do
	have=0
	for p in $(echo "$slot" | tr '|' ' '); do installed "$p" && have=1 && break; done
	[ $have = 1 ] || missing="$missing $slot"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages:$missing (run as root: sh scripts/install-deps.sh)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# Each missing slot: its first alternative with a candidate on this release.
want=""
for slot in $missing; do
	pick=""
	for p in $(echo "$slot" | tr '|' ' '); do candidate "$p" && pick=$p && break; done
	if [ -z "$pick" ]; then
		echo "install-deps: no package '$slot' on ${PRETTY_NAME:-this system}" >&2
		exit 1
	fi
	want="$want $pick"
done
echo "install-deps: installing$want (${PRETTY_NAME:-unknown release})"

# The policy-rc.d this run puts in place is a hard link to a file of its own
# beside it: at the end, on failure and on HUP/INT/TERM (the shell runs the
# trap once apt-get has returned, so the policy holds as long as apt-get
# runs), exactly that file is removed, never one that replaced it meanwhile.
POLICY=/usr/sbin/policy-rc.d
MARK="Written by crun scripts/install-deps.sh"
policy_tmp="" policy_mine=0
policy_remove() {
	if [ $policy_mine = 1 ] && cmp -s "$policy_tmp" "$POLICY"; then rm -f "$POLICY"; fi
	[ -z "$policy_tmp" ] || rm -f "$policy_tmp"
	policy_tmp="" policy_mine=0
}
trap policy_remove EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
# One left by a run that was killed (SIGKILL runs no trap) would forbid every
# service start on this machine for good: it goes once its writer is gone.
old=$(sed -n "s|^# $MARK (pid \([0-9]*\)).*|\1|p" "$POLICY" 2>/dev/null || true)
if [ -n "$old" ] && ! kill -0 "$old" 2>/dev/null; then
	echo "install-deps: removing $POLICY left by install-deps pid $old"
	for f in "$POLICY".crun-*; do
		if cmp -s "$f" "$POLICY"; then rm -f "$f"; fi
	done
	rm -f "$POLICY"
fi
policy_tmp=$(mktemp "$POLICY.crun-XXXXXX")
printf '#!/bin/sh\n# %s (pid %s), removed when it ends:\n# no service starts while it installs packages.\nexit 101\n' "$MARK" $$ >"$policy_tmp"
chmod 0755 "$policy_tmp"
# ln fails, creating nothing, when a policy-rc.d exists: an existing one is
# never replaced, not even for an instant.
if ln "$policy_tmp" "$POLICY" 2>/dev/null; then
	policy_mine=1
elif [ -e "$POLICY" ]; then
	echo "install-deps: keeping the existing $POLICY"
else
	echo "install-deps: cannot create '$POLICY'" >&2
	exit 1
fi
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $want

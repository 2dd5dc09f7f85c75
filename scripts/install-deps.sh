#!/bin/sh
# Install, idempotently, every Debian package that crun's build, tests, demo
# and benchmarks need. Called by make when a dependency is missing; safe to run
# by hand. Only packages that are not yet installed are fetched. Debian 12
# (bookworm) and 13 (trixie): a name written "a|b" is the first of its
# alternatives apt has a candidate for (names differ between releases), and
# one already installed satisfies it.
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
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $want
# Debian starts daemons on install; the tests start their own.
for s in slurmctld slurmd munge etcd prometheus; do
	if command -v systemctl >/dev/null 2>&1; then systemctl stop "$s" 2>/dev/null || true; fi
	pkill -x "$s" 2>/dev/null || true
	pkill -x "${s}d" 2>/dev/null || true
done
exit 0

#!/bin/sh
# Install, idempotently, every Debian package that crun's build, tests, demo
# and benchmarks need. Called by make when a dependency is missing; safe to run
# by hand. Only packages that are not yet installed are fetched.
set -eu

PKGS="build-essential pkg-config libuv1-dev libinih-dev libcurl4-openssl-dev
libjansson-dev libcriterion-dev python3 python3-torch python3-venv iproute2 procps psmisc
util-linux xxd clang libclang-rt-14-dev clang-format libsodium-dev lcov"
# The SLURM tests start a real slurmctld, slurmd and munged.
PKGS="$PKGS slurm-wlm munge"
# The etcd rendezvous tests start real etcd members (etcdctl for debugging).
PKGS="$PKGS etcd-server etcd-client openssl"
# Metrics (libmicrohttpd; a real Prometheus scrapes the agents in the tests),
# CPU/NUMA binding (hwloc), firewall rules inside test namespaces, the scale
# curves' plots.
PKGS="$PKGS libmicrohttpd-dev prometheus libhwloc-dev hwloc nftables gnuplot-nox"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages:$missing (run as root: sh scripts/install-deps.sh)" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
# Debian starts daemons on install; the tests start their own.
for s in slurmctld slurmd munge etcd prometheus; do
	if command -v systemctl >/dev/null 2>&1; then systemctl stop "$s" 2>/dev/null || true; fi
	pkill -x "$s" 2>/dev/null || true
	pkill -x "${s}d" 2>/dev/null || true
done
exit 0

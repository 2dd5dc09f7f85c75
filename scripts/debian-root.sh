#!/bin/sh
# Make, once per machine, a Debian root of SUITE (debootstrap's minbase, then
# python3-torch and the named packages, without recommends) and print its
# path; scripts/debian-root-run.sh runs commands in it. The tests use it to
# run crun, built on this host, against another release's own PyTorch
# (tests/integration/trixie_torch.sh: Debian 13's, built without libuv).
#
#   scripts/debian-root.sh SUITE [PACKAGE...]     e.g. trixie, or trixie gcc make
#
# The root is cached in $CRUN_ROOTS (default /var/cache/crun-roots) as
# SUITE-<hash of the suite, the mirror, the package list and this script>: a
# change to any of them makes a new root, and the same inputs reuse it. It is
# built in a temporary directory beside and renamed into place when
# complete, under a lock, so a run that is killed leaves no half root and two
# runs at once build it once. The .deb files are kept in SUITE-debs/ for the
# next build; roots of the suite unused for 14 days are removed when a new one
# is built. DEBIAN_MIRROR (default http://deb.debian.org/debian) is the
# mirror; CRUN_ROOT_REBUILD=1 builds again even when cached. Only the path
# goes to stdout; what it does, and how long it took, to stderr.
set -eu

[ $# -ge 1 ] || { echo "usage: $0 SUITE [PACKAGE...]" >&2; exit 2; }
SUITE=$1; shift
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${CRUN_ROOTS:-/var/cache/crun-roots}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
HERE=$(cd "$(dirname "$0")" && pwd)
PKGS=$(printf '%s\n' python3 python3-torch "$@" | sort -u | tr '\n' ' ')
PKGS=${PKGS% }
say() { echo "debian-root: $*" >&2; }

hash=$(printf '%s\n%s\n%s\n' "$SUITE" "$MIRROR" "$PKGS" | cat - "$0" | sha256sum | cut -c1-12)
NAME=$SUITE-$hash
ROOT=$CACHE/$NAME

ready() { [ -f "$ROOT/.crun-root" ]; }
if ready && [ "${CRUN_ROOT_REBUILD:-0}" != 1 ]; then
	touch "$CACHE/$NAME.used"
	echo "$ROOT"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || { say "needs root to build $NAME (debootstrap, chroot)"; exit 1; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.$NAME.lock"
if ! flock -n 9; then
	say "waiting for another build of $NAME"
	flock 9
fi
if ready && [ "${CRUN_ROOT_REBUILD:-0}" != 1 ]; then
	touch "$CACHE/$NAME.used"
	echo "$ROOT"
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
APT_LOCK="-o DPkg::Lock::Timeout=600"
if ! command -v debootstrap >/dev/null 2>&1; then
	say "installing debootstrap"
	# shellcheck disable=SC2086
	apt-get install -y -q $APT_LOCK --no-install-recommends debootstrap >&2 ||
		{ apt-get update -q >&2 && apt-get install -y -q $APT_LOCK --no-install-recommends debootstrap >&2; }
fi
# Debian 12's debian-archive-keyring (2023.3+deb12u1 on) already holds the
# trixie keys; debootstrap checks the Release file's signature against it.
case $SUITE in
bookworm|trixie|forky)
	[ -f "/usr/share/keyrings/debian-archive-$SUITE-stable.gpg" ] ||
		[ -f "/usr/share/keyrings/debian-archive-$SUITE-automatic.gpg" ] ||
		{ say "$KEYRING has no $SUITE key: update debian-archive-keyring"; exit 1; } ;;
esac

start=$(date +%s)
TMP=$CACHE/.$NAME.tmp-$$
DEBS=$CACHE/$SUITE-debs
# Nothing is ever mounted below TMP outside a namespace of its own (debootstrap
# runs in one, debian-root-run.sh is one), so removing it cannot reach the
# host's files through a mount; the check says so rather than trusting it.
cleanup() {
	if grep -q " $TMP[/ ]" /proc/self/mountinfo; then
		say "not removing $TMP: something is mounted below it"
	else
		rm -rf "$TMP"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$CACHE"/.$NAME.tmp-*
mkdir -p "$DEBS"

say "building $NAME in $TMP: debootstrap --variant=minbase $SUITE $MIRROR"
unshare --mount --propagation private \
	debootstrap --variant=minbase --keyring="$KEYRING" --cache-dir="$DEBS" \
	"$SUITE" "$TMP" "$MIRROR" >"$CACHE/.$NAME.log" 2>&1 ||
	{ tail -n 30 "$CACHE/.$NAME.log" >&2; say "debootstrap failed (log: $CACHE/.$NAME.log)"; exit 1; }

# No documentation, manual pages or translations (a third of the root's
# files), no recommends, no daemon started by a package's install.
cat >"$TMP/etc/dpkg/dpkg.cfg.d/01-crun-root" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF
cat >"$TMP/etc/apt/apt.conf.d/01-crun-root" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
printf '#!/bin/sh\nexit 101\n' >"$TMP/usr/sbin/policy-rc.d"
chmod 755 "$TMP/usr/sbin/policy-rc.d"
echo "deb $MIRROR $SUITE main" >"$TMP/etc/apt/sources.list"

say "installing $PKGS"
# shellcheck disable=SC2086
sh "$HERE/debian-root-run.sh" -w -b "$DEBS:/var/cache/apt/archives" -e DEBIAN_FRONTEND=noninteractive \
	"$TMP" sh -c 'apt-get update -q && apt-get install -y -q "$@" && apt-get autoclean -q' \
	apt $PKGS >>"$CACHE/.$NAME.log" 2>&1 ||
	{ tail -n 30 "$CACHE/.$NAME.log" >&2; say "installing $PKGS failed (log: $CACHE/.$NAME.log)"; exit 1; }
rm -rf "$TMP"/var/lib/apt/lists/* "$TMP"/var/cache/apt/*.bin

secs=$(( $(date +%s) - start ))
{
	echo "suite=$SUITE"
	echo "mirror=$MIRROR"
	echo "packages=$PKGS"
	echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) in ${secs}s"
	# shellcheck disable=SC2086
	dpkg-query --admindir="$TMP/var/lib/dpkg" -W $PKGS
} >"$TMP/.crun-root"
mv "$CACHE/.$NAME.log" "$TMP/.crun-root.log"

rm -rf "$ROOT.old"
[ ! -e "$ROOT" ] || mv -T "$ROOT" "$ROOT.old"
mv -T "$TMP" "$ROOT"
touch "$CACHE/$NAME.used"
size=$(du -sh "$ROOT" | cut -f1)
say "made $ROOT in $secs s ($size)"
rm -rf "$ROOT.old"

# Roots of this suite that nothing has used for 14 days.
for u in $(find "$CACHE" -maxdepth 1 -name "$SUITE-*.used" -mtime +14); do
	old=${u%.used}
	[ "$old" != "$ROOT" ] || continue
	say "removing $old (unused for 14 days)"
	rm -rf "$old" "$u" "$CACHE/.${old##*/}.lock"
done
echo "$ROOT"

#!/bin/sh
# Run a command inside a Debian root (scripts/debian-root.sh makes one) in
# PID and mount namespaces of its own, torn down when it ends.
#
#   scripts/debian-root-run.sh [-w] [-b SRC:DST]... [-C DIR] [-e VAR=VALUE]... ROOT CMD [ARG...]
#
#   -b SRC:DST   bind-mount the host's SRC at DST inside the root (made when
#                missing); SRC alone binds it at the same path
#   -C DIR       run CMD in DIR (inside the root; default /)
#   -e VAR=VAL   set VAR for CMD; the host's environment is not passed on,
#                CMD gets PATH, HOME=/root, LANG=C.UTF-8, TERM and these
#   -w           CMD writes into ROOT itself (to install packages in it); by
#                default ROOT is the lower layer of an overlay whose upper
#                layer is a tmpfs: CMD may write anywhere, and what it wrote
#                is gone when it ends, so runs never change the root that the
#                next run, or another job at the same time, uses
#
# What CMD sees: the root; a new /proc of its PID namespace; /sys read-only;
# a minimal /dev (null zero full random urandom tty, its own devpts, /dev/shm
# a tmpfs); /tmp and /mnt fresh tmpfs; the host's /etc/resolv.conf and
# /etc/hosts; the host's network (the loopback jobs of the tests need
# nothing more, and apt reaches its mirror).
#
# Teardown. The mounts are made in a private mount namespace: the host never
# sees them, and they go away with its last process. The PID namespace's
# first process is a shell that reaps and exits with CMD's status; when it
# dies, the kernel kills every process left in the namespace. TERM, INT and
# HUP sent to this script (its pid is the one to signal) are passed on to
# CMD; KILL of this script kills unshare (its parent-death signal), which
# kills that first process (--kill-child), so nothing of the run survives it.
# The exit status is CMD's (128+N when a signal N ended it).
set -eu

usage() {
	echo "usage: $0 [-w] [-b SRC[:DST]]... [-C DIR] [-e VAR=VALUE]... ROOT CMD [ARG...]" >&2
	exit 2
}
[ "$(id -u)" -eq 0 ] || { echo "debian-root-run: needs root (namespaces, mounts, chroot)" >&2; exit 1; }

# The inner shell's arguments: ROOT RW CWD, the binds as "-b SRC DST", "--",
# then the -e assignments and CMD (env -i takes both).
writable=0 cwd=/ binds_n=0 envs_n=0
while getopts wb:C:e: opt; do
	case $opt in
	w) writable=1 ;;
	b) case $OPTARG in
	   *:*) src=${OPTARG%%:*} dst=${OPTARG#*:} ;;
	   *) src=$OPTARG dst=$OPTARG ;;
	   esac
	   [ -e "$src" ] || { echo "debian-root-run: no '$src' to bind" >&2; exit 1; }
	   case $dst in /*) ;; *) echo "debian-root-run: '$dst' is not an absolute path" >&2; exit 1 ;; esac
	   binds_n=$((binds_n + 1))
	   eval "bsrc_$binds_n=\$(realpath \"\$src\") bdst_$binds_n=\$dst" ;;
	C) cwd=$OPTARG ;;
	e) case $OPTARG in [A-Za-z_]*=*) ;; *) usage ;; esac
	   envs_n=$((envs_n + 1))
	   eval "env_$envs_n=\$OPTARG" ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || usage
root=$(realpath "$1"); shift
[ -x "$root/bin/sh" ] && [ -d "$root/proc" ] || { echo "debian-root-run: '$root' is not a Debian root" >&2; exit 1; }
i=$envs_n
while [ "$i" -ge 1 ]; do eval "set -- \"\$env_$i\" \"\$@\""; i=$((i - 1)); done
set -- -- "$@"
i=$binds_n
while [ "$i" -ge 1 ]; do eval "set -- -b \"\$bsrc_$i\" \"\$bdst_$i\" \"\$@\""; i=$((i - 1)); done
set -- "$root" "$writable" "$cwd" "$@"

# reap PID: rc becomes its status. A trapped signal ends a wait early (>128)
# and a second wait then gets the status; once reported, a wait answers 127.
reap_fn='
reap() {
	while :; do
		wait "$1"; rc=$?
		[ "$rc" -gt 128 ] || return 0
		kill -0 "$1" 2>/dev/null && continue
		wait "$1" 2>/dev/null; _r=$?
		[ "$_r" = 127 ] || rc=$_r
		return 0
	done
}
'
eval "$reap_fn"

# Runs as PID 1 of the new PID namespace, in the new mount namespace.
inner='
set -eu
root=$1 rw=$2 cwd=$3; shift 3
die() { echo "debian-root-run: $*" >&2; exit 125; }
if [ "$rw" = 0 ]; then
	# The overlay: its upper layer, what the run writes, in a tmpfs over the
	# root'"'"'s own /mnt (seen only in this namespace; the merged root shows
	# the lower /mnt, empty), so that nothing is made on the host for it.
	ov=$root/mnt
	mount -t tmpfs -o mode=755 tmpfs "$ov"
	mkdir "$ov/upper" "$ov/work" "$ov/root"
	mount -t overlay overlay -o "lowerdir=$root,upperdir=$ov/upper,workdir=$ov/work" "$ov/root"
	root=$ov/root
fi
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
mount -t tmpfs -o mode=755,nosuid tmpfs "$root/dev"
for d in null zero full random urandom tty; do
	: >"$root/dev/$d"
	mount --bind "/dev/$d" "$root/dev/$d"
done
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
ln -s pts/ptmx "$root/dev/ptmx"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/mnt"
for f in resolv.conf hosts; do
	if [ -f "/etc/$f" ] && [ -f "$root/etc/$f" ]; then mount --bind "/etc/$f" "$root/etc/$f"; fi
done
while [ "$1" = -b ]; do
	src=$2 dst=$root$3; shift 3
	if [ ! -e "$dst" ]; then
		if [ -d "$src" ]; then mkdir -p "$dst"; else mkdir -p "${dst%/*}" && : >"$dst"; fi ||
			die "cannot make the mount point ${dst#"$root"}"
	fi
	mount --rbind "$src" "$dst"
done
shift # --
# CMD runs in the background (so that this shell, PID 1, can forward the
# signals it would otherwise ignore) with the stdin of this shell, not /dev/null.
exec 3<&0
chroot "$root" /usr/bin/env -i --default-signal=INT,QUIT -C "$cwd" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 ${TERM:+TERM=$TERM} "$@" <&3 3<&- &
child=$!
trap "kill -TERM $child 2>/dev/null" TERM
trap "kill -INT $child 2>/dev/null" INT
trap "kill -HUP $child 2>/dev/null" HUP
set +e
reap "$child"
exit $rc
'
# unshare waits for its child with TERM and INT blocked: this shell stays in
# front to pass them on, to PID 1 of the namespace (unshare's child), which
# passes them on to CMD. unshare dies with this shell (--pdeathsig), and the
# namespace with unshare (--kill-child).
exec 3<&0
setpriv --pdeathsig KILL env --default-signal=INT,QUIT unshare --fork --kill-child --pid --mount --propagation private \
	sh -c "$reap_fn$inner" debian-root-run "$@" <&3 3<&- &
ns=$!
exec 3<&-
fwd() { kill "-$1" $(cat "/proc/$ns/task/$ns/children" 2>/dev/null) 2>/dev/null || :; }
trap 'fwd TERM' TERM
trap 'fwd INT' INT
trap 'fwd HUP' HUP
set +e
reap "$ns"
exit $rc

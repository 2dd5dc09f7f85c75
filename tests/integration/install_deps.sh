#!/bin/sh
# scripts/install-deps.sh neither stops nor starts a daemon. It runs its
# install path with apt-get, apt-cache, dpkg-query and systemctl replaced by
# stubs (PATH), so nothing is fetched or installed, inside a pid and mount
# namespace of its own: a script that kills by name reaches only this test's
# processes, and /usr/sbin is an overlay, so the policy-rc.d it writes never
# reaches the machine. In every case decoys named like the daemons (copies
# of sleep called munged, slurmctld, slurmd, etcd, prometheus) must survive,
# systemctl must not be called, and while `apt-get install` runs,
# /usr/sbin/policy-rc.d must forbid starting a service (exit 101):
#   none   no policy-rc.d before: one is made, and gone afterwards
#   site   the site's own policy-rc.d: used as it is, left byte for byte
#   live   one written by another install-deps that still runs: left alone
#   stale  one left by an install-deps that was killed: replaced, then gone
#   fail   apt-get fails: the script fails, the policy is gone
#   term   SIGTERM during apt-get: the policy holds until apt-get returns,
#          then the script exits 143 and the policy is gone
# INSTALL_DEPS=FILE checks another version of the script, e.g. the one
# before a change: git show HEAD:scripts/install-deps.sh >/tmp/old.sh.
. tests/integration/lib.sh
INSTALL_DEPS=${INSTALL_DEPS:-$TOP/scripts/install-deps.sh}
[ -f "$INSTALL_DEPS" ] || fail "no script '$INSTALL_DEPS'"
need_root "pid and mount namespaces, an overlay on /usr/sbin"
command -v unshare >/dev/null 2>&1 || skip "no unshare (util-linux)"
M=$$ # a marker in the decoys' arguments
DAEMONS="munged slurmctld slurmd etcd prometheus"
export T M INSTALL_DEPS DAEMONS

mkdir -p "$T/stub" "$T/decoy"
for d in $DAEMONS; do cp /bin/sleep "$T/decoy/$d"; done
# Every package is missing and has a candidate: the script takes its
# install path.
printf '#!/bin/sh\necho "unknown ok not-installed"\n' >"$T/stub/dpkg-query"
printf '#!/bin/sh\necho "  Candidate: 1.0-1"\n' >"$T/stub/apt-cache"
printf '#!/bin/sh\necho "systemctl $*" >>"$STUB_REC/systemctl"\n' >"$T/stub/systemctl"
# apt-get install asks the policy what invoke-rc.d and deb-systemd-invoke
# would ask it for a maintainer script's start (policy-rc.d SERVICE ACTION).
cat >"$T/stub/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $*" >>"$STUB_REC/apt"
[ "$1" = install ] || exit 0
P=/usr/sbin/policy-rc.d
if [ -x $P ]; then
	$P munge start >/dev/null 2>&1
	echo $? >"$STUB_REC/during"
	cp $P "$STUB_REC/policy.during"
else
	echo none >"$STUB_REC/during"
fi
case $STUB_APT in
fail) exit 100 ;;
term)
	kill -TERM "$PPID"
	sleep 0.3
	if [ -x $P ]; then echo yes; else echo no; fi >"$STUB_REC/held"
	;;
esac
exit 0
EOF
chmod 0755 "$T/stub/"*

# In the namespaces: $1 is the case. Facts go to $T/rec/CASE for the checks.
cat >"$T/inner.sh" <<'EOF'
C=$1 R=$T/rec/$1 P=/usr/sbin/policy-rc.d
mkdir -p "$R" "$T/ov/$C/u" "$T/ov/$C/w"
mount -t overlay overlay -o "lowerdir=/usr/sbin,upperdir=$T/ov/$C/u,workdir=$T/ov/$C/w" /usr/sbin ||
	{ echo "cannot mount an overlay on /usr/sbin"; exit 77; }
rm -f $P
MARK="Written by crun scripts/install-deps.sh"
case $C in
site) printf '#!/bin/sh\n# the site policy %s\nexit 101\n' "$M" >$P ;;
live) printf '#!/bin/sh\n# %s (pid %s), removed when it ends:\nexit 101\n' "$MARK" $$ >$P ;;
stale)
	true & gone=$!
	wait $gone
	printf '#!/bin/sh\n# %s (pid %s), removed when it ends:\nexit 101\n' "$MARK" $gone >$P
	;;
esac
[ -e $P ] && { chmod 0755 $P; cp $P "$R/before"; ls -i $P >"$R/inode.before"; }
pids=""
for d in $DAEMONS; do
	"$T/decoy/$d" "1000$M" &
	pids="$pids $d:$!"
done
for pd in $pids; do
	n=50
	while [ "$(cat "/proc/${pd#*:}/comm" 2>/dev/null)" != "${pd%%:*}" ] && [ $n -gt 0 ]; do
		sleep 0.1; n=$((n-1))
	done
done
STUB_REC=$R STUB_APT=$C PATH="$T/stub:$PATH" sh "$INSTALL_DEPS" >"$R/out" 2>&1
echo $? >"$R/status"
# A decoy killed is a zombie here (nobody reaps it): its state says so.
for pd in $pids; do
	st=$(sed 's/^.*) //' "/proc/${pd#*:}/stat" 2>/dev/null | cut -d' ' -f1)
	case $st in ''|Z) echo "${pd%%:*}" >>"$R/dead" ;; esac
done
if [ ! -e $P ]; then
	echo absent
elif cmp -s $P "$R/before" && [ "$(ls -i $P)" = "$(cat "$R/inode.before")" ]; then
	echo same
else
	echo changed
fi >"$R/after"
ls -d $P?* >"$R/leftover" 2>/dev/null
exit 0
EOF

for c in none site live stale fail term; do
	unshare --pid --fork --kill-child --mount-proc sh "$T/inner.sh" "$c" >"$T/inner.$c" 2>&1
	rc=$?
	[ $rc = 77 ] && skip "$(cat "$T/inner.$c")"
	[ $rc = 0 ] || { cat "$T/inner.$c" >&2; fail "$c: the namespace run exited $rc"; }
	R=$T/rec/$c
	[ ! -s "$R/dead" ] || fail "$c: decoys killed: $(tr '\n' ' ' <"$R/dead")"
	[ ! -s "$R/systemctl" ] || fail "$c: systemctl called: $(tr '\n' ' ' <"$R/systemctl")"
	expect_grep "$c: apt-get install ran" "^apt-get install " "$R/apt"
	expect_eq "$c: policy-rc.d's answer to a start during the install" "$(cat "$R/during")" 101
	[ ! -s "$R/leftover" ] || fail "$c: files left in /usr/sbin: $(tr '\n' ' ' <"$R/leftover")"
	case $c in
	site|live)
		cmp -s "$R/policy.during" "$R/before" || fail "$c: the existing policy-rc.d was replaced during the install"
		expect_eq "$c: the existing policy-rc.d afterwards" "$(cat "$R/after")" same ;;
	*)	expect_eq "$c: policy-rc.d afterwards" "$(cat "$R/after")" absent ;;
	esac
	case $c in
	fail) [ "$(cat "$R/status")" != 0 ] || fail "$c: the script succeeded although apt-get failed" ;;
	term)
		expect_eq "$c: exit status" "$(cat "$R/status")" 143
		expect_eq "$c: policy-rc.d held while apt-get ran after the signal" "$(cat "$R/held")" yes ;;
	*)	[ "$(cat "$R/status")" = 0 ] || { cat "$R/out" >&2; fail "$c: exit status $(cat "$R/status")"; } ;;
	esac
	note "$c: decoys alive, policy-rc.d 101 during the install, $(cat "$R/after") afterwards"
done
exit 0

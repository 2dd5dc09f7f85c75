# A private, real SLURM cluster for integration tests: munged, slurmctld and
# slurmd from Debian's slurm-wlm and munge packages, started as root without
# systemd, everything (config, munge key and socket, ports, state, spool, pid
# and log files) inside the test's own $T. Sourced after lib.sh, never run:
#
#     . tests/integration/lib.sh
#     . tests/integration/lib_slurm.sh
#     slurm_start_single            # one node, this machine's short hostname
#     srun -N1 -n1 env              # SLURM_CONF is exported: the tools find it
#
# API:
#   slurm_need             skip (exit 77, printing why) unless root and the
#                          daemons and client tools are installed.
#   slurm_start_single     write the config, start munged, slurmctld, slurmd for
#                          one node; wait until `sinfo` shows it idle. Registers
#                          slurm_stop with at_exit, so the daemons go on pass,
#                          fail, skip, INT and TERM.
#   slurm_start_multi N    N nodes h1..hN, one network namespace each (source
#                          lib_netns.sh first); see the comment above it.
#   slurm_client CMD...    run a client tool where the controller is reachable
#                          (inside h1 for a multi-node cluster, else here).
#   slurm_stop             stop the daemons this script started (by pid, never
#                          by name), then wait for them. Idempotent.
#   slurm_logs             print the tail of every daemon log (for failures).
#   slurm_fail MSG         slurm_logs, then fail MSG.
# Variables after start: SLURM_CONF (exported), SLURM_DIR ($T/slurm),
# SLURM_NODE (the node name), SLURM_CTLD_PORT, SLURM_SLURMD_PORT,
# SLURM_MUNGE_SOCKET.
#
# Why each choice:
#  - SlurmctldHost must be this machine's real short hostname, or slurmctld
#    refuses to start; the address is 127.0.0.1 so nothing leaves the host.
#  - munged gets its own key, socket, pid, seed and log files under $T, and
#    AuthInfo=socket=... points Slurm (daemons and clients alike, since the
#    clients read the same slurm.conf through SLURM_CONF) at that socket, so
#    a system munged, if any, is neither used nor disturbed.
#  - Ports come from free_port, so parallel test runs do not collide.
#  - ProctrackType=proctrack/linuxproc and TaskPlugin=task/none need no
#    cgroup setup; SlurmdParameters=config_overrides lets the node line state
#    whatever CPU count we like without the node being drained for it.
#  - Leftover Slurm variables in the caller's environment (a test run from
#    inside a real allocation) would change srun's behaviour (pitfall C4.7), so
#    they are unset.

SLURM_DIR=""
_slurm_pids=""
_slurm_stopped=0

slurm_need() {
	need_root "starts munged, slurmctld and slurmd"
	for _b in munged munge unmunge slurmctld slurmd srun sinfo sbatch scontrol; do
		command -v "$_b" >/dev/null 2>&1 || [ -x "/usr/sbin/$_b" ] ||
			skip "'$_b' not installed (sh scripts/install-deps.sh installs slurm-wlm and munge)"
	done
}

_slurm_bin() { command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"; }

slurm_logs() {
	[ -n "$SLURM_DIR" ] || return 0
	for _l in "$SLURM_DIR"/log/*.log; do
		[ -f "$_l" ] || continue
		echo "--- $_l" >&2
		tail -n 25 "$_l" >&2
	done
}

slurm_fail() { slurm_logs; fail "$@"; }

# Start a daemon in the foreground mode of its own, in the background here,
# recording its pid (the daemon itself: no wrapper shell stays in between).
_slurm_spawn() { # NAME CMD...
	_sn=$1; shift
	"$@" >"$SLURM_DIR/log/$_sn.out" 2>&1 </dev/null &
	_slurm_pids="$_slurm_pids $!"
	echo "$!" >"$SLURM_DIR/run/$_sn.pid.sh"
}

# Pids of processes other than ours that hold a file under $SLURM_DIR open:
# slurmstepd daemonizes away from slurmd but keeps its log and spool files,
# so this finds exactly the step daemons of this cluster, nothing else.
_slurm_stray_pids() {
	for _d in /proc/[0-9]*; do
		_p=${_d#/proc/}
		[ "$_p" = "$$" ] && continue
		ls -l "$_d/fd" 2>/dev/null | grep -q -F "$SLURM_DIR/" && echo "$_p"
	done
}

slurm_stop() {
	[ "$_slurm_stopped" -eq 0 ] || return 0
	_slurm_stopped=1
	[ -n "$SLURM_DIR" ] || return 0
	# Jobs first, so no step is left running when slurmd goes.
	if [ -n "$_slurm_pids" ]; then
		slurm_client scancel --quiet --user=root >/dev/null 2>&1
		_n=50
		while [ $_n -gt 0 ] && [ -n "$(slurm_client squeue -h 2>/dev/null)" ]; do
			sleep 0.1; _n=$((_n-1))
		done
	fi
	for _p in $_slurm_pids; do kill -TERM "$_p" 2>/dev/null; done
	_n=50
	while [ $_n -gt 0 ]; do
		_alive=0
		for _p in $_slurm_pids; do kill -0 "$_p" 2>/dev/null && _alive=1; done
		[ $_alive -eq 0 ] && break
		sleep 0.1; _n=$((_n-1))
	done
	for _p in $_slurm_pids $(_slurm_stray_pids); do kill -KILL "$_p" 2>/dev/null; done
	for _p in $_slurm_pids; do wait "$_p" 2>/dev/null; done
	return 0
}

# Forget the allocation we may be running inside of (pitfall C4.7).
_slurm_clean_env() {
	for _v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do
		unset "$_v"
	done
}

_slurm_write_munge_key() {
	# 1024 random bytes, as mungekey(8) makes; munged wants 0400, owner root
	# here because munged runs as root (--force accepts that).
	dd if=/dev/urandom of="$SLURM_DIR/munge/munge.key" bs=1024 count=1 2>/dev/null ||
		fail "cannot write the munge key"
	chmod 0400 "$SLURM_DIR/munge/munge.key"
}

_slurm_start_munge() {
	_slurm_write_munge_key
	_slurm_spawn munged "$(_slurm_bin munged)" --foreground --force \
		--key-file="$SLURM_DIR/munge/munge.key" \
		--socket="$SLURM_MUNGE_SOCKET" \
		--pid-file="$SLURM_DIR/run/munged.pid" \
		--seed-file="$SLURM_DIR/munge/munged.seed" \
		--log-file="$SLURM_DIR/log/munged.log"
	_munge_ok() { munge -n -S "$SLURM_MUNGE_SOCKET" 2>/dev/null | unmunge -S "$SLURM_MUNGE_SOCKET" >/dev/null 2>&1; }
	wait_for 10 _munge_ok || slurm_fail "munged did not answer on $SLURM_MUNGE_SOCKET"
}

# slurm.conf for the controller on this host and the given node lines.
_slurm_write_conf() { # NODELINES PARTITION_NODES
	cat >"$SLURM_CONF" <<EOF
# Written by tests/integration/lib_slurm.sh for one test run; see there.
ClusterName=crun$$
SlurmctldHost=$_slurm_host(${_slurm_ctld_addr:-127.0.0.1})
SlurmctldPort=$SLURM_CTLD_PORT
SlurmdPort=$SLURM_SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_MUNGE_SOCKET
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=10
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmctldPidFile=$SLURM_DIR/run/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/run/slurmd.%n.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$SLURM_DIR/plugstack.conf
$1
PartitionName=test Nodes=$2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
	: >"$SLURM_DIR/plugstack.conf"
}

_slurm_prepare() {
	slurm_need
	_slurm_clean_env
	SLURM_DIR=$T/slurm
	mkdir -p "$SLURM_DIR/munge" "$SLURM_DIR/state" "$SLURM_DIR/spool" \
		"$SLURM_DIR/run" "$SLURM_DIR/log" || fail "cannot create $SLURM_DIR"
	chmod 0700 "$SLURM_DIR/munge"
	SLURM_CONF=$SLURM_DIR/slurm.conf
	export SLURM_CONF
	SLURM_CTLD_PORT=$(free_port)
	SLURM_SLURMD_PORT=$(free_port)
	[ "$SLURM_CTLD_PORT" != "$SLURM_SLURMD_PORT" ] || SLURM_SLURMD_PORT=$(free_port)
	SLURM_MUNGE_SOCKET=$SLURM_DIR/munge/munge.socket
	_slurm_host=$(hostname -s)
	[ -n "$_slurm_host" ] || skip "no hostname"
	at_exit slurm_stop
}

# sinfo shows every node of the partition idle.
_slurm_all_idle() {
	_st=$(slurm_client sinfo -h -o '%t' 2>/dev/null | sort -u)
	[ "$_st" = "idle" ]
}

slurm_start_single() {
	_slurm_prepare
	SLURM_NODE=$_slurm_host
	mkdir -p "$SLURM_DIR/spool/$SLURM_NODE"
	# More CPUs than the machine may have: jobs asking for several tasks
	# must fit (config_overrides keeps the node from being drained for it).
	_cpus=${SLURM_TEST_CPUS:-8}
	_slurm_write_conf \
		"NodeName=$SLURM_NODE NodeAddr=127.0.0.1 CPUs=$_cpus State=UNKNOWN" \
		"$SLURM_NODE"
	_slurm_start_munge
	_slurm_spawn slurmctld "$(_slurm_bin slurmctld)" -D -i -f "$SLURM_CONF"
	_slurm_spawn slurmd "$(_slurm_bin slurmd)" -D -f "$SLURM_CONF" -N "$SLURM_NODE"
	wait_for 30 _slurm_all_idle ||
		slurm_fail "node '$SLURM_NODE' not idle after 30 s: $(sinfo -h 2>&1 | head -n 3)"
	note "slurm: node $SLURM_NODE idle (slurmctld :$SLURM_CTLD_PORT, slurmd :$SLURM_SLURMD_PORT)"
}

# A cluster of N nodes h1..hN, each slurmd in its own network namespace from
# tests/integration/lib_netns.sh (spec C5). Not `ip netns exec`: it remounts
# /sys, hiding /sys/fs/cgroup, and slurmd then fails with "No filesystem
# mounted on /sys/fs/cgroup". Each daemon instead runs as
#     nsenter --net=/run/netns/NS unshare --uts --mount sh -c '
#         hostname hK; mount --bind hosts /etc/hosts; ...; exec slurmd ...'
# i.e. the host's network namespace, its own hostname, and a private mount
# namespace (unshare makes it private, so nothing leaks to the root one) in
# which lib_netns's hosts file (h1..hN) and resolv.conf are bind-mounted over
# /etc's: the node names resolve everywhere (slurmd, slurmstepd, the jobs and
# crun inherit the mounts) and nothing under /etc is written. /sys is left
# alone. The controller runs inside h1's namespace too (the switch carries no
# address of the root namespace): SlurmctldHost=h1(<h1's address>); munged
# stays in the root namespace, its socket being a file that every namespace
# sees. Client commands must reach the controller over the bridge, so after
# slurm_start_multi run them as `slurm_client CMD...` (inside h1; sinfo,
# scancel and squeue in this library do so by themselves).
#   slurm_start_multi N    N in 2..250; needs lib_netns.sh sourced first.
#   slurm_client CMD...    run CMD in h1 (hostname h1, names resolved).
#   slurm_on HOST CMD...   the same in host HOST (h1..hN).
# Variables after start: SLURM_NODES (h[1-N]), SLURM_CTLD_ADDR.
_slurm_multi=0

# Run by sh -c after nsenter + unshare: $1 hostname, $2 lib_netns's state dir.
# shellcheck disable=SC2016
_SLURM_NS_WRAP='hostname "$1" && mount --bind "$2/hosts" /etc/hosts &&
mount --bind "$2/resolv.conf" /etc/resolv.conf || exit 125; shift 2; exec "$@"'

slurm_on() { # HOST CMD...
	_so=$(netns_ns "$1") || exit 1
	_sh=h$(_netns_idx "$1"); shift
	nsenter --net="/run/netns/$_so" unshare --uts --mount sh -c "$_SLURM_NS_WRAP" \
		sh "$_sh" "$NETNS_DIR" "$@"
}

# Client tools: in h1 once the cluster is in namespaces, else here.
slurm_client() {
	if [ "$_slurm_multi" = 1 ]; then slurm_on h1 "$@"; else "$@"; fi
}

slurm_start_multi() { # N
	_smn=${1:-}
	case "$_smn" in ''|*[!0-9]*) fail "slurm_start_multi: bad node count '$_smn'" ;; esac
	[ "$_smn" -ge 2 ] || fail "slurm_start_multi: needs 2 nodes or more"
	command -v netns_setup >/dev/null 2>&1 || fail "slurm_start_multi: source lib_netns.sh first"
	slurm_need
	command -v nsenter >/dev/null 2>&1 || skip "needs nsenter (util-linux)"
	# Namespaces first: at_exit runs in reverse, so slurm_stop (scancel
	# through h1) runs before the namespaces go.
	netns_setup "$_smn"
	_slurm_prepare
	_slurm_multi=1
	_slurm_host=h1
	SLURM_CTLD_ADDR=$(netns_addr h1)
	_slurm_ctld_addr=$SLURM_CTLD_ADDR
	SLURM_NODES="h[1-$_smn]"
	SLURM_NODE=h1
	_cpus=${SLURM_TEST_CPUS:-8}
	_lines=""
	_smi=1
	while [ "$_smi" -le "$_smn" ]; do
		mkdir -p "$SLURM_DIR/spool/h$_smi"
		_lines="${_lines}NodeName=h$_smi NodeAddr=$(netns_addr "h$_smi") CPUs=$_cpus State=UNKNOWN
"
		_smi=$((_smi+1))
	done
	_slurm_write_conf "$_lines" "$SLURM_NODES"
	_slurm_start_munge
	# Spawned without the slurm_on function, so the recorded pid is the
	# daemon's (nsenter, unshare and sh all exec).
	_slurm_spawn slurmctld nsenter --net="/run/netns/$(netns_ns h1)" unshare --uts --mount \
		sh -c "$_SLURM_NS_WRAP" sh h1 "$NETNS_DIR" "$(_slurm_bin slurmctld)" -D -i -f "$SLURM_CONF"
	_smi=1
	while [ "$_smi" -le "$_smn" ]; do
		_slurm_spawn "slurmd.h$_smi" nsenter --net="/run/netns/$(netns_ns "h$_smi")" \
			unshare --uts --mount sh -c "$_SLURM_NS_WRAP" sh "h$_smi" "$NETNS_DIR" \
			"$(_slurm_bin slurmd)" -D -f "$SLURM_CONF" -N "h$_smi"
		_smi=$((_smi+1))
	done
	wait_for 60 _slurm_all_idle ||
		slurm_fail "nodes not idle after 60 s: $(slurm_client sinfo -h -N 2>&1 | head -n 5)"
	note "slurm: nodes $SLURM_NODES idle (slurmctld in h1 at $SLURM_CTLD_ADDR:$SLURM_CTLD_PORT)"
}

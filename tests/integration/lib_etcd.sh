# Real etcd members for the etcd suites: sourced after lib.sh, never run.
# etcd_cluster N starts N members on loopback ports picked by free_port (or,
# with ETCD_HOSTS="h1 h2 h3" set after netns_setup, one member per network
# namespace host at its address); every member is killed at exit, by its
# pid. Data lives on tmpfs when there is one, so fsync costs little. An etcd
# the machine runs (Debian's etcd-server on 127.0.0.1:2379, /var/lib/etcd) is
# neither used nor disturbed: free_port never hands out a port in use, 2379
# is used only inside the namespaces, and the data directories are ours.
ETCD=${ETCD:-/usr/bin/etcd}
ETCDCTL=${ETCDCTL:-/usr/bin/etcdctl}
need_etcd() { [ -x "$ETCD" ] && [ -x "$ETCDCTL" ] || skip "no etcd ($ETCD, $ETCDCTL): apt-get install etcd-server etcd-client"; }

_etcd_data=$(mktemp -d /dev/shm/crun-etcd-$$-XXXX 2>/dev/null || mktemp -d "$T/etcd-XXXX")
at_exit "rm -rf '$_etcd_data'"
ETCD_NAMES="" ETCD_EP="" ETCD_GEN=0

# etcd_cluster N [etcd flags...]: start N members, wait until they serve.
etcd_cluster() {
	_n=$1; shift
	_cl="" _i=1 ETCD_GEN=$((ETCD_GEN+1))
	for _m in $ETCD_NAMES; do etcd_kill "$_m"; done
	while [ $_i -le "$_n" ]; do
		if [ -n "${ETCD_HOSTS:-}" ]; then
			_h=$(echo $ETCD_HOSTS | cut -d' ' -f$_i)
			_a=$(netns_addr "$_h"); _cp=2379; _pp=2380
		else
			_h=""; _a=127.0.0.1; _cp=$(free_port); _pp=$(free_port)
		fi
		eval "_etcd_a_m$_i=$_a _etcd_cp_m$_i=$_cp _etcd_pp_m$_i=$_pp _etcd_h_m$_i=$_h"
		_cl="$_cl${_cl:+,}m$_i=http://$_a:$_pp"
		_i=$((_i+1))
	done
	ETCD_CLUSTER=$_cl ETCD_NAMES="" ETCD_EP=""
	_i=1
	while [ $_i -le "$_n" ]; do
		etcd_start m$_i "$@"
		ETCD_NAMES="$ETCD_NAMES m$_i"
		ETCD_EP="$ETCD_EP${ETCD_EP:+,}$(etcd_addr m$_i)"
		_i=$((_i+1))
	done
	for _m in $ETCD_NAMES; do
		wait_for 20 etcd_healthy "$_m" || { tail -n 20 "$T/etcd-$_m.log" >&2; fail "etcd member $_m never became healthy"; }
	done
}

etcd_addr() { eval "echo \$_etcd_a_$1:\$_etcd_cp_$1"; }

# etcd_start NAME [flags...]: (re)start member NAME of the cluster.
etcd_start() {
	_m=$1; shift
	eval "_a=\$_etcd_a_$_m _cp=\$_etcd_cp_$_m _pp=\$_etcd_pp_$_m _h=\$_etcd_h_$_m"
	_st=new; [ -d "$_etcd_data/$ETCD_GEN-$_m" ] && _st=existing
	set -- "$ETCD" --name "$_m" --data-dir "$_etcd_data/$ETCD_GEN-$_m" \
		--listen-client-urls "${ETCD_SCHEME:-http}://$_a:$_cp" --advertise-client-urls "${ETCD_SCHEME:-http}://$_a:$_cp" \
		--listen-peer-urls "http://$_a:$_pp" --initial-advertise-peer-urls "http://$_a:$_pp" \
		--initial-cluster "$ETCD_CLUSTER" --initial-cluster-state $_st \
		--initial-cluster-token "crun-$$-$ETCD_GEN" "$@"
	if [ -n "$_h" ]; then
		netns_spawn "$_h" "$T/etcd-$_m.log" "$@"
		eval "_etcd_pid_$_m=\$NETNS_PID"
	else
		"$@" >>"$T/etcd-$_m.log" 2>&1 &
		eval "_etcd_pid_$_m=$!"
		at_exit "kill -9 $! 2>/dev/null"
	fi
}

# Run etcdctl against member NAME (in its namespace when it has one).
etcd_ctl() {
	_m=$1; shift
	eval "_h=\$_etcd_h_$_m"
	if [ -n "$_h" ]; then
		netns_exec "$_h" env ETCDCTL_API=3 "$ETCDCTL" --endpoints="$(etcd_addr "$_m")" ${ETCDCTL_FLAGS:-} "$@"
	else
		ETCDCTL_API=3 "$ETCDCTL" --endpoints="${ETCD_SCHEME:-http}://$(etcd_addr "$_m")" ${ETCDCTL_FLAGS:-} "$@"
	fi
}
etcd_healthy() { etcd_ctl "$1" --command-timeout=1s endpoint health >/dev/null 2>&1; }

# etcd_kill NAME [SIG]: stop a member (SIGKILL by default).
etcd_kill() { eval "kill -${2:-9} \$_etcd_pid_$1" 2>/dev/null; }

# etcd_leader: the name of the member that leads now.
etcd_leader() {
	for _m in $ETCD_NAMES; do
		_s=$(etcd_ctl "$_m" --command-timeout=1s endpoint status -w json 2>/dev/null) || continue
		echo "$_s" | "$PYTHON" -c '
import json, sys
s = json.load(sys.stdin)[0]
sys.exit(0 if s["Status"]["leader"] == s["Status"]["header"]["member_id"] else 1)' && { echo "$_m"; return 0; }
	done
	return 1
}

# etcd_keys PREFIX: the keys under PREFIX, one a line.
etcd_keys() { for _m in $ETCD_NAMES; do etcd_ctl "$_m" --command-timeout=2s get --prefix --keys-only "$1" 2>/dev/null | grep . && return 0; done; return 0; }

# Agents on this machine against $EP with job id $JOB (etcd.sh, etcd_failover.sh).
agent_exited() { eval "exited \$pid_$1"; }
# agent NAME NPROC NNODES [crun flags and worker...]: crun in the background.
agent() {
	_name=$1 _np=$2 _nn=$3; shift 3
	"$CRUN" --nnodes="$_nn" --nproc_per_node="$_np" --rdzv_backend=etcd \
		--rdzv_endpoint="$EP" --rdzv_id="$JOB" "$@" >"$T/$_name.out" 2>&1 &
	eval "pid_$_name=\$!"
	at_exit "kill -9 $! 2>/dev/null"
}
# etcd_expect_status NAME WANT SECONDS: the agent exits within SECONDS with WANT.
etcd_expect_status() {
	wait_for "$3" agent_exited "$1" || { tail -n 20 "$T/$1.out" >&2; fail "agent $1 still running after $3 s"; }
	eval "wait \$pid_$1"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$1.out" >&2; fail "agent $1 exited $_rc, want $2"; }
}

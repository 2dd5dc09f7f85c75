# Multi-host helpers: each "host" is a Linux network namespace on this one
# machine. Sourced after lib.sh, never run:
#
#     . tests/integration/lib.sh
#     . tests/integration/lib_netns.sh
#     netns_setup 3                        # hosts h1 h2 h3 (skips unless root + iproute2)
#     netns_spawn h1 "$T/h1.log" "$CRUN" --rdzv_endpoint=h1:29400 ...
#     netns_exec h2 "$CRUN" --rdzv_endpoint=h1:29400 ...
#     netns_link_down h2; ...; netns_link_up h2
#
# API (HOST is "h<i>" or "<i>", 1-based):
#   netns_setup N          create hosts h1..hN (1 <= N <= 250) and register their
#                          removal with at_exit. Skips (exit 77) without root,
#                          iproute2, unshare, or kernel support for netns/veth/bridge.
#                          NETNS_OWN_NAME=loopback makes each host see its own
#                          name at 127.0.1.1 (Debian's default /etc/hosts), =none
#                          makes it unresolvable (containers); other hosts' names
#                          keep resolving. =nowhere: no host name resolves on any
#                          host (pods, cloud VMs without DNS): only localhost.
#   netns_exec HOST CMD... run CMD (a program, not a shell function; use sh -c for
#                          pipelines) in HOST, in the foreground. Environment and
#                          working directory are inherited.
#   netns_spawn HOST LOG CMD...  the same in the background, stdout+stderr to LOG,
#                          stdin from /dev/null. Sets NETNS_PID (also $!): it is the
#                          pid of CMD itself (ip, unshare and sh all exec); it
#                          enters the namespace a few ms after netns_spawn returns.
#   netns_addr HOST        print HOST's IPv4 address.
#   netns_ns HOST          print HOST's namespace name (for `ip -n NS ...`).
#   netns_link_down HOST   cut HOST's cable: its port on the switch goes down, so
#   netns_link_up HOST     packets to and from it are silently dropped (no RST, no
#                          ICMP); its own interface keeps its address but loses
#                          carrier. link_up plugs it back in (instantly forwarding).
#   netns_kill HOST [SIG]  send SIG (default KILL) to every process in HOST's netns
#                          (the whole "machine": agents and their workers).
#   netns_kill_all [GRACE] TERM every process in every host, KILL whatever is left
#                          after GRACE seconds (default 2), and reap.
#   netns_teardown         netns_kill_all, then delete the namespaces (which deletes
#                          every veth and the bridge) and the state directory.
#                          Idempotent; registered with at_exit by netns_setup, so it
#                          runs on pass, fail, skip, INT and TERM.
#   netns_cleanup_stale    remove leftovers of earlier runs whose owning shell is
#                          dead (pid gone, or reused: the start time is compared).
#                          Kills the processes still inside them. netns_setup calls it.
# Variables after setup: NETNS_N, NETNS_RID (<pid>-<rand>), NETNS_IFID (the same
# without "-", in interface names), NETNS_SUBNET
# (e.g. 10.19.200; host i is $NETNS_SUBNET.i/24), NETNS_DIR (state directory).
#
# Layout and naming. Nothing is created in, or changed about, the root network
# namespace: its interfaces, routes and sysctls are untouched.
#   crn-<pid>-<rand>-sw   the "switch" namespace: one bridge cb<pid><rand>, and the
#                         switch ends cs<pid><rand>-<i> of the veth pairs. No IP
#                         addresses, so it is pure layer 2 and cannot route.
#   crn-<pid>-<rand>-h<i> host i: lo up, ce<pid><rand>-<i> with $NETNS_SUBNET.<i>/24,
#                         a subnet route only (no default route).
# Each veth pair is created directly with one end in each namespace
# (`ip -n SW link add ... peer name ... netns HOST`), so it never exists in the
# root namespace even for an instant. Interface names are at most 15 chars
# (pid up to 7 digits, 2 hex, index up to 3 digits). The subnet is
# 10.<(pid/256)%256>.<pid%256>: concurrent runs get different subnets (they
# could not clash anyway, each run having its own isolated switch).
# State lives in /run/crun-netns/<pid>-<rand>/ (owner pid + start time, the hosts
# and resolv.conf files); it is written before any namespace exists, so a crash at
# any point leaves something netns_cleanup_stale can attribute.
#
# Names and hostnames. netns_exec/netns_spawn run
#     ip netns exec NS unshare --uts sh -c 'hostname h<i>; mount --bind ...; exec CMD'
# i.e. each command gets (a) its own UTS namespace whose hostname is h<i>, so
# gethostname() differs per host, as on real machines (crun's "is the endpoint
# host me?" check and its messages naming hosts behave as across machines); and
# (b) in the private mount namespace that `ip netns exec` creates, our hosts file
# bind-mounted over /etc/hosts (localhost plus h1..hN) and a resolv.conf that
# points at 127.0.0.1 with timeout:1 attempts:1, so an unknown name fails at once
# (ICMP port unreachable on lo) instead of waiting for an unreachable DNS server,
# and no DNS query ever leaves the namespace. This is instead of
# /etc/netns/<ns>/: nothing under /etc is written. Plain `ip netns exec` (e.g.
# when debugging by hand) gets neither the names nor the hostname.
#
# Notes on running crun inside (checked on kernel 6.18, iproute2 6.1):
#  - A new netns starts with its own defaults, not the root's values: somaxconn
#    4096, ip_local_port_range 32768-60999, tcp_keepalive_time 7200,
#    tcp_retries2 15, ip_forward 0. Those are fine for crun (listen backlog of a
#    few hundred agents fits in 4096; one agent per host uses few ports). Ports
#    are per namespace: every host can bind 29400 without clashing with the
#    root namespace or with other test runs, so multi-host tests need no
#    free_port. 127.0.0.1 inside a host is that host's own loopback.
#  - Nothing else is needed: crun binds the rendezvous port on 0.0.0.0 (or the
#    endpoint's address) in its host and others connect to h1:29400 by name.
#  - A cut link (netns_link_down) is silent: no RST, no ICMP, no EOF. Measured
#    here (h1 client connected to h2, then h2's link cut):
#      plain socket blocked in recv()                -> nothing after 12 s (never:
#                                                       keepalive_time is 7200 s)
#      100 bytes sent, then recv()                   -> nothing after 12 s (RTO
#                                                       retransmits, tcp_retries2=15
#                                                       gives up after ~15 min)
#      SO_KEEPALIVE, KEEPIDLE=1 KEEPINTVL=1 KEEPCNT=1 -> ETIMEDOUT ~2 s after the
#                                                       last traffic
#      TCP_USER_TIMEOUT=1000 + data in flight        -> ETIMEDOUT 1.4 s after send
#      connect() to a cut host (stale ARP entry)     -> EHOSTUNREACH after ~40 s
#    So "node loss detected within 2 s" needs crun's own heartbeat
#    (keep_alive_interval / keep_alive_max_attempt) with a read deadline on the
#    store host side (the host must also notice a silent agent: it only sees
#    missing heartbeats), or keepalive + TCP_USER_TIMEOUT on the store sockets;
#    "a lost TCP connection counts at once" only covers a dead peer process
#    (kernel sends FIN/RST), never a cut link. connect() needs its own timeout.
#    After netns_link_up, connections that have not timed out resume as if
#    nothing happened (retransmissions get through), so a test that cuts a link
#    must expect the cut node to come back with possibly stale state.
#  - Python note for tests: socket.timeout is TimeoutError (errno ETIMEDOUT)
#    since 3.10, so "except socket.timeout" also catches a kernel ETIMEDOUT.
#
# shellcheck shell=sh

NETNS_STATE_ROOT=/run/crun-netns
NETNS_PREFIX=crn
NETNS_RID=""
NETNS_N=0

_netns_idx() {
	case "$1" in h[0-9]*) _ni=${1#h} ;; [0-9]*) _ni=$1 ;; *) fail "netns: bad host '$1'" ;; esac
	case "$_ni" in *[!0-9]*) fail "netns: bad host '$1'" ;; esac
	[ "$_ni" -ge 1 ] && [ "$_ni" -le "$NETNS_N" ] || fail "netns: no host '$1' (have $NETNS_N)"
	echo "$_ni"
}
netns_ns() { _nn=$(_netns_idx "$1") || exit 1; echo "$NETNS_PREFIX-$NETNS_RID-h$_nn"; }
netns_addr() { _nn=$(_netns_idx "$1") || exit 1; echo "$NETNS_SUBNET.$_nn"; }
_netns_sw() { echo "$NETNS_PREFIX-$NETNS_RID-sw"; }

# Start time (clock ticks since boot) of a pid, empty if it is gone.
_netns_starttime() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# Is the run <pid>-<rand> still owned by a live shell?
_netns_owner_alive() {
	_op=${1%%-*}
	[ -d "/proc/$_op" ] || return 1
	if [ -r "$NETNS_STATE_ROOT/$1/owner" ]; then
		read -r _opid _ost <"$NETNS_STATE_ROOT/$1/owner" || return 0
		[ "$(_netns_starttime "$_op")" = "$_ost" ]
	else
		return 0 # no record: pid alive, assume it is the owner
	fi
}

# Our namespaces (all runs, or the run given as $1).
_netns_list() {
	ip netns list 2>/dev/null | while read -r _l _rest; do
		case "$_l" in "$NETNS_PREFIX-${1:-*}-"*) echo "$_l" ;; esac
	done
}

# Kill every process in the given namespaces: TERM, up to GRACE s, then KILL.
_netns_kill_in() {
	_g=$1; shift
	[ $# -gt 0 ] || return 0
	_pids=$(for _s; do ip netns pids "$_s" 2>/dev/null; done)
	[ -n "$_pids" ] || return 0
	# shellcheck disable=SC2086
	kill -TERM $_pids 2>/dev/null
	_k=$(( _g * 10 ))
	while [ $_k -gt 0 ]; do
		_pids=$(for _s; do ip netns pids "$_s" 2>/dev/null; done)
		[ -n "$_pids" ] || return 0
		sleep 0.1; _k=$((_k-1))
	done
	_k=30
	while [ $_k -gt 0 ]; do
		_pids=$(for _s; do ip netns pids "$_s" 2>/dev/null; done)
		[ -n "$_pids" ] || return 0
		# shellcheck disable=SC2086
		kill -KILL $_pids 2>/dev/null
		sleep 0.1; _k=$((_k-1))
	done
}

_netns_remove_run() { # RID: kill, delete namespaces, drop state
	_rr=$1
	# shellcheck disable=SC2046
	_netns_kill_in "${2:-1}" $(_netns_list "$_rr")
	for _s in $(_netns_list "$_rr"); do ip netns delete "$_s" 2>/dev/null; done
	rm -rf "${NETNS_STATE_ROOT:?}/$_rr"
}

netns_cleanup_stale() {
	_runs=$( { _netns_list | sed "s/^$NETNS_PREFIX-//; s/-[^-]*\$//"
		ls "$NETNS_STATE_ROOT" 2>/dev/null; } | sort -u)
	for _r in $_runs; do
		case "$_r" in [0-9]*-*) ;; *) continue ;; esac
		[ "$_r" = "$NETNS_RID" ] && continue
		_netns_owner_alive "$_r" && continue
		note "netns: removing leftovers of dead run $_r"
		_netns_remove_run "$_r" 0
	done
}

netns_kill() { # HOST [SIG]
	_ns=$(netns_ns "$1") || exit 1
	_pids=$(ip netns pids "$_ns" 2>/dev/null)
	# shellcheck disable=SC2086
	[ -z "$_pids" ] || kill "-${2:-KILL}" $_pids 2>/dev/null
	return 0
}

# Spawned pids that are still live children of this shell (a pid is only
# signalled while its parent is us, so a reused pid is never hit). They matter
# for a moment after netns_spawn, before the child has entered the namespace.
_netns_own_children() {
	[ -r "$NETNS_DIR/pids" ] || return 0
	while read -r _p; do
		_st=$(sed 's/^.*) //' "/proc/$_p/stat" 2>/dev/null | cut -d' ' -f1,2)
		[ "${_st#* }" = "$$" ] && [ "${_st% *}" != Z ] && echo "$_p"
	done <"$NETNS_DIR/pids"
}

netns_kill_all() { # [GRACE]
	[ -n "$NETNS_RID" ] || return 0
	_own=$(_netns_own_children)
	# shellcheck disable=SC2086
	[ -z "$_own" ] || kill -TERM $_own 2>/dev/null
	# shellcheck disable=SC2046
	_netns_kill_in "${1:-2}" $(_netns_list "$NETNS_RID")
	_own=$(_netns_own_children)
	# shellcheck disable=SC2086
	[ -z "$_own" ] || kill -KILL $_own 2>/dev/null
	# Reap the ones this shell spawned (no-op for others).
	if [ -r "$NETNS_DIR/pids" ]; then
		while read -r _p; do wait "$_p" 2>/dev/null; done <"$NETNS_DIR/pids"
		: >"$NETNS_DIR/pids"
	fi
	return 0
}

netns_teardown() {
	[ -n "$NETNS_RID" ] || return 0
	netns_kill_all 1
	_netns_remove_run "$NETNS_RID"
	return 0
}

# Run by sh -c in the host's netns and a new UTS namespace: $1 hostname,
# $2 state dir, then the command.
# shellcheck disable=SC2016
_NETNS_WRAP='_hf="$2/hosts"; [ -f "$2/hosts.$1" ] && _hf="$2/hosts.$1"
hostname "$1" && mount --bind "$_hf" /etc/hosts &&
mount --bind "$2/resolv.conf" /etc/resolv.conf || exit 125; shift 2; exec "$@"'

netns_exec() { # HOST CMD...
	_nn=$(_netns_idx "$1") || exit 1; shift
	[ $# -gt 0 ] || fail "netns_exec: no command"
	ip netns exec "$NETNS_PREFIX-$NETNS_RID-h$_nn" unshare --uts sh -c \
		"$_NETNS_WRAP" \
		sh "h$_nn" "$NETNS_DIR" "$@"
}

netns_spawn() { # HOST LOG CMD...
	_nn=$(_netns_idx "$1") || exit 1
	_log=$2; shift 2
	[ $# -gt 0 ] || fail "netns_spawn: no command"
	ip netns exec "$NETNS_PREFIX-$NETNS_RID-h$_nn" unshare --uts sh -c \
		"$_NETNS_WRAP" \
		sh "h$_nn" "$NETNS_DIR" "$@" >"$_log" 2>&1 </dev/null &
	NETNS_PID=$!
	echo "$NETNS_PID" >>"$NETNS_DIR/pids"
}

netns_link_down() { _nn=$(_netns_idx "$1") || exit 1; ip -n "$(_netns_sw)" link set "cs$NETNS_IFID-$_nn" down || fail "netns_link_down $1"; }
netns_link_up() { _nn=$(_netns_idx "$1") || exit 1; ip -n "$(_netns_sw)" link set "cs$NETNS_IFID-$_nn" up || fail "netns_link_up $1"; }

netns_setup() { # N
	_n=${1:-}
	case "$_n" in ''|*[!0-9]*) fail "netns_setup: bad host count '$_n'" ;; esac
	[ "$_n" -ge 1 ] && [ "$_n" -le 250 ] || fail "netns_setup: host count $_n not in 1..250"
	[ -z "$NETNS_RID" ] || fail "netns_setup: called twice"
	need_root "network namespaces"
	command -v ip >/dev/null 2>&1 || skip "needs iproute2 (ip)"
	command -v unshare >/dev/null 2>&1 || skip "needs unshare (util-linux)"
	ip netns list >/dev/null 2>&1 || skip "ip has no netns support"

	netns_cleanup_stale
	_r=$(od -An -N1 -tx1 /dev/urandom | tr -d ' \n')
	NETNS_RID="$$-$_r"
	NETNS_IFID="$$$_r"
	NETNS_DIR=$NETNS_STATE_ROOT/$NETNS_RID
	NETNS_SUBNET="10.$(( ($$ / 256) % 256 )).$(( $$ % 256 ))"
	mkdir -p "$NETNS_DIR" || skip "cannot create $NETNS_DIR"
	echo "$$ $(_netns_starttime $$)" >"$NETNS_DIR/owner"
	: >"$NETNS_DIR/pids"
	at_exit netns_teardown

	_sw=$(_netns_sw)
	_e=$T/netns-setup.err
	ip netns add "$_sw" 2>"$_e" || skip "cannot create a network namespace: $(cat "$_e")"
	ip -n "$_sw" link add "cb$NETNS_IFID" type bridge 2>"$_e" ||
		skip "cannot create a bridge (kernel module?): $(cat "$_e")"
	ip -n "$_sw" link set "cb$NETNS_IFID" up || fail "netns_setup: bridge up"
	ip -n "$_sw" link set lo up
	{
		printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
		_i=1; while [ $_i -le "$_n" ]; do printf '%s.%s\th%s\n' "$NETNS_SUBNET" $_i $_i; _i=$((_i+1)); done
	} >"$NETNS_DIR/hosts"
	# NETNS_OWN_NAME=loopback: each host finds its own name at 127.0.1.1
	# (Debian's default /etc/hosts); =none: its own name does not resolve;
	# =nowhere: no host's name resolves anywhere.
	case "${NETNS_OWN_NAME:-}" in loopback|none|nowhere)
		_i=1; while [ $_i -le "$_n" ]; do
			{
				printf '127.0.0.1\tlocalhost\n'
				[ "$NETNS_OWN_NAME" = loopback ] && printf '127.0.1.1\th%s\n' $_i
				_j=1; while [ "$NETNS_OWN_NAME" != nowhere ] && [ $_j -le "$_n" ]; do
					[ $_j -eq $_i ] || printf '%s.%s\th%s\n' "$NETNS_SUBNET" $_j $_j
					_j=$((_j+1))
				done
			} >"$NETNS_DIR/hosts.h$_i"
			_i=$((_i+1))
		done ;;
	esac
	printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$NETNS_DIR/resolv.conf"

	_i=1
	while [ $_i -le "$_n" ]; do
		_h=$NETNS_PREFIX-$NETNS_RID-h$_i
		_s=cs$NETNS_IFID-$_i
		_v=ce$NETNS_IFID-$_i
		ip netns add "$_h" 2>"$_e" || fail "netns_setup: ip netns add $_h: $(cat "$_e")"
		ip -n "$_sw" link add "$_s" type veth peer name "$_v" netns "$_h" 2>"$_e" ||
			skip "cannot create a veth pair (kernel module?): $(cat "$_e")"
		ip -n "$_sw" link set "$_s" master "cb$NETNS_IFID" up &&
		ip -n "$_h" link set lo up &&
		ip -n "$_h" addr add "$NETNS_SUBNET.$_i/24" dev "$_v" &&
		ip -n "$_h" link set "$_v" up 2>"$_e" || fail "netns_setup: configuring $_h: $(cat "$_e")"
		_i=$((_i+1))
	done
	NETNS_N=$_n
	# A one-line summary helps when reading a failed test's output.
	note "netns: $_n hosts h1..h$_n = $NETNS_SUBNET.1..$_n (run $NETNS_RID)"
}

#!/bin/sh
# Self-test of lib_netns.sh: 3 hosts reach each other by address and by name,
# each has its own hostname, nothing routes through the root namespace, a cut
# link makes a host unreachable and restoring it brings it back, and every
# namespace/interface/state file of a run is gone after it ends -- on success,
# on failure, on SIGTERM, and (via netns_cleanup_stale) after SIGKILL.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh

PORT=5000 # ports are per namespace: no clash with anything outside

# A server that answers every connection with its hostname.
cat >"$T/server.py" <<'EOF'
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(64)
while True:
    c, _ = s.accept(); c.sendall((socket.gethostname() + "\n").encode()); c.close()
EOF
# probe HOST PORT TIMEOUT: print the server's reply, or ERR <reason>.
cat >"$T/probe.py" <<'EOF'
import socket, sys, errno
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    print(c.makefile().readline().strip())
except socket.timeout:
    print("ERR timeout")
except socket.gaierror as e:
    print("ERR resolve")
except OSError as e:
    print("ERR " + errno.errorcode.get(e.errno, str(e.errno)))
EOF
probe() { netns_exec "$1" "$PYTHON" "$T/probe.py" "$2" "$PORT" "${3:-2}"; }

# 1. Three hosts with servers.
# shellcheck disable=SC2317 # functions below are called through wait_for
pid_in() { ip netns pids "$(netns_ns "$1")" | grep -qx "$2"; }
netns_setup 3
for h in h1 h2 h3; do
	netns_spawn $h "$T/server-$h.log" "$PYTHON" "$T/server.py" $PORT
	# NETNS_PID is CMD's pid; it enters the namespace a moment after the fork.
	wait_for 2 pid_in $h "$NETNS_PID" || fail "netns_spawn pid $NETNS_PID is not in $h"
done
# answers HOST TARGET WANT: probe (re-run on every call, for wait_for) gives WANT.
answers() { [ "$(probe "$1" "$2" 1)" = "$3" ]; }
for h in h1 h2 h3; do
	wait_for 5 answers $h 127.0.0.1 $h || fail "server in $h did not come up"
done

# 2. Hostnames and name resolution.
expect_eq "hostname in h2" "$(netns_exec h2 hostname)" h2
[ "$(hostname)" != h2 ] || fail "root hostname changed"
for h in h1 h2 h3; do
	expect_eq "h1 resolves $h" "$(netns_exec h1 getent hosts $h | awk '{print $1}')" "$(netns_addr $h)"
done
start=$(date +%s)
netns_exec h1 getent hosts no-such-host >/dev/null && fail "unknown name resolved"
[ $(( $(date +%s) - start )) -le 3 ] || fail "resolving an unknown name took more than 3 s"

# 3. Full mesh by address and by name; the reply names the host reached.
for a in h1 h2 h3; do
	for b in h1 h2 h3; do
		[ $a = $b ] && continue
		expect_eq "$a -> $b by address" "$(probe $a "$(netns_addr $b)")" $b
		expect_eq "$a -> $b by name" "$(probe $a $b)" $b
	done
done

# 4. The root namespace is not a route: hosts have only their subnet route,
# reach each other directly (no "via"), cannot reach the root's addresses, the
# switch has no addresses, and the root has no interface or route of this run.
for h in h1 h2 h3; do
	routes=$(ip -n "$(netns_ns $h)" -4 route show)
	expect_eq "routes in $h" "$(echo "$routes" | awk '{print $1}' | tr '\n' ' ')" "$NETNS_SUBNET.0/24 "
	ip -n "$(netns_ns $h)" route get "$(netns_addr h1)" | grep -q ' via ' && fail "$h routes via a gateway"
done
root_addr=$(ip -4 -o addr show scope global | awk '{sub("/.*","",$4); print $4; exit}')
if [ -n "$root_addr" ]; then
	r=$(probe h1 "$root_addr" 1)
	expect_eq "h1 -> root namespace $root_addr" "$r" "ERR ENETUNREACH"
fi
[ -z "$(ip -n "crn-$NETNS_RID-sw" -o addr show scope global)" ] || fail "switch namespace has addresses"
ip -o link show | grep -q "$NETNS_IFID" && fail "an interface of this run is in the root namespace"
ip route show | grep -q "^$NETNS_SUBNET\." && fail "root namespace has a route to $NETNS_SUBNET.0/24"

# 5. Cutting h3's link: unreachable from h1 and h2 (silently: a timeout),
# h1 <-> h2 unaffected; link up restores it.
netns_link_down h3
expect_eq "h1 -> h3 with h3's link down" "$(probe h1 h3 1)" "ERR timeout"
expect_eq "h3 -> h2 with h3's link down" "$(probe h3 h2 1)" "ERR timeout"
expect_eq "h1 -> h2 with h3's link down" "$(probe h1 h2)" h2
netns_link_up h3
wait_for 5 answers h1 h3 h3 || fail "h3 unreachable after link up"
# h3's neighbour entry for h2 failed while the link was down: the kernel
# answers EHOSTUNREACH until it resolves h2 again, as on a real host.
wait_for 5 answers h3 h2 h2 || fail "h3 -> h2 after link up: got '$(probe h3 h2 1)'"

# 6. netns_kill ends everything in one host only.
no_pids() { [ -z "$(ip netns pids "$(netns_ns "$1")")" ]; }
netns_kill h2
wait_for 3 no_pids h2 || fail "netns_kill h2 left processes"
expect_eq "h1 -> h2 after killing h2" "$(probe h1 h2 1)" "ERR ECONNREFUSED"
expect_eq "h2 -> h1 after killing h2" "$(probe h2 h1)" h1

# 7. Explicit teardown removes everything of this run.
rid=$NETNS_RID ifid=$NETNS_IFID
netns_teardown
! ip netns list | grep -q -- "-$rid-" || fail "namespaces of $rid remain: $(ip netns list | grep -- "-$rid-")"
[ ! -e "/run/crun-netns/$rid" ] || fail "state of $rid remains"
ip -o link show | grep -q "$ifid" && fail "an interface of $rid is in the root namespace"
NETNS_RID="" # nothing left for at_exit

# 8. Child runs that fail, get SIGTERM, or get SIGKILL leave nothing behind
# (the last one after netns_cleanup_stale).
cat >"$T/child.sh" <<EOF
. tests/integration/lib.sh
. tests/integration/lib_netns.sh
netns_setup 2
echo "\$NETNS_RID" >"$T/child.rid"
netns_spawn h1 /dev/null sleep 1000
echo \$NETNS_PID >"$T/child.pids"
netns_spawn h2 /dev/null sleep 1000
echo \$NETNS_PID >>"$T/child.pids"
echo ready >"$T/child.ready"
case "\$1" in fail) fail "deliberate failure" ;; wait) wait ;; esac
EOF
ended() { # PID: gone, or a zombie
	[ ! -e /proc/$1/stat ] || [ "$(sed 's/.*) //' /proc/$1/stat 2>/dev/null | cut -d' ' -f1)" = Z ]
}
leftovers() { # RID: print anything of the run that still exists
	ip netns list | grep -- "-$1-"
	[ ! -e "/run/crun-netns/$1" ] || echo "/run/crun-netns/$1"
	ip -o link show | grep "$(echo "$1" | tr -d -)"
}
for how in fail TERM KILL; do
	rm -f "$T/child.rid" "$T/child.ready"
	if [ $how = fail ]; then
		sh "$T/child.sh" fail 2>"$T/child.err"; rc=$?
		expect_eq "child exit status" $rc 1
	else
		sh "$T/child.sh" wait 2>"$T/child.err" & cpid=$!
		wait_for 10 test -e "$T/child.ready" || fail "child ($how) did not set up: $(cat "$T/child.err")"
		crid=$(cat "$T/child.rid")
		ip netns list | grep -q -- "-$crid-h1" || fail "child namespaces not found"
		kill -$how $cpid; wait $cpid 2>/dev/null
	fi
	crid=$(cat "$T/child.rid")
	[ $how = KILL ] && {
		[ -n "$(leftovers "$crid")" ] || fail "SIGKILLed child left nothing: test is broken"
		netns_cleanup_stale >/dev/null
	}
	left=$(leftovers "$crid")
	[ -z "$left" ] || fail "after child $how: leftovers: $left"
	# Its processes were inside its namespaces: they must be gone too (a
	# zombie has ended: its reaper, maybe init, collects it when it will).
	for p in $(cat "$T/child.pids"); do
		wait_for 2 ended $p || fail "after child $how: its process $p still runs"
	done
done
exit 0

#!/bin/sh
# The chaos suite (`make chaos`): set up three network-namespace hosts when
# root (tests/integration/lib_netns.sh; without root the netns scenarios are
# skipped with the reason printed), then run the driver tests/chaos/chaos.py.
# CHAOS_SEED, CHAOS_RUNS, CHAOS_PICK, CHAOS_ONLY: see chaos.py.
_fw=${FAKE_WORKER:-}
. tests/integration/lib.sh
. tests/integration/lib_netns.sh
FAKE_WORKER=${_fw:-$FAKE_WORKER}

[ -x "$CRUN" ] || fail "$CRUN is not built (make check-build)"
[ -x "$FAKE_WORKER" ] || fail "$FAKE_WORKER is not built (make check-build)"
export CRUN FAKE_WORKER PYTHON

if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1; then
	# netns_setup skips (exits) when the kernel cannot: try it in a subshell
	# first, which removes what it made on its way out.
	if (trap netns_teardown EXIT; netns_setup 1) >/dev/null 2>&1; then
		netns_setup 3
		CHAOS_NETNS=1
	else
		CHAOS_NETNS_WHY="netns_setup failed (kernel support?)"
	fi
else
	CHAOS_NETNS_WHY="network namespaces need root, ip and unshare"
fi
if [ "${CHAOS_NETNS:-0}" = 1 ]; then
	CHAOS_NETNS_PREFIX=$NETNS_PREFIX CHAOS_NETNS_RID=$NETNS_RID CHAOS_NETNS_IFID=$NETNS_IFID
	CHAOS_NETNS_N=$NETNS_N CHAOS_NETNS_DIR=$NETNS_DIR CHAOS_NETNS_WRAP=$_NETNS_WRAP
	export CHAOS_NETNS CHAOS_NETNS_PREFIX CHAOS_NETNS_RID CHAOS_NETNS_IFID CHAOS_NETNS_N \
		CHAOS_NETNS_DIR CHAOS_NETNS_WRAP
else
	note "chaos: netns scenarios skipped: $CHAOS_NETNS_WHY"
	export CHAOS_NETNS_WHY
fi
"$PYTHON" tests/chaos/chaos.py

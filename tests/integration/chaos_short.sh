#!/bin/sh
# A short fixed-seed sample of the chaos suite (tests/chaos/, `make chaos`):
# 21 randomized fault scenarios, one cycle of the kinds (every kind once when
# root), each checked for crun's promised exit statuses, no orphans and no
# hangs. Netns scenarios run when root. The seed's sigstop stops a non-host
# (a stopped store host alone costs join_timeout, 20 s).
CHAOS_SEED=${CHAOS_SHORT_SEED:-20261203} CHAOS_RUNS=21 CHAOS_PICK= CHAOS_ONLY= \
	exec sh tests/chaos/run.sh

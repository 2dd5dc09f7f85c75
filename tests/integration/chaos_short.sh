#!/bin/sh
# A short fixed-seed sample of the chaos suite (tests/chaos/, `make chaos`):
# 10 randomized fault scenarios, each checked for crun's promised exit
# statuses, no orphans and no hangs. Netns scenarios run when root.
CHAOS_SEED=${CHAOS_SHORT_SEED:-20261201} CHAOS_RUNS=10 CHAOS_PICK= CHAOS_ONLY= \
	exec sh tests/chaos/run.sh

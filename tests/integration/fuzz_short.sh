#!/bin/sh
# A short libFuzzer run (~15 s) of the store's wire decoder; `make fuzz` runs
# it longer. Skips when clang or its libFuzzer is missing.
. tests/integration/lib.sh
command -v xxd >/dev/null 2>&1 || skip "no xxd (apt-get install xxd)"
FUZZ_SECONDS=${FUZZ_SECONDS:-15} sh tests/fuzz/run.sh

#!/bin/sh
# A short libFuzzer run of every target in tests/fuzz/ (the store's wire
# decoder, the rendezvous record parsers, the records `crun status` reads,
# the INI loader, the command line,
# the hostlist expander, the stack dump reader and the job console's
# records), 3 s each; `make fuzz` runs each for 1M
# executions. Skips when clang or its libFuzzer is missing.
. tests/integration/lib.sh
command -v xxd >/dev/null 2>&1 || skip "no xxd (apt-get install xxd)"
FUZZ_RUNS='' FUZZ_SECONDS=${FUZZ_SECONDS:-3} sh tests/fuzz/run.sh

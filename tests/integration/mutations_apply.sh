#!/bin/sh
# Every mutation of tests/mutate/mutations.txt still applies to the tree:
# its find text is on exactly one line of its file (after its `after` line),
# and its replacement changes that line. Nothing is built (mutate.py
# --check): this only catches a code move or edit that left a mutation
# pointing at nothing, which `make mutate` would report as STALE much later.
cd "$(dirname "$0")/../.." || exit 1
exec python3 tests/mutate/mutate.py --check

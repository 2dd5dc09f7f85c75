#!/bin/sh
# Build and run the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang,
# straight from the src/ files each needs, into build-fuzz/. Each target runs
# for $FUZZ_SECONDS seconds (default 60) from a seed corpus: the PyTorch 1.13
# byte captures in tests/data/store_frames.hex. Exits 77 if clang has no
# libFuzzer, 1 on a crash (the reproducer is left in build-fuzz/).
set -eu
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
CLANG=${CLANG:-clang}
OUT=build-fuzz
mkdir -p "$OUT"
command -v "$CLANG" >/dev/null 2>&1 || { echo "SKIP: fuzz: no $CLANG" >&2; exit 77; }
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$OUT/probe.c"
"$CLANG" -fsanitize=fuzzer "$OUT/probe.c" -o "$OUT/probe" 2>/dev/null ||
	{ echo "SKIP: fuzz: $CLANG has no libFuzzer (apt-get install clang)" >&2; exit 77; }

FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11 -D_GNU_SOURCE -Iinclude -Isrc"

# fuzz_store_wire: the frame decoder.
"$CLANG" $FLAGS tests/fuzz/fuzz_store_wire.c src/store_wire.c src/err.c \
	$(pkg-config --cflags --libs libuv) -o "$OUT/fuzz_store_wire"
corpus="$OUT/corpus_store_wire"
mkdir -p "$corpus"
i=0
grep -v '^#' tests/data/store_frames.hex | while read -r hex; do
	i=$((i + 1))
	# First byte: feeding mode (auto generation, pieces of 1 byte).
	printf '00%s' "$hex" | xxd -r -p >"$corpus/seed$i"
done
"$OUT/fuzz_store_wire" -max_total_time="$FUZZ_SECONDS" -max_len=4096 \
	-artifact_prefix="$OUT/" -print_final_stats=1 "$corpus" 2>"$OUT/fuzz_store_wire.log" || {
	tail -n 40 "$OUT/fuzz_store_wire.log" >&2
	echo "FAIL: fuzz_store_wire crashed; reproducer in $OUT/" >&2
	exit 1
}
grep -E '^stat::number_of_executed_units' "$OUT/fuzz_store_wire.log" | sed 's/^/fuzz_store_wire: /'
exit 0

#!/bin/sh
# Build and run the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang,
# straight from the src/ files each needs, into build-fuzz/:
#   fuzz_store_wire     the store's frame decoder
#   fuzz_rdzv_records   the rendezvous record parsers (descriptors, ...)
#   fuzz_rdzv_status    the records `crun status` reads (params, failure, ...)
#   fuzz_cfg_ini        the INI job-file loader (and cfg_finalize)
#   fuzz_cli            the command line (cfg_parse_args, cfg_finalize)
#   fuzz_hostlist       the Slurm hostlist expander (and compressor)
#   fuzz_pystack        the py-spy / faulthandler stack dump reader (and
#                       the stacks answers `crun status --stacks` reads)
#   fuzz_jobcon_records the job console's records, as the store host reads
#                       a peer's batch
# Each starts from its seed corpus: tests/fuzz/corpus/<target>/ (for the
# frame decoder, the PyTorch 1.13 captures in tests/data/store_frames.hex),
# plus the examples in configs/ for the job-file loader. Each runs for
# FUZZ_RUNS executions if set (make fuzz: 1000000), else FUZZ_SECONDS
# seconds (default 60). FUZZ_TARGETS="a b" runs only those. Exits 77 if
# clang has no libFuzzer, 1 on a crash, and prints each target's
# executions. libFuzzer's artifacts (crash-*, leak-*, timeout-*, oom-*,
# slow-unit-*: the input that failed, to replay with
# build-fuzz/fuzz_<target> FILE) go to build-fuzz/artifacts/ (FUZZ_ARTIFACTS),
# which git ignores, never to the current directory.
set -eu
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_RUNS=${FUZZ_RUNS:-}
CLANG=${CLANG:-clang}
OUT=build-fuzz
ARTIFACTS=${FUZZ_ARTIFACTS:-$OUT/artifacts}
mkdir -p "$OUT" "$ARTIFACTS"
command -v "$CLANG" >/dev/null 2>&1 || { echo "SKIP: fuzz: no $CLANG" >&2; exit 77; }
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$OUT/probe.c"
"$CLANG" -fsanitize=fuzzer "$OUT/probe.c" -o "$OUT/probe" 2>/dev/null ||
	{ echo "SKIP: fuzz: $CLANG has no libFuzzer (apt-get install clang)" >&2; exit 77; }

FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11 -D_GNU_SOURCE -DCRUN_VERSION=\"fuzz\" -Iinclude -Isrc"
CFG_SRC="src/cfg/cfg.c src/cfg/cfg_args.c src/cfg/cfg_ini.c src/cfg/cfg_parse.c src/cfg/cfg_rdzv.c src/cfg/cfg_slurm.c src/base/log.c src/cfg/slurm.c src/cfg/hostlist.c src/base/err.c src/node/gpu.c src/http/etcd.c src/http/curl_uv.c src/http/curl_dl.c src/node/binding.c"

# sources TARGET: the src/ files and libraries a target needs.
sources() {
	case $1 in
	store_wire) echo "src/store/store_wire.c src/base/err.c $(pkg-config --cflags --libs libuv)" ;;
	rdzv_records | rdzv_status) echo "src/rdzv/rdzv_records.c src/node/fingerprint.c src/node/pyexec.c src/base/err.c $(pkg-config --cflags --libs libuv)" ;;
	hostlist) echo "src/cfg/hostlist.c src/base/err.c $(pkg-config --cflags --libs libuv)" ;;
	pystack) echo "src/proc/pystack.c src/rdzv/rdzv_stacks.c src/base/err.c $(pkg-config --cflags --libs libuv)" ;;
	jobcon_records) echo "agent/jobrec.c src/base/ranges.c $(pkg-config --cflags --libs libuv)" ;;
	cfg_ini | cli) echo "$CFG_SRC $(pkg-config --cflags --libs libuv inih libcurl jansson libsodium hwloc) -ldl" ;;
	esac
}
# options TARGET: extra libFuzzer flags.
options() {
	case $1 in
	cli) echo "-close_fd_mask=1 -max_len=1024" ;; # --help writes to stdout
	cfg_ini) echo "-max_len=4096" ;;
	*) echo "-max_len=4096" ;;
	esac
}
# seed TARGET DIR: fill a target's working corpus from the seeds.
seed() {
	cp tests/fuzz/corpus/"$1"/* "$2"/ 2>/dev/null || true
	case $1 in
	store_wire)
		i=0
		grep -v '^#' tests/data/store_frames.hex | while read -r hex; do
			i=$((i + 1))
			# First byte: feeding mode (auto generation, pieces of 1 byte).
			printf '00%s' "$hex" | xxd -r -p >"$2/seed$i"
		done ;;
	cfg_ini) cp configs/*.ini "$2"/ 2>/dev/null || true ;;
	pystack)
		cp tests/data/pystack/*.txt "$2"/
		printf 'crun-stacks 1\nrank 3 1 4 f (t.py:1)\nabc\n\n' >"$2/answer" ;;
	esac
}

# build TARGET: compile each src/ file once into $OUT/obj (again only when
# it or a header is newer), then link the target.
build() {
	objs="" libs=""
	newest=$(ls -t include/crun/*.h src/*/*.h agent/*.h | head -n 1)
	mkdir -p "$OUT/obj"
	for f in $(sources "$1"); do
		case $f in
		*.c)
			o="$OUT/obj/$(basename "$f" .c).o"
			if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$newest" -nt "$o" ]; then
				# shellcheck disable=SC2086
				"$CLANG" $FLAGS -c "$f" -o "$o"
			fi
			objs="$objs $o" ;;
		*) libs="$libs $f" ;;
		esac
	done
	# shellcheck disable=SC2086
	"$CLANG" $FLAGS "tests/fuzz/fuzz_$1.c" $objs $libs -o "$OUT/fuzz_$1"
}

targets=${FUZZ_TARGETS:-"store_wire rdzv_records rdzv_status cfg_ini cli hostlist pystack jobcon_records"}
for t in $targets; do
	build "$t"
	corpus="$OUT/corpus_$t"
	mkdir -p "$corpus"
	seed "$t" "$corpus"
	if [ -n "$FUZZ_RUNS" ]; then
		limit="-runs=$FUZZ_RUNS"
	else
		limit="-max_total_time=$FUZZ_SECONDS"
	fi
	# shellcheck disable=SC2046
	"$OUT/fuzz_$t" $limit $(options "$t") -rss_limit_mb=2048 -timeout=10 \
		-artifact_prefix="$ARTIFACTS/" -print_final_stats=1 "$corpus" 2>"$OUT/fuzz_$t.log" || {
		tail -n 40 "$OUT/fuzz_$t.log" >&2
		echo "FAIL: fuzz_$t crashed; reproducer in $ARTIFACTS/" >&2
		exit 1
	}
	grep -E '^stat::number_of_executed_units' "$OUT/fuzz_$t.log" | sed "s/^/fuzz_$t: /"
done
exit 0

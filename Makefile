# crun: a torchrun-style elastic launcher. See README.md.
#
#   make            build build/crun and build/libcrun.a
#   make test       install what is missing, build, run every test
#   make demo       install what is missing, build, run a real multi-worker job
#   make asan       the same tests under AddressSanitizer + UBSan (build-asan/)
#   make bench      benchmarks against the torchrun anchor (tests/bench/); fails on a missed target
#   make bench-scale  the scale curves (minutes): docs/scale.csv and docs/scale.svg
#   make coverage   make test on a --coverage build (build-cov/): line and branch
#                   coverage of src/ agent/ launcher/, failing below the floor
#   make mutate     single-line mutations (tests/mutate/), each must fail its tests
#   make fuzz       1M libFuzzer runs of each parser (wire, records, INI, CLI, hostlist, stack dumps, console records)
#   make install    PREFIX=/usr/local DESTDIR=
#   make wheel      dist/crun_launcher-*.whl for x86_64 and aarch64 (pip install it anywhere)
#   make windows    build-win/crun.exe, cross-compiled with mingw-w64

CC ?= cc
PKG_CONFIG ?= pkg-config
PREFIX ?= /usr/local
BUILD ?= build
VERSION = 0.1.0

PKGS = libuv libcurl inih jansson libsodium libmicrohttpd hwloc

# Make calls the idempotent installer only when a build dependency is missing.
ifneq ($(shell $(PKG_CONFIG) --exists $(PKGS) criterion 2>/dev/null && echo ok),ok)
$(info crun: build dependencies missing, running scripts/install-deps.sh)
$(shell sh scripts/install-deps.sh 1>&2)
endif

STD = -std=c11 -D_GNU_SOURCE
WARN = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wwrite-strings -Wformat=2 -Wvla -Wimplicit-fallthrough -fno-common \
       -Wno-unused-parameter
WERROR ?= 1
ifeq ($(WERROR),1)
WARN += -Werror
endif
OPT ?= -O2 -g
ifneq ($(SANITIZE),)
override OPT += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
LDSAN = -fsanitize=$(SANITIZE)
endif

DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS))
DEP_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS))
# crun itself opens libcurl, libmicrohttpd and libhwloc on first use
# (src/http/curl_dl.c, src/http/mhd_dl.c, src/node/hwloc_dl.c): never
# linked, whatever the linker's --as-needed default.
# The libraries every run uses (libuv, inih, jansson, libsodium) go in
# statically when their archives are there (Debian's -dev packages ship
# them; else they are linked as usual): libc is then the only library to
# map and relocate at every start (0.35 ms of a short run here), and the
# agent has 26 mappings instead of 41 for every fork of it to copy.
UV_STATIC := $(shell $(PKG_CONFIG) --exists libuv-static 2>/dev/null && echo libuv-static)
LD_STATIC := -Wl,-Bstatic
LD_DYNAMIC := -Wl,-Bdynamic
# $(call static_pkg,PKG,NAME): PKG when libNAME.a is in its libdir.
static_pkg = $(if $(wildcard $(shell $(PKG_CONFIG) --variable=libdir $1)/lib$2.a),$1)
STATIC_PKGS := $(strip $(call static_pkg,inih,inih) $(call static_pkg,jansson,jansson) \
	$(call static_pkg,libsodium,sodium))
SHARED_PKGS := $(filter-out libcurl libmicrohttpd hwloc $(STATIC_PKGS) $(if $(UV_STATIC),libuv),$(PKGS))
BIN_LIBS := $(if $(SHARED_PKGS),$(shell $(PKG_CONFIG) --libs $(SHARED_PKGS))) \
	$(if $(STATIC_PKGS),$(LD_STATIC) $(shell $(PKG_CONFIG) --libs $(STATIC_PKGS)) $(LD_DYNAMIC)) \
	$(if $(UV_STATIC),$(shell $(PKG_CONFIG) --libs --static libuv-static)) -pthread -ldl
CRITERION_LIBS := $(shell $(PKG_CONFIG) --libs criterion)
ALL_CFLAGS = $(STD) $(WARN) $(OPT) -Iinclude -DCRUN_VERSION='"$(VERSION)"' $(DEP_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = $(LDSAN) $(LDFLAGS)

LIB_SRC := $(wildcard src/*/*.c)
BIN_SRC := $(wildcard launcher/*.c agent/*.c)
EXE :=
# The Windows build (make windows, scripts/windows.sh): every file but those
# with a Windows counterpart (X_win.c for X.c) and Linux's own (netlink,
# hwloc: binding is refused there), each unit starting with
# include/compat/win/crun_win.h.
ifeq ($(TARGET_OS),windows)
LINUX_ONLY := src/node/nldump.c src/node/hwloc_dl.c
WIN_SRC := $(wildcard src/*/*_win.c launcher/*_win.c)
LIB_SRC := $(filter-out $(LINUX_ONLY) $(WIN_SRC:_win.c=.c),$(LIB_SRC))
BIN_SRC := $(filter-out $(LINUX_ONLY) $(WIN_SRC:_win.c=.c),$(BIN_SRC))
STD += -D__USE_MINGW_ANSI_STDIO=1 -D_POSIX_THREAD_SAFE_FUNCTIONS=200112L -DCURL_STATICLIB \
	-Iinclude/compat/win \
	-include include/compat/win/crun_win.h
# (mingw-w64's C99 printf, which gcc's printf attribute does not know there:
# the formats are checked by the Linux build)
WARN += -Wno-format
EXE := .exe
else
LIB_SRC := $(filter-out %_win.c,$(LIB_SRC))
BIN_SRC := $(filter-out %_win.c,$(BIN_SRC))
endif
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
BIN_OBJ := $(BIN_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HELPER_SRC := $(wildcard tests/helpers/*.c)
HELPER_BIN := $(HELPER_SRC:tests/helpers/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/tests/%)

all: $(BUILD)/crun $(BUILD)/libcrun.a

# Every unit of src/, agent/ and launcher/ starts with include/crun/banned.h:
# strcpy, strcat, sprintf and atoi do not compile there.
$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -include include/crun/banned.h -MMD -MP -c $< -o $@

$(BUILD)/libcrun.a: $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/crun$(EXE): $(BIN_OBJ) $(BUILD)/libcrun.a
	$(CC) $(ALL_LDFLAGS) -o $@ $(BIN_OBJ) $(BUILD)/libcrun.a $(BIN_LIBS) -lm

$(BUILD)/tests/test_%: tests/unit/test_%.c $(BUILD)/libcrun.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itests -MMD -MP -o $@ $< $(BUILD)/libcrun.a $(ALL_LDFLAGS) $(DEP_LIBS) $(CRITERION_LIBS) -lm

$(BUILD)/tests/%$(EXE): tests/helpers/%.c $(BUILD)/libcrun.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libcrun.a $(ALL_LDFLAGS) $(DEP_LIBS) -lm

$(BUILD)/tests/%: tests/bench/%.c $(BUILD)/libcrun.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -o $@ $< $(BUILD)/libcrun.a $(ALL_LDFLAGS) $(DEP_LIBS) -lm

deps:
	@sh scripts/install-deps.sh

# The wheels (dist/): crun for any Linux with glibc 2.28 or newer, x86_64 and
# aarch64, built with zig's C compiler (scripts/wheel.sh).
wheel:
	@sh scripts/wheel.sh x86_64
	@sh scripts/wheel.sh aarch64

# crun for Windows (build-win/crun.exe), cross-compiled with mingw-w64,
# everything static (scripts/windows.sh).
windows:
	@sh scripts/windows.sh

# The test venv (.venv/: PyTorch 2.13, the framework suites' packages and
# clang-format, from tests/requirements*.txt) and .venv-214/ (the reference
# torchrun 2.14, tests/requirements-torch214.txt); a no-op when already
# made. TORCH_PYTHONS (default "/usr/bin/python3 .venv's python") names the
# interpreters tests/run.sh runs each torch suite on; TORCHRUN_REFS (those
# and .venv-214's) the torchruns the comparing suites run beside crun.
test-venv:
	@sh scripts/test-venv.sh
	@sh scripts/test-venv.sh .venv-214 tests/requirements-torch214.txt

check-build: all $(UNIT_BIN) $(HELPER_BIN) $(BENCH_BIN)

# The limits tables of docs/crun.1 and README.md, from the option table
# (tests/integration/limits_doc.sh fails when they are stale).
limits-doc: all
	@BUILD=$(BUILD) sh scripts/limits-doc.sh

# The README's test command. Unit tests, then integration suites that run
# the real build/crun (some start real daemons or network namespaces).
test check: deps test-venv format-check check-build
	@BUILD=$(BUILD) sh tests/run.sh

# Under the sanitizers the torch suites run on one interpreter (the venv's
# PyTorch 2.13) unless TORCH_PYTHONS says otherwise: both would take CI past
# an hour on 2 cores, and make test has already run them on both. wheel.sh
# builds and tests the wheel's own binary, never the sanitizer build: make
# test runs it. ASAN_EXCLUDE leaves out, too, the suites whose time goes to
# Python beside a torchrun or a framework while crun does what the other
# suites already make it do under the sanitizers: PyTorch's launcher tests,
# Lightning and accelerate, the examples, the parity suites, the Debian
# 13 root and the spares' DDP job across namespaces (spares.sh runs the
# same paths of crun; make test runs them all).
ASAN_EXCLUDE := wheel windows pytorch_launcher frameworks examples parity trixie_torch \
	spares_netns
asan:
	TORCH_PYTHONS="$${TORCH_PYTHONS:-$(CURDIR)/.venv/bin/python}" \
	TORCHRUN_REFS="$${TORCHRUN_REFS:-$(CURDIR)/.venv/bin/python}" \
	TESTS_EXCLUDE="$${TESTS_EXCLUDE:-} $(ASAN_EXCLUDE)" \
		$(MAKE) BUILD=build-asan SANITIZE=address,undefined OPT='-O1 -g' test

ubsan:
	$(MAKE) BUILD=build-ubsan SANITIZE=undefined test

demo: deps all
	@BUILD=$(BUILD) sh scripts/demo.sh

bench: deps check-build
	@BUILD=$(BUILD) sh tests/bench/run.sh

bench-scale: deps check-build
	@BUILD=$(BUILD) BENCH_SCALE=1 BENCH=scale sh tests/bench/run.sh

coverage: deps
	$(MAKE) BUILD=build-cov OPT='-O0 -g --coverage' LDFLAGS=--coverage check-build
	@BUILD=build-cov sh tests/coverage.sh

mutate: deps
	@python3 tests/mutate/mutate.py

# Randomized fault scenarios (tests/chaos/): CHAOS_SEED= replays, CHAOS_RUNS= counts.
chaos: deps check-build
	@BUILD=$(BUILD) sh tests/chaos/run.sh
.PHONY: chaos

FUZZ_TARGETS := $(wildcard tests/fuzz/fuzz_*.c)
fuzz: deps
	@FUZZ_RUNS=$${FUZZ_RUNS:-1000000} sh tests/fuzz/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/include/crun $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/crun $(DESTDIR)$(PREFIX)/bin/crun
	install -m 644 $(BUILD)/libcrun.a $(DESTDIR)$(PREFIX)/lib/libcrun.a
	install -m 644 include/crun/*.h $(DESTDIR)$(PREFIX)/include/crun/
	install -m 644 docs/crun.1 $(DESTDIR)$(PREFIX)/share/man/man1/crun.1
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' \
		scripts/libcrun.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/libcrun.pc

# One clang-format for every machine (Debian 12 ships 14, Debian 13 19, and
# their outputs differ): the PyPI wheel pinned in
# tests/requirements-frameworks.txt, in the test venv (scripts/test-venv.sh).
CLANG_FORMAT_VERSION := $(shell sed -n 's/^clang-format==//p' tests/requirements-frameworks.txt)
CLANG_FORMAT := .venv/bin/clang-format

$(CLANG_FORMAT): tests/requirements.txt tests/requirements-frameworks.txt
	@sh scripts/test-venv.sh
	@touch $@

format: $(CLANG_FORMAT)
	$(CLANG_FORMAT) -i $(LIB_SRC) $(BIN_SRC) include/crun/*.h

format-check: $(CLANG_FORMAT)
	@$(CLANG_FORMAT) --version | grep -q "version $(CLANG_FORMAT_VERSION) " || \
		{ echo "format-check: $(CLANG_FORMAT) is not clang-format $(CLANG_FORMAT_VERSION)" >&2; exit 1; }
	@$(CLANG_FORMAT) --dry-run -Werror $(LIB_SRC) $(BIN_SRC) include/crun/*.h

clean:
	rm -rf build build-asan build-ubsan build-fuzz build-cov build-wheel build-win dist

.PHONY: all deps check-build limits-doc test check asan ubsan demo bench bench-scale fuzz install wheel windows format format-check clean coverage mutate
.SECONDARY:

-include $(LIB_OBJ:.o=.d) $(BIN_OBJ:.o=.d) $(UNIT_BIN:=.d) $(HELPER_BIN:=.d) $(BENCH_BIN:=.d)

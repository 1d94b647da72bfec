# lockbridge build: static and shared libraries, the lockbridge tool, tests,
# sanitizer builds, the demo and the benchmark. `make help` lists the targets.

VERSION_MAJOR := 0
VERSION_MINOR := 1
VERSION_PATCH := 0
VERSION       := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)

PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR     ?= $(PREFIX)/share/man
DATADIR    ?= $(PREFIX)/share
DESTDIR    ?=

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2 -g
# hiredis is found by pkg-config: the system's (Debian 12: 0.14.1). HIREDIS_PREFIX=DIR
# takes the one installed under DIR instead (built from source beside the
# system's, as the README's "hiredis versions" does): its hiredis.pc is read
# first, its library folder is recorded in every binary (rpath), so that each
# loads that hiredis and no other, and the build goes to build-hiredis-VERSION
# unless BUILD is given, so that no object compiled against another hiredis's
# headers is reused.
HIREDIS_PREFIX ?=
PKG_CONFIG_ENV :=
HIREDIS_LIBDIR :=
HIREDIS_RPATH  :=
ifneq ($(HIREDIS_PREFIX),)
HIREDIS_PC := $(firstword $(wildcard $(HIREDIS_PREFIX)/lib*/pkgconfig/hiredis.pc \
    $(HIREDIS_PREFIX)/lib/*/pkgconfig/hiredis.pc))
ifeq ($(HIREDIS_PC),)
$(error HIREDIS_PREFIX=$(HIREDIS_PREFIX) holds no lib/pkgconfig/hiredis.pc)
endif
# Exported too, for the scripts the recipes run (tools/check-install.sh).
PKG_CONFIG_PATH := $(patsubst %/,%,$(dir $(HIREDIS_PC)))$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
export PKG_CONFIG_PATH
PKG_CONFIG_ENV := PKG_CONFIG_PATH=$(PKG_CONFIG_PATH)
HIREDIS_VERSION := $(shell $(PKG_CONFIG_ENV) pkg-config --modversion hiredis)
HIREDIS_LIBDIR  := $(shell $(PKG_CONFIG_ENV) pkg-config --variable=libdir hiredis)
HIREDIS_RPATH   := -Wl,-rpath,$(HIREDIS_LIBDIR)
ifeq ($(origin BUILD),file)
BUILD := build-hiredis-$(HIREDIS_VERSION)
endif
endif
DEP_CFLAGS := $(shell $(PKG_CONFIG_ENV) pkg-config --cflags hiredis libcjson 2>/dev/null)
DEP_LIBS   := $(shell $(PKG_CONFIG_ENV) pkg-config --libs hiredis libcjson 2>/dev/null || echo -lhiredis -lcjson)
# Warnings are errors in the builds of development and CI (the tests, the
# sanitizers, the bench, the soak, the fuzzing: DEV_TARGETS below), not in the
# plain `make` a packager runs, where a newer compiler's new warning must not
# break the build. WERROR=-Werror makes any build strict; WERROR= none.
WERROR  ?=
WARN     = -Wall -Wextra $(WERROR) -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wpointer-arith -Wformat=2 -Wvla
# -MMD -MP: each compile writes a .d file beside its output naming the headers
# it read (included below), so touching a header rebuilds exactly its users.
CFLAGS_ALL = -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -fPIC -MMD -MP -Iinclude -I. -I$(BUILD) \
             $(DEP_CFLAGS) $(SAN) $(CFLAGS)
# Test code (tests/harness, tests/race, the test programs) includes "harness/..."
# and "race/..."; the library and the tool never see tests/.
TEST_CFLAGS = $(CFLAGS_ALL) -Itests
LDFLAGS_ALL = $(SAN) $(HIREDIS_RPATH) $(LDFLAGS)
LIBS    := $(DEP_LIBS) -lm -lpthread

SONAME      := liblockbridge.so.$(VERSION_MAJOR)
SHARED      := $(BUILD)/liblockbridge.so.$(VERSION)
STATIC      := $(BUILD)/liblockbridge.a
TOOL        := $(BUILD)/lockbridge

# Library code: every .c of the modules; the tool (tool/) is built apart.
LIB_SRC := $(wildcard core/*.c legacy/*.c modern/*.c migrate/*.c)
LUA_SRC := $(sort $(wildcard */scripts/*.lua))
GEN_SRC := $(BUILD)/gen/scripts.c
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/scripts.o
TOOL_SRC := $(wildcard tool/*/*.c)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
HEADERS := $(wildcard include/lockbridge/*.h)
# Header-only event-loop adapters (the application compiles them, as hiredis's).
ADAPTER_HEADERS := $(wildcard include/lockbridge/adapters/*.h)

# The targets whose builds (prerequisites included) treat warnings as errors;
# the sanitizer builds reach them through `test`.
DEV_TARGETS := test-run test-bins unit-run integration-run valgrind explore demo-run bench \
               soak-run test-valkey-run test-hiredis-bins
$(DEV_TARGETS): WERROR = -Werror
# A test program built by its own name (make build/tests/unit/test_core) too.
$(BUILD)/tests/% $(BUILD)/obj/tests/%: WERROR = -Werror

.PHONY: all lib tool install uninstall clean test test-run unit unit-run integration \
        integration-run test-valkey test-valkey-run test-hiredis test-hiredis-bins \
        test-hiredis-run asan tsan valgrind deps demo demo-run \
        bench help check-deps explore

all: lib tool

lib: $(STATIC) $(SHARED)
tool: $(TOOL)

# Library and tool objects; each header a source reads is a prerequisite
# through its .d file.
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# Objects of test code: the test programs, the harness, the race models, the
# benchmark, the soak and the fuzz targets.
$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -c $< -o $@

$(BUILD)/obj/gen/scripts.o: $(GEN_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(GEN_SRC): $(LUA_SRC) tools/embed-lua.sh
	@mkdir -p $(dir $@)
	sh tools/embed-lua.sh lb__script_ $(LUA_SRC) > $@.tmp && mv $@.tmp $@

$(STATIC): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Only lb_* names are exported; lb__* internals stay local to the library.
$(SHARED): $(LIB_OBJ) tools/exports.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=tools/exports.map \
	    $(LDFLAGS_ALL) -o $@ $(LIB_OBJ) $(LIBS)
	ln -sf liblockbridge.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/liblockbridge.so

$(TOOL): $(TOOL_OBJ) $(STATIC)
	$(CC) $(LDFLAGS_ALL) -o $@ $(TOOL_OBJ) $(STATIC) $(LIBS)

# The .pc file is written here, at install time, so that it names the prefix and
# libdir of this install (PREFIX=/opt/lb), not those of the build. DESTDIR is a
# staging root only: the file names where the library will live, not the stage.
# The manual page is written by hand (tools/check-man.sh keeps it in step with
# the tool's help).
MAN1 := docs/lockbridge.1

install: all
	install -d $(DESTDIR)$(INCLUDEDIR)/lockbridge $(DESTDIR)$(LIBDIR) \
	    $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/lockbridge/
	install -d $(DESTDIR)$(INCLUDEDIR)/lockbridge/adapters
	install -m 644 $(ADAPTER_HEADERS) $(DESTDIR)$(INCLUDEDIR)/lockbridge/adapters/
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf liblockbridge.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/liblockbridge.so
	install -m 755 $(TOOL) $(DESTDIR)$(BINDIR)/
	install -m 644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -d $(DESTDIR)$(DATADIR)/lockbridge/catalogue
	install -m 644 catalogue/*.race $(DESTDIR)$(DATADIR)/lockbridge/catalogue/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    tools/lockbridge.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/lockbridge.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/lockbridge.pc

uninstall:
	rm -rf $(DESTDIR)$(INCLUDEDIR)/lockbridge
	rm -f $(DESTDIR)$(LIBDIR)/liblockbridge.* $(DESTDIR)$(BINDIR)/lockbridge \
	    $(DESTDIR)$(PKGCONFIGDIR)/lockbridge.pc $(DESTDIR)$(MANDIR)/man1/lockbridge.1
	rm -rf $(DESTDIR)$(DATADIR)/lockbridge/catalogue
	-rmdir $(DESTDIR)$(DATADIR)/lockbridge 2>/dev/null

# ---- tests -----------------------------------------------------------------------
# One binary per test file; they link the static library so internals are testable.
TEST_UNIT_SRC := $(wildcard tests/unit/test_*.c)
TEST_INT_SRC  := $(wildcard tests/integration/test_*.c)
# The harness files that check with cmocka go into the test binaries only.
CHECK_HARNESS_SRC := tests/harness/proc.c tests/harness/redis_util.c tests/harness/cli.c \
    tests/harness/mlock_util.c tests/harness/race_search.c tests/harness/race_client.c \
    tests/harness/wait_fixture.c
CHECK_HARNESS_OBJ := $(CHECK_HARNESS_SRC:%.c=$(BUILD)/obj/%.o)
HARNESS_SRC   := $(filter-out $(CHECK_HARNESS_SRC),$(wildcard tests/harness/*.c tests/race/*.c))
# The tool's redis-server starter and loopback sockets are the tests' too (they
# need hiredis and libc only).
HARNESS_OBJ   := $(HARNESS_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tool/common/redis_child.o \
    $(BUILD)/obj/tool/common/loopback.o
TEST_UNIT_BINS := $(TEST_UNIT_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_INT_BINS  := $(TEST_INT_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_BINS := $(TEST_UNIT_BINS) $(TEST_INT_BINS)
# tests/run.sh runs the binaries side by side in the order given: the longest
# go first (timed on a 2-core machine, these three take the longest; the
# waiting tests, split by concept, take 10 s or less each), so that no long
# one starts last and runs alone at the end.
TEST_LONG := $(patsubst %,$(BUILD)/tests/integration/%,test_races_fair test_interop \
    test_race_replay)
TEST_ORDER = $(filter $(TEST_LONG),$(1)) $(filter-out $(TEST_LONG),$(1))
TEST_OBJ  := $(TEST_BINS:$(BUILD)/tests/%=$(BUILD)/obj/tests/%.o)
# Keep these objects between runs (they are only prerequisites of pattern rules).
.SECONDARY: $(HARNESS_OBJ) $(CHECK_HARNESS_OBJ) $(TEST_OBJ)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)
# The asynchronous driver's tests run on libevent's loop.
EVENT_LIBS  := $(shell pkg-config --libs libevent 2>/dev/null || echo -levent)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(HARNESS_OBJ) $(CHECK_HARNESS_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(HARNESS_OBJ) $(CHECK_HARNESS_OBJ) $(STATIC) \
	    $(CMOCKA_LIBS) $(EVENT_LIBS) $(LIBS)

# The programs of examples/ that test_examples runs against real servers, built
# from the tree (headers and static library) rather than from an install, with
# the development warnings; tools/check-install.sh builds every example as its
# own build line says, against an install.
EXAMPLE_RUN  := legacy_lock watched_lock fenced_worker cluster_lock
EXAMPLE_BINS := $(EXAMPLE_RUN:%=$(BUILD)/examples/%)
$(BUILD)/examples/%: examples/%.c $(STATIC) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP -fPIC,$(CFLAGS_ALL)) $(LDFLAGS_ALL) -o $@ $< $(STATIC) $(LIBS)
$(BUILD)/tests/integration/test_examples: $(EXAMPLE_BINS)

JAVA_SRC := $(wildcard tests/interop/java/*.java)
$(BUILD)/java/.stamp: $(JAVA_SRC)
	@mkdir -p $(BUILD)/java
	javac -d $(BUILD)/java $(JAVA_SRC)
	@touch $@

test-bins: $(TEST_BINS) $(TOOL) $(if $(JAVA_SRC),$(BUILD)/java/.stamp)

# The README's first commands, `make test` and `make demo`, work on a machine that
# has nothing but make: each installs what is missing first, then runs make again,
# so the flags this Makefile asks pkg-config for when it is read (DEP_CFLAGS,
# CMOCKA_LIBS, EVENT_LIBS) come from the installed packages, and no compile can
# start before the install (as it could under -j with check-deps as a sibling).
# That second make builds one job per CPU unless -j was given.
BUILD_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1))
test: check-deps
	$(MAKE) $(BUILD_JOBS) test-run

# Builds everything and runs every suite; `make test` without the dependency check.
test-run: all test-bins
	BUILD=$(BUILD) bash tests/run.sh $(call TEST_ORDER,$(TEST_BINS))

# One group of suites: tests/unit (no server, no tool), or tests/integration
# (real redis-servers, the tool, the Java lockers).
unit: check-deps
	$(MAKE) $(BUILD_JOBS) unit-run

unit-run: $(TEST_UNIT_BINS)
	BUILD=$(BUILD) bash tests/run.sh $(TEST_UNIT_BINS)

integration: check-deps
	$(MAKE) $(BUILD_JOBS) integration-run

integration-run: all $(TEST_INT_BINS) $(if $(JAVA_SRC),$(BUILD)/java/.stamp)
	BUILD=$(BUILD) bash tests/run.sh $(call TEST_ORDER,$(TEST_INT_BINS))

# The integration suite against Valkey (valkey-server, from Debian's
# bookworm-backports, installed by deps.sh --valkey), so that both servers stay
# supported. Left out are the suites whose time goes to something other than
# the server: the race searches (test_races_*, test_race_search) spend it
# enumerating schedules, test_interop starting JVMs, the race replays
# (test_race_replay*) re-running recorded schedules; each sends the server
# only the commands the other suites already send.
VALKEY_SKIP := test_races_% test_race_search test_interop test_race_replay%
VALKEY_BINS := $(filter-out $(VALKEY_SKIP:%=$(BUILD)/tests/integration/%),$(TEST_INT_BINS))
test-valkey: check-deps
	sh tools/deps.sh --valkey
	$(MAKE) $(BUILD_JOBS) test-valkey-run

test-valkey-run: all $(VALKEY_BINS)
	LB_REDIS_SERVER=valkey-server BUILD=$(BUILD) bash tests/run.sh $(VALKEY_BINS)

# Everything against the hiredis under HIREDIS_PREFIX (README, "hiredis
# versions"), one suite after another, each run even after a failure: first
# tools/check-hiredis.sh, that every object read that hiredis's headers and every
# binary loads its library; then the unit and integration suites, the valgrind
# set, and tools/check-install.sh (the install, and examples/ and the README's
# example built as they say and run; its own makes start afresh, MAKEFLAGS
# emptied, as when CI runs it). Not run by CI: it needs a hiredis built from
# source.
test-hiredis: check-deps
	@[ -n "$(HIREDIS_PREFIX)" ] || \
	    { echo "make test-hiredis: give HIREDIS_PREFIX=<where a hiredis is installed>" >&2; exit 2; }
	$(MAKE) $(BUILD_JOBS) test-hiredis-bins
	$(MAKE) test-hiredis-run

test-hiredis-bins: all test-bins

test-hiredis-run:
	sh tools/check-hiredis.sh $(BUILD) $(HIREDIS_LIBDIR) \
	    $$($(PKG_CONFIG_ENV) pkg-config --variable=includedir hiredis)
	@status=0; \
	echo "test-hiredis $(HIREDIS_VERSION): unit"; \
	BUILD=$(BUILD) bash tests/run.sh $(TEST_UNIT_BINS) || status=1; \
	echo "test-hiredis $(HIREDIS_VERSION): integration"; \
	BUILD=$(BUILD) bash tests/run.sh $(call TEST_ORDER,$(TEST_INT_BINS)) || status=1; \
	echo "test-hiredis $(HIREDIS_VERSION): valgrind"; \
	BUILD=$(BUILD) VALGRIND=1 bash tests/run.sh $(VALGRIND_TESTS) || status=1; \
	echo "test-hiredis $(HIREDIS_VERSION): install and examples"; \
	MAKEFLAGS= HIREDIS_PREFIX=$(HIREDIS_PREFIX) sh tools/check-install.sh || status=1; \
	exit $$status

# AddressSanitizer + UndefinedBehaviorSanitizer build of the library and tests.
asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" test

# ThreadSanitizer build of the tests whose code runs threads of its own.
TSAN_TESTS := tests/integration/test_watchdog
# lb_mlock_notify from a subscriber thread; mode-following clients in threads;
# a handle waiting on a thread of its own.
TSAN_TESTS += tests/integration/test_migrate_modes tests/integration/test_migrate_fleets \
    tests/integration/test_migrate_wait
# The fault tests steer a proxy thread (tests/harness/proxy.c).
TSAN_TESTS += tests/integration/test_faults
# The waiter's thread wakes waits on many threads; the waiting tests start
# each blocking acquire on a thread of its own (tests/harness/wait_fixture.c).
TSAN_TESTS += tests/integration/test_wait_waiter tests/integration/test_wait_polling \
    tests/integration/test_fair_queue tests/integration/test_fair_grant_list \
    tests/integration/test_fair_baton tests/integration/test_fair_scripts
tsan: check-deps
	$(MAKE) WERROR=-Werror BUILD=build-tsan OPT="-O1 -g" SAN="-fsanitize=thread" \
	    $(TSAN_TESTS:%=build-tsan/%)
	BUILD=build-tsan TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	    bash tests/run.sh $(TSAN_TESTS:%=build-tsan/%)

# The exhaustive searches of the test_races_* binaries at the depths they are
# written for (`make test` runs each a step shallower, see search_depth in
# tests/harness/race_search.c), the lockbridge fleets' searches to
# EXPLORE_DEPTH steps (two clients; three: two less), and `lockbridge race
# --search` finding the known races in the Java lockers (test_race_search,
# which skips those cases in `make test`: each schedule starts JVMs). CI runs
# `make explore EXPLORE_DEPTH=5`, the written depth; the default, 7, takes far
# longer. Every binary runs, one after another, even after a failure.
EXPLORE_DEPTH ?= 7
RACE_BINS := $(patsubst %,$(BUILD)/tests/integration/test_races_%,legacy fair migration gate)
# The searches' operator runs the tool of this build.
explore: $(RACE_BINS) $(BUILD)/tests/integration/test_race_search $(TOOL) \
         $(if $(JAVA_SRC),$(BUILD)/java/.stamp)
	@status=0; for t in $(RACE_BINS); do \
	    echo "$$t"; \
	    BUILD=$(BUILD) LB_EXPLORE=full LB_EXPLORE_DEPTH=$(EXPLORE_DEPTH) $$t || status=1; \
	done; \
	BUILD=$(BUILD) LB_EXPLORE_DEPTH=$(EXPLORE_DEPTH) $(BUILD)/tests/integration/test_race_search \
	    || status=1; \
	exit $$status

# Unit tests and the library's own integration tests (the suites that mostly run
# child processes, tool and JVM, are left out: their time is spent elsewhere).
VALGRIND_TESTS := $(TEST_UNIT_BINS) \
    $(patsubst %,$(BUILD)/tests/integration/%,test_legacy test_modern test_quorum test_async \
        test_async_lock test_self_renewing)
valgrind: test-bins
	BUILD=$(BUILD) VALGRIND=1 bash tests/run.sh $(VALGRIND_TESTS)

deps:
	sh tools/deps.sh

check-deps:
	@sh tools/deps.sh --check

demo: check-deps
	$(MAKE) demo-run

demo-run: all $(BUILD)/java/.stamp
	BUILD=$(BUILD) sh tools/demo.sh

bench: $(STATIC) $(TOOL)
	$(MAKE) WERROR=$(WERROR) $(BUILD)/bench/lockbridge-bench
	BUILD=$(BUILD) sh tools/bench.sh

# The outsider pairing: 2 threads of a JVM token locker that does not queue (M1)
# beside 2 lockbridge modern clients on one key, 5 s, polling and fair; its
# target: the outsider's acquisitions per client at least a quarter of
# lockbridge's per client.
bench-outsider: $(TOOL) $(BUILD)/java/.stamp
	sh tests/bench/outsider_pair.sh $(TOOL) $(BUILD)/java 5
.PHONY: bench-outsider

# The benchmark: its main, lockbridge-bench.c, and its other files in tests/bench
# (one part each).
BENCH_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/bench/*.c))
$(BUILD)/bench/lockbridge-bench: $(BENCH_OBJ) $(HARNESS_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $(BENCH_OBJ) $(HARNESS_OBJ) $(STATIC) $(EVENT_LIBS) $(LIBS)

# Opt-in: the peers make bench compares with (Debian's python3-redis and
# gnuplot for the plots; node-redlock and redis-semaphore from npm, into
# tests/bench/peers/node_modules).
.PHONY: bench-peers
bench-peers:
	sh tools/deps.sh --bench
	cd tests/bench/peers && npm install --no-audit --no-fund

# ---- soak -------------------------------------------------------------------------
# tests/soak/soak.c: every legal fleet, lockbridge clients beside the Java lockers,
# under random server faults; fails on a lost update, a crash or a leak.
# `make soak` is opt-in and long (SOAK_CLIENTS per fleet, SOAK_SECONDS); `make
# soak-short` is CI's run: 4 clients per fleet for 15 s, built with ASan (whose
# LeakSanitizer checks for leaks at exit) in $(BUILD)-asan.
SOAK_SECONDS ?= 300
SOAK_CLIENTS ?= 32
.PHONY: soak soak-run soak-short
$(BUILD)/soak/soak: $(BUILD)/obj/tests/soak/soak.o $(HARNESS_OBJ) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< $(HARNESS_OBJ) $(STATIC) $(LIBS)

soak: check-deps
	$(MAKE) soak-run

soak-run: $(BUILD)/soak/soak $(if $(JAVA_SRC),$(BUILD)/java/.stamp)
	$(BUILD)/soak/soak --seconds $(SOAK_SECONDS) --clients $(SOAK_CLIENTS) --java-cp $(BUILD)/java

soak-short: check-deps
	$(MAKE) WERROR=-Werror BUILD=$(BUILD)-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" \
	    $(BUILD)-asan/soak/soak $(if $(JAVA_SRC),$(BUILD)-asan/java/.stamp)
	$(BUILD)-asan/soak/soak --seconds 15 --clients 4 --java-cp $(BUILD)-asan/java

# ---- static analysis -------------------------------------------------------------
# cppcheck over the library and the tool, clang-tidy over the library; a finding
# fails the target. docs/reliability.md says which checks run and why some are off.
TIDY_CHECKS := -*,clang-analyzer-*,-clang-analyzer-security.insecureAPI.DeprecatedOrUnsafeBufferHandling,$\
-clang-analyzer-security.insecureAPI.strcpy,-clang-analyzer-valist.Uninitialized,$\
bugprone-*,-bugprone-easily-swappable-parameters,-bugprone-branch-clone,$\
-bugprone-suspicious-string-compare,-bugprone-not-null-terminated-result,$\
cert-*,-cert-err33-c,misc-redundant-expression,misc-misplaced-const

.PHONY: lint
lint:
	cppcheck --quiet --std=c11 --enable=warning,portability,performance --inline-suppr \
	    --error-exitcode=1 -D_GNU_SOURCE -Iinclude -I. $(LIB_SRC) $(TOOL_SRC)
	clang-tidy --quiet --warnings-as-errors='*' -checks='$(TIDY_CHECKS)' $(LIB_SRC) -- \
	    -std=c11 -D_GNU_SOURCE -Iinclude -I. $(DEP_CFLAGS) 2>/dev/null

# ---- fuzzing (clang's libFuzzer, ASan+UBSan) ----------------------------------------
# `make fuzz` runs each tests/fuzz/fuzz_*.c from its seed corpus in
# tests/fuzz/corpus/<target> for FUZZ_RUNS inputs (at most FUZZ_SECONDS) with a fixed
# FUZZ_SEED, so that a CI run is reproducible: the same code meets the same inputs.
# `make fuzz-long` explores: 10 minutes a target, a random seed, no run limit.
# Inputs it finds go to $(FUZZ_BUILD)/corpus, crashes to $(FUZZ_BUILD)/<target>-*.
FUZZ_CC      ?= clang
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 20
FUZZ_RUNS    ?= 500000
FUZZ_SEED    ?= 1
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES   := $(FUZZ_SRC:tests/fuzz/%.c=%)

.PHONY: fuzz fuzz-long fuzz-bins
fuzz-bins:
	$(MAKE) WERROR=-Werror CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link" \
	    $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz/%)

# Compiled with SAN's -fsanitize=fuzzer-no-link; libFuzzer's main comes in at the link.
FUZZ_OBJ := $(FUZZ_NAMES:%=$(BUILD)/obj/tests/fuzz/%.o)
.SECONDARY: $(FUZZ_OBJ)
$(BUILD)/fuzz/%: $(BUILD)/obj/tests/fuzz/%.o $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=fuzzer $(LDFLAGS_ALL) -o $@ $< $(STATIC) $(LIBS)

fuzz: fuzz-bins
	@for t in $(FUZZ_NAMES); do \
	    mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	    echo "fuzz: $$t, seed $(FUZZ_SEED), $(FUZZ_RUNS) runs or $(FUZZ_SECONDS) s"; \
	    $(FUZZ_BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -runs=$(FUZZ_RUNS) \
	        -seed=$(FUZZ_SEED) -timeout=10 -print_final_stats=1 \
	        -artifact_prefix=$(FUZZ_BUILD)/$$t- $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	        2>$(FUZZ_BUILD)/$$t.log || { tail -n 40 $(FUZZ_BUILD)/$$t.log; exit 1; }; \
	    grep -E "^stat::(number_of_executed_units|new_units_added)" $(FUZZ_BUILD)/$$t.log; \
	done

fuzz-long:
	$(MAKE) fuzz FUZZ_SECONDS=600 FUZZ_RUNS=-1 FUZZ_SEED=0

# The header dependencies -MMD wrote at each object's last compile (none before
# the first build, when every object is built anyway).
OBJ_ALL := $(LIB_OBJ) $(TOOL_OBJ) $(TEST_OBJ) $(HARNESS_OBJ) $(CHECK_HARNESS_OBJ) $(BENCH_OBJ) \
           $(BUILD)/obj/tests/soak/soak.o $(FUZZ_OBJ)
-include $(wildcard $(OBJ_ALL:.o=.d))

# Every folder a target builds into: $(BUILD) (the tests, valgrind's run, the
# benchmark, the soak), asan's build-asan, soak-short's $(BUILD)-asan, tsan's
# build-tsan and the fuzzing build.
BUILD_DIRS = $(sort build build-asan build-tsan build-fuzz $(BUILD) $(BUILD)-asan $(FUZZ_BUILD))
clean:
	rm -rf $(BUILD_DIRS)

help:
	@echo "make            libraries (static, shared) and the lockbridge tool"
	@echo "make deps       install build/test dependencies from Debian packages"
	@echo "make test       build and run unit, integration and JVM interop tests, side by side"
	@echo "                (LB_TEST_JOBS at a time, default CPUs + 1; under 4 min on 2 cores)"
	@echo "make unit       build and run tests/unit only (no server needed)"
	@echo "make integration  build and run tests/integration only (servers, tool, JVM)"
	@echo "make test-valkey  install valkey-server (bookworm-backports) and run the"
	@echo "                integration tests against it (race, replay and JVM suites left out)"
	@echo "make test-hiredis HIREDIS_PREFIX=DIR  the build, the suites, valgrind and the"
	@echo "                examples against the hiredis installed under DIR (README)"
	@echo "make asan       the same tests under ASan+UBSan"
	@echo "make tsan       the threaded tests (TSAN_TESTS) under ThreadSanitizer"
	@echo "make valgrind   unit and library integration tests under valgrind"
	@echo "make explore    the race searches at their written depths, the lockbridge"
	@echo "                fleets' to EXPLORE_DEPTH (default 7; CI: 5)"
	@echo "make demo       lockbridge and Java lockers contending on a temporary redis"
	@echo "make bench      benchmarks; report in docs/benchmarks.md"
	@echo "make bench-peers  install the peers make bench compares with (opt-in)"
	@echo "make soak       every legal fleet under random faults, 5 min (soak-short: CI's 15 s)"
	@echo "make lint       cppcheck and clang-tidy over the library (checks: docs/reliability.md)"
	@echo "make fuzz       libFuzzer targets of tests/fuzz, 20 s each (fuzz-long: 10 min)"
	@echo "make install    headers, libraries, tool, lockbridge.pc (written with PREFIX),"
	@echo "                lockbridge(1); PREFIX=/usr/local LIBDIR= MANDIR= DESTDIR= honoured"
	@echo "make uninstall  removes what make install installed (same variables)"

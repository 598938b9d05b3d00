# MiraDB - one plain GNU Makefile: no configure step, no recursion, all output under build/.
#
#   make            build/miradb (release: -O2, no sanitizers)
#   make run        deps, build, start the daemon on ./data (gRPC :4317, HTTP :4318)
#   make test       deps, build, every suite (unit + integration under ASan/UBSan, interop, deploy,
#                   promdiff: PromQL answers against a real Prometheus 2.42, ui: the web UI in chromium)
#   make ui-test    the web UI's browser tests alone (tests/ui/)
#   make fuzz       each libFuzzer target for FUZZ_SECONDS from its seed corpus
#   make bench      the benchmark cases (bench/)
#   make fresh-check  make test and make run on a brand-new Debian 12 root (scripts/fresh-check.sh)
#   make fmt / fmt-check / clean / deps
#
# run, test, fuzz and bench install missing packages first (scripts/deps.sh) and
# only then start a second make for the build: the compiler flags below come
# from pkg-config and are computed when a make reads this file, so the make
# that builds must start after the packages exist.

BUILD   ?= build
# Build with every core unless told otherwise (make -j1 ...).
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc)
endif
PKGS    := libevent libevent_pthreads libnghttp2 libprotobuf-c libzstd libxxhash jansson libdeflate \
           libpcre2-8 openssl
CC      ?= cc
WERROR  ?=
CFLAGS_BASE := -std=gnu11 -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
           -Wno-missing-field-initializers $(WERROR) -I. -I$(BUILD)/gen -D_GNU_SOURCE \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -MMD -MP
OPT     ?= -O2 -g
SAN     := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDLIBS  := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lhttp_parser -pthread -lm
TEST_LIBS := $(shell pkg-config --libs criterion 2>/dev/null)

# ---- generated protobuf-c code (build output, never committed) ----
PROTOS   := $(shell find proto -name '*.proto' 2>/dev/null | sort)
PB_C     := $(PROTOS:proto/%.proto=$(BUILD)/gen/%.pb-c.c)
PB_H     := $(PB_C:.c=.h)

# Generated files are build outputs to keep, not intermediates to delete.
.SECONDARY: $(PB_C) $(PB_H)

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c -Iproto --c_out=$(BUILD)/gen $<

# ---- sources ----
LIB_SRCS  := $(wildcard lib/*.c storage/*.c proto/*.c query/*.c) $(filter-out server/main.c,$(wildcard server/*.c))
MAIN_SRC  := server/main.c
UNIT_SRCS := $(wildcard tests/unit/*/*_test.c) $(wildcard tests/util/*.c)
INTEG_SRCS := $(wildcard tests/integ/*_test.c) $(wildcard tests/util/*.c)
BENCH_TOOLS := $(patsubst bench/%/main.c,%,$(wildcard bench/*/main.c))
# The differential suite's dataset generator and comparer (tests/promdiff/).
PROMDIFF_TOOLS := $(BUILD)/promdiff-gen $(BUILD)/promdiff-compare

REL := $(BUILD)/rel
ASN := $(BUILD)/asan

REL_LIB_OBJS := $(LIB_SRCS:%.c=$(REL)/%.o) $(PB_C:$(BUILD)/gen/%.c=$(REL)/gen/%.o)
ASN_LIB_OBJS := $(LIB_SRCS:%.c=$(ASN)/%.o) $(PB_C:$(BUILD)/gen/%.c=$(ASN)/gen/%.o)

# ---- the web UI: the files of ui/web/, embedded into the binary (ui/embed.c, ui/README.md) ----
UI_FILES := $(sort $(notdir $(wildcard ui/web/*)))
.SECONDARY: $(BUILD)/gen/ui_files.c
$(BUILD)/ui-embed: ui/embed.c
	@mkdir -p $(@D)
	$(CC) -O2 -std=gnu11 -Wall -Wextra -o $@ $< -lxxhash
$(BUILD)/gen/ui_files.c: $(BUILD)/ui-embed ui/web $(addprefix ui/web/,$(UI_FILES))
	@mkdir -p $(@D)
	$(BUILD)/ui-embed $@ ui/web $(UI_FILES)
REL_LIB_OBJS += $(REL)/gen/ui_files.o
ASN_LIB_OBJS += $(ASN)/gen/ui_files.o

.PHONY: all run test unit integ interop promdiff fuzz bench deps fmt fmt-check clean fresh-check \
        test-suites fuzz-run ui-test tsan
.DEFAULT_GOAL := all
SUBMAKE := $(MAKE) --no-print-directory

all: $(BUILD)/miradb

deps:
	@scripts/deps.sh

$(REL)/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(OPT) -c $< -o $@
$(ASN)/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(SAN) -c $< -o $@
$(REL)/%.o: %.c | $(PB_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(OPT) -c $< -o $@
$(ASN)/%.o: %.c | $(PB_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(SAN) -c $< -o $@

# The PromQL evaluator does Prometheus's int64 millisecond arithmetic, which
# wraps in Go (`x @ 6e18`, huge offsets): two's-complement wrapping here too,
# rather than undefined behaviour.
PM_WRAP_OBJS := $(patsubst %.c,%.o,$(wildcard query/pmeval*.c query/pmfn*.c))
$(PM_WRAP_OBJS:%=$(REL)/%) $(PM_WRAP_OBJS:%=$(ASN)/%) $(PM_WRAP_OBJS:%=$(BUILD)/fuzz/%): CFLAGS_BASE += -fwrapv

# `miradb version`: the commit and the flags of this build, passed to server/version.c only;
# the stamp changes (and version.o is rebuilt) only when the commit does. MIRADB_GIT=... overrides
# it where there is no .git (a Docker build context).
MIRADB_GIT ?= $(shell git describe --always --dirty --abbrev=12 2>/dev/null)
$(BUILD)/gen/git-rev: FORCE
	@mkdir -p $(@D); echo '$(MIRADB_GIT)' | cmp -s - $@ || echo '$(MIRADB_GIT)' >$@
$(REL)/server/version.o $(ASN)/server/version.o: $(BUILD)/gen/git-rev
$(REL)/server/version.o: CFLAGS_BASE += -DMIRADB_GIT='"$(MIRADB_GIT)"' -DMIRADB_FLAGS='"$(OPT)"'
$(ASN)/server/version.o: CFLAGS_BASE += -DMIRADB_GIT='"$(MIRADB_GIT)"' -DMIRADB_FLAGS='"$(SAN)"'
.PHONY: FORCE

# The project library is an archive, so a test binary pulls in only the
# modules it uses (and links while other modules are still being written).
$(REL)/libmiradb.a: $(REL_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^
$(ASN)/libmiradb.a: $(ASN_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/miradb: $(REL)/$(MAIN_SRC:.c=.o) $(REL)/libmiradb.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)

$(ASN)/miradb: $(ASN)/$(MAIN_SRC:.c=.o) $(ASN)/libmiradb.a
	$(CC) $(SAN) -o $@ $^ $(LDLIBS)

$(ASN)/unit-tests: $(UNIT_SRCS:%.c=$(ASN)/%.o) $(ASN)/libmiradb.a
	$(CC) $(SAN) -o $@ $^ $(LDLIBS) $(TEST_LIBS)

$(ASN)/integ-tests: $(INTEG_SRCS:%.c=$(ASN)/%.o) $(ASN)/libmiradb.a
	$(CC) $(SAN) -o $@ $^ $(LDLIBS) $(TEST_LIBS)

# Bench tools: bench/<tool>/main.c (+ the other .c files of that folder), release flags.
define BENCH_TOOL
$(BUILD)/$(1): $$(patsubst %.c,$(REL)/%.o,$$(wildcard bench/$(1)/*.c)) $(REL)/libmiradb.a
	$$(CC) $$(OPT) -o $$@ $$^ $$(LDLIBS)
all: $(BUILD)/$(1)
endef
$(foreach t,$(BENCH_TOOLS),$(eval $(call BENCH_TOOL,$(t))))
# percore times decode and append on otlp-load's generated requests.
$(BUILD)/percore: $(REL)/bench/otlp-load/gen.o
$(BUILD)/blkbench: $(REL)/bench/otlp-load/gen.o
# pbsame: a fixed corpus sealed, to cmp two builds (issue 13).
$(BUILD)/pbsame: $(REL)/bench/otlp-load/gen.o
# sealir: one block sealed, for callgrind and the seal time alone (issue 13).
$(BUILD)/sealir: $(REL)/bench/otlp-load/gen.o

run: deps
	@$(SUBMAKE) all
	@mkdir -p data
	$(BUILD)/miradb serve --data ./data --grpc-listen 127.0.0.1:4317 --http-listen 127.0.0.1:4318

# Every suite. Sanitizer reports fail the run even where criterion would not
# notice them (a leak report after a passing test, LIBS.md 5).
test: deps
	@$(SUBMAKE) test-suites

test-suites: all $(ASN)/unit-tests $(ASN)/integ-tests $(ASN)/miradb $(PROMDIFF_TOOLS)
	scripts/run-tests.sh $(ASN) $(BUILD)

unit: $(ASN)/unit-tests
	scripts/run-tests.sh $(ASN) $(BUILD) unit

integ: $(ASN)/integ-tests $(ASN)/miradb all
	scripts/run-tests.sh $(ASN) $(BUILD) integ

# The web UI in a real browser (tests/ui/README.md); screenshots in $(BUILD)/ui-test/.
ui-test: all
	tests/ui/run.sh $(BUILD)/miradb $(BUILD)/ui-test

interop: all
	tests/interop/run.sh $(BUILD)/miradb
	INTEROP_TLS=1 tests/interop/run.sh $(BUILD)/miradb

# The differential suite (tests/promdiff/README.md): its dataset generator and
# comparer, release flags; PROMDIFF_QUERIES=REGEX runs a subset of the queries.
$(BUILD)/promdiff-gen: $(REL)/tests/promdiff/gen.o $(REL)/libmiradb.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)
$(BUILD)/promdiff-compare: $(REL)/tests/promdiff/compare.o $(REL)/tests/util/httpc.o \
                           $(REL)/tests/util/tclock.o
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)
promdiff: deps
	@$(SUBMAKE) all $(PROMDIFF_TOOLS)
	tests/promdiff/run.sh $(BUILD)

# ---- fuzzing (clang + libFuzzer), bounded by FUZZ_SECONDS per target ----
FUZZ_SECONDS ?= 60
FZ := $(BUILD)/fuzz
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
FZ_LIB_OBJS := $(LIB_SRCS:%.c=$(FZ)/%.o) $(PB_C:$(BUILD)/gen/%.c=$(FZ)/gen/%.o)
FZ_LIB_OBJS += $(FZ)/gen/ui_files.o
$(FZ)/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	clang $(CFLAGS_BASE) $(FUZZ_FLAGS) -c $< -o $@
$(FZ)/%.o: %.c | $(PB_H)
	@mkdir -p $(@D)
	clang $(CFLAGS_BASE) $(FUZZ_FLAGS) -c $< -o $@
$(FZ)/libmiradb.a: $(FZ_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^
$(FZ)/fuzz_%: $(FZ)/tests/fuzz/fuzz_%.o $(FZ)/libmiradb.a
	clang -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)
fuzz: deps
	@$(SUBMAKE) fuzz-run
fuzz-run: $(FUZZ_TARGETS:%=$(FZ)/%)
	scripts/run-fuzz.sh $(FZ) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# ---- ThreadSanitizer: the shard's drain ownership under racing submits
# (tests/tsan/; minutes to build, so not part of `make test`) ----
TS := $(BUILD)/tsan
TSAN_FLAGS := -O1 -g -fsanitize=thread
TS_LIB_OBJS := $(LIB_SRCS:%.c=$(TS)/%.o) $(PB_C:$(BUILD)/gen/%.c=$(TS)/gen/%.o) $(TS)/gen/ui_files.o
$(TS)/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(TSAN_FLAGS) -c $< -o $@
$(TS)/%.o: %.c | $(PB_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(TSAN_FLAGS) -c $< -o $@
$(TS)/libmiradb.a: $(TS_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^
$(TS)/shard_stress: $(TS)/tests/tsan/shard_stress.o $(TS)/tests/util/tmpdir.o $(TS)/libmiradb.a
	$(CC) -fsanitize=thread -o $@ $^ $(LDLIBS)
tsan: deps
	@$(SUBMAKE) $(TS)/shard_stress
	scripts/run-tsan.sh $(TS)

bench: deps
	@$(SUBMAKE) all
	bench/run-all.sh $(BUILD)

# Proves the README's two commands on a brand-new Debian 12 root (debootstrap).
fresh-check:
	scripts/fresh-check.sh

fmt:
	clang-format -i $$(git ls-files '*.c' '*.h')
fmt-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

# --one-file-system: never descend into a mount left under build/ (a fresh-check root
# whose /dev is the host's, if that script was killed before it could undo it).
clean:
	rm -rf --one-file-system $(BUILD)

-include $(shell find $(BUILD) -path $(BUILD)/fresh-check -prune -o -name '*.d' -print 2>/dev/null)

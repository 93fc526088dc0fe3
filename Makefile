# portcullis — one GNU Makefile, no generated build system.
#
# Every .c file of a module directory except main.c goes into
# build/lib<module>.a; binaries link the archives (--as-needed drops what a
# binary does not use). Unit tests are tests/unit/check_<name>.c, fuzz
# targets tests/fuzz/fuzz_<name>.c; both are found by wildcard.

CC      ?= cc
BUILD   ?= build
VERSION := $(or $(shell awk -F'[()]' 'NR==1{print $$2}' packaging/debian/changelog 2>/dev/null),0.1.0)

# The module order, lowest first: a module may use only those before it
# here (docs/layout.md; tests/static/layering.sh checks every #include,
# tests/static/symbols.sh every symbol the archives leave undefined).
MODULES := common rules nft dnsguard tlog witness logd spec vault checker engine cli

PKGS := libnetfilter_queue libnftnl libmnl ldns libsodium yaml-0.1 openssl libpsl ncurses libseccomp

# A missing library is said at once, not found later as a pile of missing
# headers. The targets that install the libraries (deps, and those that
# run it first) and those that build nothing may start without them.
NO_PKG_GOALS := deps test check soak $(addprefix test-,$(MODULES) packaging) demo escape bench prove deb clean format check-format vm-image
ifneq ($(filter-out $(NO_PKG_GOALS),$(or $(MAKECMDGOALS),all)),)
PKG_MISSING := $(shell pkg-config --print-errors --exists $(PKGS) 2>&1)
ifneq ($(PKG_MISSING),)
$(error pkg-config: $(PKG_MISSING) -- run `make deps` (as root) first)
endif
endif

CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	    -Wmissing-prototypes -Wformat=2 -fno-strict-aliasing -fPIE \
	    -fstack-protector-strong
CPPFLAGS += -D_GNU_SOURCE -D_FORTIFY_SOURCE=2 -DPC_VERSION='"$(VERSION)"' -I. \
	    $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDFLAGS  += -pie -Wl,-z,relro,-z,now -Wl,--as-needed
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread

# Module archives in link order: the highest first, so that one pass of the
# linker resolves every module against those below it (no --start-group: a
# reference upwards is a link error, not something the linker hides).
reverse   = $(if $(1),$(call reverse,$(wordlist 2,$(words $(1)),$(1))) $(firstword $(1)))
mod_srcs  = $(filter-out $(1)/main.c,$(wildcard $(1)/*.c))
mod_objs  = $(patsubst %.c,$(BUILD)/%.o,$(call mod_srcs,$(1)))
ALL_LIBS := $(foreach m,$(call reverse,$(MODULES)),$(if $(call mod_srcs,$(m)),$(BUILD)/lib$(m).a))
LINK_LIBS = $(ALL_LIBS)

# binary name : its main file
BIN_MAINS := portcullisd:engine/main.c portcullis-logd:logd/main.c \
	     portcullis-vault:vault/main.c portcullis:cli/main.c
# (a binary whose main file does not exist yet is not built)
BIN_MAINS := $(foreach b,$(BIN_MAINS),$(if $(wildcard $(lastword $(subst :, ,$(b)))),$(b)))
BINS := $(foreach b,$(BIN_MAINS),$(BUILD)/$(firstword $(subst :, ,$(b))))

UNIT_SRCS  := $(wildcard tests/unit/check_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
TEST_HELPERS := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(wildcard tests/helpers/*.c))
# faults a test injects into a daemon (LD_PRELOAD): never installed
TEST_PRELOADS := $(patsubst tests/preload/%.c,$(BUILD)/tests/preload/%.so,$(wildcard tests/preload/*.c))

.PHONY: all deps test check soak $(addprefix test-,$(MODULES) packaging) unit demo bench fuzz fuzz-build prove sanitize valgrind deb install clean escape vm-image \
	format check-format
all: $(BINS) $(UNIT_BINS) $(TEST_HELPERS) $(TEST_PRELOADS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

define module_rule
$(BUILD)/lib$(1).a: $(call mod_objs,$(1))
	@rm -f $$@
	$(AR) rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call module_rule,$(m))))

define bin_rule
$(BUILD)/$(1): $(BUILD)/$(2:.c=.o) $(ALL_LIBS)
	$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$< $$(LINK_LIBS) $$(LDLIBS)
endef
$(foreach b,$(BIN_MAINS),$(eval $(call bin_rule,$(firstword $(subst :, ,$(b))),$(lastword $(subst :, ,$(b))))))

$(BUILD)/tests/check_%: tests/unit/check_%.c $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -Wno-missing-prototypes $(shell pkg-config --cflags check) \
		$(LDFLAGS) -o $@ $< $(LINK_LIBS) $(LDLIBS) $(shell pkg-config --libs check)

$(BUILD)/tests/helpers/%: tests/helpers/%.c $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $< $(LINK_LIBS) $(LDLIBS)

$(BUILD)/tests/preload/%.so: tests/preload/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(filter-out -fPIE,$(CFLAGS)) -fPIC -shared -MMD -MP -o $@ $< -lmnl -ldl

-include $(wildcard $(foreach m,$(MODULES),$(BUILD)/$(m)/*.d) $(BUILD)/tests/*.d \
	$(BUILD)/tests/helpers/*.d $(BUILD)/*.d)

# A certificate cites the spec its guard is checked against (docs/spec.md):
# its sha256 is compiled into the certificate writer, which is rebuilt when
# the spec changes.
SPEC_SHA256 := $(shell sha256sum docs/spec.md 2>/dev/null | cut -c1-64)
$(BUILD)/checker/cert.o: docs/spec.md
$(BUILD)/checker/cert.o: CPPFLAGS += -DPC_SPEC_SHA256='"$(SPEC_SHA256)"'


# --- what the README promises -------------------------------------------
deps:
	@tests/lab/deps.sh

# The tiers (docs/layout.md "Tests"): `make check` before a commit (static
# checks, unit tests, each fuzz target's corpus: under 2 minutes),
# `make test-MODULE` while working on one module (its unit, integration,
# escape and fault tests), `make test` before a push (everything, the lab
# tests side by side: J=N sets how many at once), `make soak` for the long
# generated runs. T=PATTERN: only the tests whose name contains it.
RUN_OPTS = $(if $(T),--only $(T)) $(if $(J),-j $(J))
test: deps
	@$(MAKE) --no-print-directory test-build
	@tests/run $(RUN_OPTS)

check: deps
	@$(MAKE) --no-print-directory test-build
	@FUZZ_SECONDS=0 tests/run --static --unit --fuzz $(RUN_OPTS)

TEST_MODULES := $(MODULES) packaging
$(addprefix test-,$(TEST_MODULES)): test-%: deps
	@$(MAKE) --no-print-directory test-build
	@tests/run --module $* $(RUN_OPTS)

# Longer runs of what `make test` runs bounded: each fuzz target for
# SOAK_SECONDS (300 by default), and the generated tests with PC_SOAK=1
# (more cases, other seeds: each test's header says what it does with it).
SOAK_SECONDS ?= 300
soak: deps
	@$(MAKE) --no-print-directory test-build
	@PC_SOAK=1 FUZZ_SECONDS=$(SOAK_SECONDS) tests/run $(RUN_OPTS)

# What the tests run: the tree and the fuzz targets, both builds at once
# (they share the jobserver: one build's link waits are the other's
# compiles).
.PHONY: test-build test-build-all test-build-fuzz
test-build:
	@$(MAKE) --no-print-directory -j$$(nproc) test-build-all test-build-fuzz
test-build-all:
	@$(MAKE) --no-print-directory all
test-build-fuzz:
	@$(MAKE) --no-print-directory fuzz-build

unit: all
	@tests/run --unit $(RUN_OPTS)

# VM=1: the agent runs in a real QEMU VM (sandbox run --vm) instead of a
# network namespace
demo: deps
	@$(MAKE) --no-print-directory all
	$(if $(VM),@sh packaging/vm/mkimage.sh build/vm)
	@$(if $(VM),PC_DEMO_VM=1 )tests/demo/demo.sh

# The sandbox VM's kernel and initramfs (sandbox run --vm), from Debian's
# packages only, reproducible, cached in build/vm (packaging/vm/mkimage.sh).
vm-image: deps
	@sh packaging/vm/mkimage.sh build/vm

# VM=1: only the attempts made from inside a real VM (tests/escape/vm_guest.sh)
escape: deps
	@$(MAKE) --no-print-directory all
	@tests/run --escape $(if $(VM),--only vm_guest)

# (parallel build: the quick look has 3 minutes, build included)
bench: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all
	@bench/run $(if $(QUICK),--quick)

# ASan+UBSan build of everything, then the unit tests (and, with INTEGRATION=1,
# the integration tests against sanitized daemons; CI runs both). Left out of
# the sanitized integration run, because they run no sanitized code:
# package_install (builds the Debian package from HEAD with the package's own
# flags and installs it in a throw-away root: ~6 minutes) and package_docs
# (checks the man pages against the sources, runs no binary).
SAN_EXCEPT := package_install package_docs
sanitize:
	@$(MAKE) --no-print-directory -j$$(nproc) BUILD=build/san CC=clang \
		CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
		LDFLAGS="-fsanitize=address,undefined" all
	@PC_BUILD=build/san UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ASAN_OPTIONS=detect_leaks=1 tests/run --unit \
		$(if $(INTEGRATION),--integration $(foreach x,$(SAN_EXCEPT),--except $(x)))

# libFuzzer targets: every parser of sandbox or file bytes.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BUILD := build/fuzz
FUZZ_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
fuzz: fuzz-build
	@tests/fuzz/run $(FUZZ_BUILD) $(or $(FUZZ_SECONDS),10)

# (make test builds them too: its fuzz suite runs each for FUZZ_SECONDS, 5 by default)
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang \
		CFLAGS="$(FUZZ_CFLAGS) -DPC_FUZZING" LDFLAGS="-fsanitize=address,undefined" \
		$(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(FUZZ_SRCS))

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(ALL_LIBS)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -fsanitize=fuzzer -o $@ $< $(LINK_LIBS) $(LDLIBS)

# tests/spec/: the differential driver that compares the engine with the
# model of docs/spec.md (the module spec/, which `portcullis log audit`
# links too); only the check and the fuzz target link it (their objects
# go first on the line).
SPEC_OBJS = $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/spec/*.c))
SPEC_BINS = $(BUILD)/tests/check_engine_spec $(FUZZ_BUILD)/fuzz_spec
$(SPEC_BINS): $(SPEC_OBJS)
$(SPEC_BINS): LINK_LIBS = $(SPEC_OBJS) $(ALL_LIBS)
-include $(wildcard $(BUILD)/tests/spec/*.d)

# Frama-C's EVA over the parsers of sandbox bytes: no run-time error for any
# input of any length up to the largest they take (docs/prove.md).
prove: deps
	@tests/prove/run

# The daemons under valgrind memcheck through one lab run (docs/security.md).
valgrind: all
	@PC_TOP=$(CURDIR) PC_BUILD=$(BUILD) bash tests/faults/valgrind.bash

deb:
	@packaging/build-deb.sh

PREFIX ?= /usr
install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)/etc/portcullis/rules.d
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/sbin/
	@if [ -f packaging/install.mk ]; then $(MAKE) --no-print-directory -f packaging/install.mk \
		DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) BUILD=$(BUILD); fi

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

check-format:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build *.deb

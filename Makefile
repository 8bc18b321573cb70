# parallax: the README's two commands are `make demo` and `make test`.
# Each installs missing Debian packages, configures and builds with CMake.
BUILD      ?= build
ASAN_BUILD ?= build-asan
PLANNER_BUILD ?= build-planner
FUZZ_BUILD ?= build-fuzz
# seconds per fuzz harness: `make fuzz`, the brief run in `make test`, `make fuzz-long`
FUZZ_SECONDS ?= 60
TEST_FUZZ_SECONDS ?= 5
FUZZ_LONG_SECONDS ?= 3600
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
TEST_PKGS  ?=

.PHONY: all deps build demo test test-unit test-asan test-planner test-parity test-fuzz fuzz fuzz-long fuzz-build bench golden docs clean

all: build

deps:
	@bash scripts/install-deps.sh $(TEST_PKGS)

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)
	@cmake --build $(BUILD) -j $(JOBS)

# The main job on a built-in default.
demo: build
	@bash scripts/demo.sh $(BUILD)/parallax

# Every test: the suites and CLI tests, then the unit suites again under
# AddressSanitizer + UndefinedBehaviorSanitizer (which fail on any report),
# and the planner alone, built without the executor (no MPI, BLAS or CUDA).
test: build test-asan test-planner test-fuzz
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# -O1: what the sanitizers' documentation recommends for reasonable speed (the suites run in half the time
# of -O0's), the asserts kept (Debug has no NDEBUG)
test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DPX_SANITIZE=ON -DPX_CUDA=OFF
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L 'unit|sanitize'

# The planner and simulator without the executor (PX_EXEC=OFF): it must
# configure and build with no MPI, OpenBLAS or CUDA found, and its command line
# (the one part compiled differently: no define reaches the libraries, whose
# unit suites the main build runs) pass the CLI tests, but the docs' check
# (label docs: `make docs` writes them from the main build) and cli_sweep (a
# minute of the library's sweeps; no_exec.sh runs the sweep command here).
test-planner: deps
	@cmake -S . -B $(PLANNER_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPX_CUDA=OFF -DPX_EXEC=OFF
	@cmake --build $(PLANNER_BUILD) -j $(JOBS)
	@cd $(PLANNER_BUILD) && ctest --output-on-failure -j $(JOBS) -L cli -LE docs -E '^cli_sweep$$'

# The parity matrix whole (docs/parity.md): every cell the planner says the
# cpu backend runs is run against its one-rank run, every cell it refuses is
# refused by parallax run with its reason (make test runs each choice alone).
test-parity: build
	@PARALLAX_HOME=$(CURDIR) PX_PARITY=full bash tests/cli/parity.sh $(BUILD)/parallax .

# libFuzzer harnesses (clang, ASan + UBSan) on every reader of outside input:
# model, cluster and plan files, the command line, checkpoints, profiles and
# data files. `make fuzz` runs each for FUZZ_SECONDS, `make fuzz-long` for an
# hour (FUZZ_LONG_SECONDS; two at a time: four hours), `make test` briefly.
fuzz-build: deps
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPX_FUZZ=ON -DPX_CUDA=OFF
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_harnesses

fuzz: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

fuzz-long: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_LONG_SECONDS)

test-fuzz: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(TEST_FUZZ_SECONDS)

# Records the simulator's golden figures again (tests/golden/golden_sim.tsv):
# only on purpose, with the diff reviewed in the commit.
golden: build
	@bash tests/golden/golden.sh $(BUILD)/parallax . --update

# Rewrites the docs' generated parts (scripts/docs.sh; docs/testing.md,
# "Generated documentation"): the command table, the flag reference, the
# preset and validation tables, the quick start. `make test` fails until they
# match the code; review the diff in the commit.
docs: build
	@PARALLAX_HOME=$(CURDIR) bash scripts/docs.sh generate $(BUILD)/parallax $(BUILD)/tests > $(BUILD)/docs-generated.md
	@bash scripts/docs.sh write $(BUILD)/docs-generated.md .

bench: build
	@bash scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(PLANNER_BUILD) $(FUZZ_BUILD)

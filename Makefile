# parallax: the README's two commands are `make demo` and `make test`.
# Each installs missing Debian packages, configures and builds with CMake.
BUILD      ?= build
ASAN_BUILD ?= build-asan
PLANNER_BUILD ?= build-planner
FUZZ_BUILD ?= build-fuzz
# seconds per fuzz harness: `make fuzz`, and the brief run in `make test`
FUZZ_SECONDS ?= 60
TEST_FUZZ_SECONDS ?= 5
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
TEST_PKGS  ?=

.PHONY: all deps build demo test test-unit test-asan test-planner test-fuzz fuzz fuzz-build bench golden clean

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

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPX_SANITIZE=ON -DPX_CUDA=OFF
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L 'unit|sanitize'

# The planner and simulator without the executor (PX_EXEC=OFF): it must
# configure, build and pass its tests with no MPI, OpenBLAS or CUDA found.
test-planner: deps
	@cmake -S . -B $(PLANNER_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPX_CUDA=OFF -DPX_EXEC=OFF
	@cmake --build $(PLANNER_BUILD) -j $(JOBS)
	@cd $(PLANNER_BUILD) && ctest --output-on-failure -j $(JOBS)

# libFuzzer harnesses (clang, ASan + UBSan) on every reader of outside input:
# model, cluster and plan files, the command line, checkpoints, profiles and
# data files. `make fuzz` runs each for FUZZ_SECONDS; `make test` briefly.
fuzz-build: deps
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPX_FUZZ=ON -DPX_CUDA=OFF
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_harnesses

fuzz: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

test-fuzz: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(TEST_FUZZ_SECONDS)

# Records the simulator's golden figures again (tests/golden/golden_sim.tsv):
# only on purpose, with the diff reviewed in the commit.
golden: build
	@bash tests/golden/golden.sh $(BUILD)/parallax . --update

bench: build
	@bash scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(PLANNER_BUILD) $(FUZZ_BUILD)

# chexscale: the two set-up commands (make demo, make test) and the developer targets.
SHELL := /bin/bash
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST_FLAGS ?=
# One compiler cache for every checkout: ccache hashes the paths under the checkout relative to it
# and leaves the build folder out of the hash of objects with debug info, so clones at different
# paths share entries (the precompiled header's too; debug info names the first clone's folder).
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: all deps deps-image build demo test test-suite image test-image bench format format-check \
  lint clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The demo runs only the chexscale binary: it builds just that, so results come first; the test
# programs are built by `make build` and `make test`.
demo: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS) --target chexscale
	@bash scripts/demo.sh $(BUILD_DIR)

# The tests need root (network namespaces, tmpfs mounts, Slurm daemons): make test checks that
# first, before installing or building anything, then runs test-suite.
test:
	@sh scripts/require-root.sh
	@$(MAKE) --no-print-directory test-suite

# Builds, checks formatting and runs every test. A skipped test is not a passing test: the run
# fails if ctest reports any.
test-suite: build format-check
	@sh scripts/check-test-room.sh
	@set -o pipefail; cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS) 2>&1 | tee ctest.log
	@if grep -q '(Skipped)' $(BUILD_DIR)/ctest.log; then \
	  echo "make test: some tests were skipped (see above); skipped tests do not count as passing"; exit 1; fi

# The container image (podman, or docker where its daemon runs): chexscale:<version>.
deps-image:
	@bash scripts/install-deps.sh --image

image: deps-image
	@bash deploy/docker/build-image.sh

# Runs the image: --help and models as uid 1000, then a rendered 2-pod Job as containers; then the
# lab with its Kubernetes pods as the image's containers (needs root).
test-image: image
	@bash tests/deploy/test_image.sh
	@bash tests/lab/test_lab_containers.sh

bench: build
	@bash scripts/bench.sh $(BUILD_DIR)

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

format-check:
	@bad=$$(git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run 2>&1 | grep -o '^[^: ]*\.\(cpp\|h\):' | tr -d : | sort -u); \
	if [ -n "$$bad" ]; then echo "Not formatted (run 'make format'):"; echo "$$bad"; exit 1; fi; \
	echo "format-check: all C++ files formatted"

lint: $(BUILD_DIR)/build.ninja
	git ls-files 'src/*.cpp' | xargs clang-tidy -p $(BUILD_DIR) --quiet

clean:
	rm -rf $(BUILD_DIR)

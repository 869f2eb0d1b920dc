# ixl: `make run` builds and runs the main job; `make test` builds and runs every test
# (plain, then AddressSanitizer+UBSan, then ThreadSanitizer on the threaded tests).
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=

.PHONY: all deps deps-test build run test test-plain test-asan test-tsan format-check format \
        fuzz clean install

all: build

deps:
	@sh scripts/deps.sh build

deps-test:
	@sh scripts/deps.sh test

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: build
	sh scripts/run.sh $(BUILD)

test: deps-test format-check test-plain test-asan test-tsan
	@echo "== all test suites passed"

test-plain:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 120

test-asan:
	cmake -S . -B build-asan -DIXL_SANITIZE=address,undefined $(CMAKE_FLAGS) >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) --timeout 120 -LE big

test-tsan:
	cmake -S . -B build-tsan -DIXL_SANITIZE=thread $(CMAKE_FLAGS) >/dev/null
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -j $(JOBS) --timeout 120 -L threaded

format-check:
	@sh scripts/format.sh check

format:
	@sh scripts/format.sh fix

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz

# ixl: `make run` builds and runs the main job; `make test` builds and runs every test
# (plain, then AddressSanitizer+UBSan, then ThreadSanitizer on the threaded tests, then a
# Release build of everything but the tests, then the Debian packages and test_deb on them).
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
# make fuzz: seconds each libFuzzer target runs, and its build (clang, ASan+UBSan).
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
FUZZ_TARGETS = md dlist net net_local ucx_wire mdx etcd obj_parse

.PHONY: all deps deps-test build run test test-plain test-asan test-tsan test-release test-deb \
        format-check format fuzz clean install install-nixl wheel

all: build

deps:
	@sh scripts/deps.sh build

deps-test:
	@sh scripts/deps.sh test

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# make run: the packages it needs, a build of only what it runs (libixl, ixlbench), ixlbench
# over NET and POSIX, and a summary; one line per step, the tables in $(BUILD)/run/run.log.
run:
	@CMAKE_FLAGS="$(CMAKE_FLAGS)" JOBS="$(JOBS)" sh scripts/run.sh $(BUILD)

test: deps-test format-check test-plain test-asan test-tsan test-release test-deb
	@echo "== all test suites passed"

test-plain:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 120 -LE deb
	PYTHONPATH=bindings/python IXL_LIBRARY=$(BUILD)/lib/libixl.so /usr/bin/python3 tests/python/bench_prep.py

test-asan:
	cmake -S . -B build-asan -DIXL_SANITIZE=address,undefined $(CMAKE_FLAGS) >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) --timeout 120 -LE big

test-tsan:
	cmake -S . -B build-tsan -DIXL_SANITIZE=thread $(CMAKE_FLAGS) >/dev/null
	cmake --build build-tsan -j $(JOBS) --target ixl_threaded_tests
	cd build-tsan && ctest --output-on-failure -j $(JOBS) --timeout 120 -L threaded

# The Release build (-O3, no debug info, what a package ships) once, warnings as errors like
# every build: the library, plugins, tools, benchmarks and examples; the tests are compiled
# (and run) in the builds above.
test-release:
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
		$(CMAKE_FLAGS) >/dev/null
	cmake --build build-release -j $(JOBS)

# libFuzzer targets (tests/fuzz), FUZZ_SECONDS each, over a copy of the corpus in $(FUZZ_BUILD).
# Only the fuzz binaries and the plugins they load are built there. `make test` replays the
# corpus through ctest (fuzz_*_replay) in every build.
fuzz: deps-test
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DIXL_FUZZ=ON -DIXL_SANITIZE=address,undefined \
		$(CMAKE_FLAGS) >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	sh tests/fuzz/run_fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

format-check:
	@sh scripts/format.sh check

format:
	@sh scripts/format.sh fix

# make install [PREFIX=/usr/local] [DESTDIR=]: libixl (SONAME libixl.so.0), headers, ixl.pc,
# the CMake package (find_package(ixl)), the plugins into $libdir/ixl/plugins, ixl-info,
# ixlbench and man pages (cmake/IxlInstall.cmake lists them). Builds only what it installs.
PREFIX ?= /usr/local
install: deps
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target ixl_install_targets
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

# The Python binding and, on request only, the `nixl` compatibility package (NIXL's import
# name: it would hide a real NIXL in the same environment), into PYTHON's environment, offline:
#   /usr/bin/python3 -m venv --system-site-packages venv && make install-nixl PYTHON=venv/bin/python
PYTHON ?= python3
install-nixl:
	rm -rf bindings/python/build bindings/python-nixl/build  # no stale modules in the wheels
	$(PYTHON) -m pip install --no-build-isolation --no-index bindings/python bindings/python-nixl

# The Python wheels, offline (bindings/python/wheels.py, docs/python.md) into $(DIST): ixl,
# carrying libixl.so.0 and the dynamic plugins of a Release build ($(WHEEL_BUILD), the build
# test-release makes), and ixl-nixl-compat (import nixl), which requires ixl of the same version.
DIST ?= dist
WHEEL_BUILD ?= build-release
wheel:
	@sh scripts/deps.sh wheel
	cmake -S . -B $(WHEEL_BUILD) -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
		$(CMAKE_FLAGS) >/dev/null
	cmake --build $(WHEEL_BUILD) -j $(JOBS)
	/usr/bin/python3 bindings/python/wheels.py $(WHEEL_BUILD) $(DIST)

# Debian packages built from this tree (debian/; README.md, "Debian packages"): libixl0,
# libixl-dev, ixl-tools, python3-ixl, ixl-plugin-ucx, ixl-plugin-obj, into DEB_DIR, then lintian.
DEB_DIR ?= build-deb
.PHONY: deb
deb:
	@sh scripts/deps.sh deb
	sh scripts/deb.sh $(DEB_DIR) $(JOBS)

# The package tests of `make test`: the packages are built here (no lintian, no -dbgsym; about
# a minute on 2 cores, outside ctest's per-test limit), then test_deb unpacks and uses them.
test-deb:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	DEB_BUILD_OPTIONS_EXTRA=noddebs LINTIAN=0 sh scripts/deb.sh build-deb-test $(JOBS)
	cd $(BUILD) && IXL_DEB_DIR=$(CURDIR)/build-deb-test ctest --output-on-failure --timeout 120 -L deb

clean:
	rm -rf $(BUILD) build-asan build-tsan build-release build-fuzz $(FUZZ_BUILD) build-deb \
		build-deb-test

#!/bin/sh
# Builds and runs bench_core (the core's costs with the in-memory TEST plugin), after a note on
# the machine the numbers come from. Arguments go to bench_core (-r repetitions, -s seed,
# -o kv|single|md|churn). BUILD_DIR (default: build) is configured first if it has no cache yet;
# a Release or RelWithDebInfo build is the meaningful one.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build"
fi
cmake --build "$build" -j"$(nproc)" --target bench_core

type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
echo "machine: $(uname -n), $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r)"
if grep -q '^flags.* hypervisor' /proc/cpuinfo; then
    echo "         (a virtual machine: timings vary more from run to run)"
fi
echo "build:   $build (CMAKE_BUILD_TYPE=${type:-RelWithDebInfo, the project's default})"
echo

exec "$build/bench/bench_core" "$@"

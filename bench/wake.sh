#!/bin/sh
# The wake-up from a completion to the thread waiting for it (bench_wake: ixl_xfer_wait, the
# agent's pollable fd, a busy-polling caller, and bare cond / eventfd wakes between two threads
# as the baseline), after a note on the machine. Arguments go to bench_wake (-n requests per
# round, -r rounds, -d worker delay in us). BUILD_DIR (default: build) is configured first if
# it has no cache yet; a Release build is the meaningful one. BASE_DIR: a second build (of
# another commit) whose bench_wake runs interleaved with this one, ROUNDS times (default 3),
# for a before/after in one run.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build"
fi
cmake --build "$build" -j"$(nproc)" --target bench_wake >/dev/null

type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
echo "machine: $(uname -n), $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "build:   $build (CMAKE_BUILD_TYPE=${type:-RelWithDebInfo, the default})"
echo

if [ -z "${BASE_DIR:-}" ]; then
    exec "$build/bench/bench_wake" "$@"
fi
base=$BASE_DIR
case $base in /*) ;; *) base=$root/$base ;; esac
echo "base:    $base (interleaved, ${ROUNDS:-3} rounds)"
i=0
while [ "$i" -lt "${ROUNDS:-3}" ]; do
    for d in "$base" "$build"; do
        echo "== $d"
        "$d/bench/bench_wake" "$@" | tail -n 5
    done
    i=$((i + 1))
done

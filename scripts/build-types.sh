#!/bin/sh
# Builds the whole tree (tests included) in every CMake build type with GCC and with clang,
# warnings as errors (the project's flags), each in build-types/<cc>-<type>. Prints one line
# per build and fails if any fails. `make test` builds Release once (test-release); this is
# the full matrix, for a change that touches compiler-sensitive code.
set -u
cd "$(dirname "$0")/.."
jobs=$(nproc)
fail=0
for cc in gcc clang; do
    command -v "$cc" >/dev/null 2>&1 || { echo "$cc: not installed (skipped)"; fail=1; continue; }
    for type in Release RelWithDebInfo Debug MinSizeRel; do
        dir=build-types/$cc-$type
        start=$(date +%s)
        if CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=$type >"$dir.log" 2>&1 &&
            cmake --build "$dir" -j "$jobs" >>"$dir.log" 2>&1; then
            echo "$cc $type: ok ($(($(date +%s) - start)) s)"
        else
            echo "$cc $type: FAILED (see $dir.log)"
            grep -m 5 -E 'error|warning' "$dir.log"
            fail=1
        fi
    done
done
exit $fail

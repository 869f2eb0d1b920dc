#!/bin/sh
# The KV scenario in VRAM between two processes (bench/kv_gpu.sh, path cuda-ipc), build A
# against build B of this tree, alternating in each round: A configured with A_CFLAGS (compile
# definitions that turn a change off, e.g. -DKERNEL_TABLE_COPY_BELOW=0 for the device layer's
# device-resident tables of small entries), B with B_CFLAGS (default none). Both Release, with
# the optional libraries off (as tests/gpu/run.sh builds where they are missing), in bench-ab-A
# and bench-ab-B under the tree (reused when there). Then, on B alone, the same requests
# without data checks (--no-check: no host round trips of 1 GiB between iterations, the GPU
# kept busy) to tell ixl's time from the GPU's idle clocks (docs/benchmarks.md, "Real GPU,
# fifth pass"). Needs a GPU (exit 77 without).
#
#   A_CFLAGS=-DKERNEL_TABLE_COPY_BELOW=0 KV_ARGS="--kv-block-size 4K" bench/kv_gpu_ab.sh
#
# A_REV / B_REV: build that side from a git revision of this repository instead (git archive
# into bench-ab-A.src), e.g. A_REV=HEAD~1 against the working tree.
#
# Environment: A_CFLAGS, B_CFLAGS, A_REV, B_REV, ROUNDS (3), KV_ARGS (more ixlbench options, after
# "--kv-variants random,sequential --kv-iters 8"), JOBS (build jobs, default nproc).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${ROUNDS:-3}
jobs=${JOBS:-$(nproc)}
off="-DIXL_WITH_ETCD=OFF -DIXL_WITH_UCX=OFF -DIXL_WITH_URING=OFF"
for side in A B; do
    if [ "$side" = A ]; then
        flags=${A_CFLAGS:-} rev=${A_REV:-}
    else
        flags=${B_CFLAGS:-} rev=${B_REV:-}
    fi
    dir=$root/bench-ab-$side
    src=$root
    if [ -n "$rev" ]; then
        src=$dir.src
        rm -rf "$src" && mkdir -p "$src" &&
            git -C "$root" archive "$rev" | tar -x -C "$src" ||
            { echo "kv_gpu_ab.sh: cannot export revision $rev" >&2; exit 1; }
    fi
    # A build directory of another source tree (an earlier run's revision) is started afresh.
    if [ -f "$dir/CMakeCache.txt" ] &&
        ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$src" "$dir/CMakeCache.txt"; then
        rm -rf "$dir"
    fi
    # shellcheck disable=SC2086 # off is a list of options
    if ! cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF $off \
        "-DCMAKE_C_FLAGS=$flags" >"$dir.log" 2>&1 ||
        ! cmake --build "$dir" -j "$jobs" --target ixlbench >>"$dir.log" 2>&1; then
        echo "kv_gpu_ab.sh: building $side failed (C flags '$flags'): see $dir.log" >&2
        tail -n 20 "$dir.log" >&2
        exit 1
    fi
    echo "build $side: $dir (source ${rev:-the working tree}, C flags: '${flags}')"
done
args="--kv-variants random,sequential --kv-iters 8 ${KV_ARGS:-}"
status=0
r=1
while [ "$r" -le "$rounds" ]; do
    for side in A B; do
        echo "== round $r, build $side"
        MODES=auto ROUNDS=1 BUILD_DIR=$root/bench-ab-$side KV_ARGS=$args \
            sh "$root/bench/kv_gpu.sh" >"$root/bench-ab-$side.r$r" 2>&1
        rc=$?
        [ $rc -eq 77 ] && { cat "$root/bench-ab-$side.r$r"; exit 77; }
        [ $rc -ne 0 ] && status=1
        grep -E "^ +(random|sequential|single) |^ +ratio" "$root/bench-ab-$side.r$r"
    done
    r=$((r + 1))
done
echo "== build B without data checks"
MODES=auto ROUNDS=1 BUILD_DIR=$root/bench-ab-B KV_ARGS="$args --no-check" \
    sh "$root/bench/kv_gpu.sh" 2>&1 | grep -E "^ +(random|sequential|single) |^ +ratio"
exit $status

#!/bin/sh
# One large VRAM request, between two processes (NET path cuda-ipc) and within one agent, against
# the KV scenario's single 1 GiB READ: where does the KV single READ's time beyond
# ixl_device_copy's go (docs/benchmarks.md, "Real GPU, seventh pass": 0.65-0.69 ms against 0.52
# ms)? Rows: ixlbench sweeps of one descriptor, 256 MiB to 1 GiB, READ and WRITE, no data checks
# and no notification, the caller waiting or polling (--poll), in two processes ("2p") and in one
# agent ("1p"); then ixlbench --scenario kv (a notification with each READ) without checks.
# ROUNDS rounds, interleaved; the sweep rows are ixlbench's CSV with "2p|1p,rROUND,wait|poll,"
# in front (lat_p50_us, ixlbench's 16th field, is then the 19th). Needs a GPU (exit 77 without;
# IXL_CUDA_LIBRARY=build/tests/sim/libixl_cudasim.so runs it on the simulated device).
#
#   bench/gpu_single.sh            (builds ixlbench, Release, into BUILD_DIR)
#
# Environment: BUILD_DIR (default build-gpu-single; an existing build with tools/ixlbench is
# used as it is), ROUNDS (3), JOBS (build jobs, default nproc).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-gpu-single}
rounds=${ROUNDS:-3}
B=$build/tools/ixlbench
if [ ! -x "$B" ]; then
    log=$build/gpu_single-build.log
    mkdir -p "$build" || exit 1
    if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
        -DIXL_WITH_ETCD=OFF -DIXL_WITH_UCX=OFF -DIXL_WITH_URING=OFF >"$log" 2>&1 ||
        ! cmake --build "$build" -j "${JOBS:-$(nproc)}" --target ixlbench >>"$log" 2>&1; then
        echo "gpu_single.sh: build failed: see $log" >&2
        exit 1
    fi
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# A GPU first (ixlbench exits 77 without one, and says why).
"$B" --role both --initiator-mem VRAM --target-mem VRAM --op write --block 4K --iters 1 \
    --no-check --quiet --no-progress >/dev/null 2>"$tmp/probe"
rc=$?
if [ $rc -ne 0 ]; then
    cat "$tmp/probe" >&2
    exit $rc
fi
S="--block 256M --block-max 1G --iters 20 --warmup 2 --max-bytes 64G --no-check --csv --no-progress"
status=0
r=1
while [ "$r" -le "$rounds" ]; do
    for mode in wait poll; do
        extra=""
        [ "$mode" = poll ] && extra=--poll
        md=$tmp/md.$r.$mode
        "$B" --role target --target-mem VRAM --md-file "$md" --idle-timeout 30 --quiet \
            >/dev/null 2>&1 &
        t=$!
        # shellcheck disable=SC2086 # S and extra are lists of options
        "$B" --role initiator --initiator-mem VRAM --target-mem VRAM --md-file "$md" --op both \
            $S $extra >"$tmp/out" 2>&1
        rc=$?
        [ $rc -ne 0 ] && { status=1; cat "$tmp/out" >&2; kill $t 2>/dev/null; }
        grep '^sweep' "$tmp/out" | sed "s/^/2p,r$r,$mode,/"
        wait $t
        # shellcheck disable=SC2086
        "$B" --role both --initiator-mem VRAM --target-mem VRAM --op both $S $extra \
            >"$tmp/out" 2>&1 || { status=1; cat "$tmp/out" >&2; }
        grep '^sweep' "$tmp/out" | sed "s/^/1p,r$r,$mode,/"
    done
    md=$tmp/md.kv.$r
    "$B" --role target --target-mem VRAM --md-file "$md" --idle-timeout 30 --quiet \
        >/dev/null 2>&1 &
    t=$!
    "$B" --role initiator --initiator-mem VRAM --target-mem VRAM --md-file "$md" --scenario kv \
        --kv-variants random --no-check --no-progress >"$tmp/out" 2>&1 || status=1
    grep -E "^(random|single|devcopy)" "$tmp/out" | sed "s/^/kv r$r /"
    wait $t
    r=$((r + 1))
done
exit $status

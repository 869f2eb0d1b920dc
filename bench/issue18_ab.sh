#!/bin/bash
# The before/after runs of issue 18 recorded in docs/benchmarks.md (2026-11-26), one after
# another on a quiet machine: core (kv, md, churn), wake-up, NET latency and 1 MiB, threads,
# UCX latency, POSIX latency and direct READ at depth 16. Logs in OUT (default /tmp/bench).
# Usage: bench/issue18_ab.sh BEFORE_SRC BEFORE_BUILD AFTER_BUILD [OUT]: BEFORE_SRC is a checkout
# of the old commit (its bench/core.sh), each build a Release build; WAKE_BASE (default
# BEFORE_BUILD) a build of the old commit that has bench_wake. The "before" NET and threads
# rows load the old libixl (LD_LIBRARY_PATH) under the new tools.
set -u
if [ $# -lt 3 ]; then
    echo "usage: $0 BEFORE_SRC BEFORE_BUILD AFTER_BUILD [OUT]" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
before_src=$1
A=$2
B=$3
out=${4:-/tmp/bench}
wake_base=${WAKE_BASE:-$A}
mkdir -p "$out"
cd "$root" || exit 1
cmake --build "$B" -j2 >/dev/null 2>&1 || { echo "build $B failed"; exit 1; }
echo "== start $(date) load $(cut -d' ' -f1-3 /proc/loadavg)"
# core
for o in kv md; do
  BUILD_DIR="$A" sh "$before_src/bench/core.sh" -o $o -r 11 > "$out"/core_${o}_A.txt 2>&1
  BUILD_DIR="$B" sh bench/core.sh -o $o -r 11 > "$out"/core_${o}_B.txt 2>&1
done
BUILD_DIR="$B" sh bench/core.sh -o churn -r 11 > "$out"/core_churn_B.txt 2>&1
echo "== core done $(date)"
# wake-up
BUILD_DIR="$B" BASE_DIR=$wake_base ROUNDS=5 sh bench/wake.sh -n 2000 -r 3 > "$out"/wake.txt 2>&1
echo "== wake done $(date)"
# NET latency + 1 MiB, A (libixl of A under B's tools) and B, two passes each, interleaved
for p in 1 2; do
  LD_LIBRARY_PATH="$A"/lib BUILD_DIR="$B" ROUNDS=3 SIZES=1M LAT_ITERS=2000 bash bench/net.sh > "$out"/net_A_$p.txt 2>&1
  BUILD_DIR="$B" ROUNDS=3 SIZES=1M LAT_ITERS=2000 bash bench/net.sh > "$out"/net_B_$p.txt 2>&1
done
echo "== net done $(date)"
# threads
LD_LIBRARY_PATH="$A"/lib BUILD_DIR="$B" ROUNDS=3 RUNTIME=0.5 bash bench/threads.sh > "$out"/threads_A.txt 2>&1
BUILD_DIR="$B" ROUNDS=3 RUNTIME=0.5 bash bench/threads.sh > "$out"/threads_B.txt 2>&1
echo "== threads done $(date)"
# UCX latency
BUILD_DIR="$B" MODES='' ROUNDS=3 LAT_ITERS=2000 bash bench/ucx.sh > "$out"/ucx_lat_B.txt 2>&1
echo "== ucx done $(date)"
# POSIX: latency section, then direct READ at depth 16
BUILD_DIR="$B" FILE_SIZE=1G SECTIONS=lat ROUNDS=5 bash bench/posix.sh > "$out"/posix_lat_B.txt 2>&1
BUILD_DIR="$B" FILE_SIZE=1G SECTIONS=rate POLICIES=direct OPS=read SIZES="16M 64M" QDS=16 ROUNDS=7 bash bench/posix.sh > "$out"/posix_rd16_B.txt 2>&1
echo "== posix done $(date)"

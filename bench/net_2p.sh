#!/bin/sh
# NET between two processes over loopback TCP (local_paths=0, path tcp forced) for four pairs of
# memory: DRAM<->DRAM (tcp), VRAM<->VRAM, VRAM target / DRAM initiator and DRAM target / VRAM
# initiator (tcp-staged), READ and WRITE of 64, 128 and 256 MiB, each request waited for, data
# checked. One ixlbench target per row set (a target serves one initiator run). Needs a GPU
# for the VRAM pairs (on the simulated device the figures mean nothing). The H200 figures
# before and after NET's PULL_WINDOW in docs/benchmarks.md come from this script.
#
#   bench/net_2p.sh [BUILD_DIR]   (default build; its tools/ixlbench)
#
# Environment: ROUNDS (default 2), ITERS (default 10).
set -u
B=${1:-build}/tools/ixlbench
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-10}
[ -x "$B" ] || {
    echo "net_2p.sh: no $B (build first)" >&2
    exit 1
}
tmp=$(mktemp -d /tmp/ixl-net-2p.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
run() { # label target-mem initiator-mem
    md=$tmp/md
    rm -f "$md"
    "$B" --role target --target-mem "$2" --md-file "$md" --idle-timeout 60 \
        --opt local_paths=0 >"$tmp/t.log" 2>&1 &
    t=$!
    "$B" --role initiator --initiator-mem "$3" --target-mem "$2" --md-file "$md" \
        --opt local_paths=0 --path tcp --block 64M --block-max 256M --iters "$ITERS" \
        --warmup 2 --csv --no-progress 2>"$tmp/i.log" |
        awk -F, -v l="$1" 'NR > 1 { printf "%-10s %-5s %10s %-10s %8.2f GB/s %s\n", l, $2, $5, $4, $14, $NF }'
    wait "$t" 2>/dev/null
}
for r in $(seq 1 "$ROUNDS"); do
    echo "round $r"
    run dram DRAM DRAM
    run staged VRAM VRAM
    run vram-tgt VRAM DRAM
    run vram-init DRAM VRAM
done

#!/bin/sh
# Calibrates the storage cost table (plugins/common/ixl_cost_table.h; docs/device.md,
# "Automatic choice"): measures VRAM <-> FILE on each storage backend this machine has (POSIX's
# staged path, GDS, GDS_MT) with ixlbench, at block sizes 1 MiB .. 64 MiB (powers of two), READ
# and WRITE, direct I/O, data checked, and writes what it measured as the table the backends'
# estimates read. With no backend named, the core then sends each VRAM <-> FILE request to the
# backend whose row is fastest for its size.
#
#   bench/gds.sh [--out FILE] [--dir DIR] [--ixlbench PATH] [--iters N] [--gpu N]
#
#   --out FILE      the table (default: $HOME/.cache/ixl/cost_table, where the backends look when
#                   their option cost_table is empty); written whole, then renamed into place
#   --dir DIR       where the scratch file goes (default /var/tmp; not tmpfs: no O_DIRECT there)
#   --ixlbench PATH the ixlbench binary (default: $IXLBENCH, else build/tools/ixlbench)
#   --iters N       timed requests per row (default 8; 2 warm-up requests before)
#   --gpu N         the GPU (default 0)
#
# A backend that is absent here (no plugin, no cuFile, no GPU) is left out of the table with a
# comment saying why; it then gives no estimate, and the core ranks it after those that do.
# Exit status: 0 the table was written (at least one backend measured), 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1
out="${HOME:-}/.cache/ixl/cost_table"
dir=/var/tmp
bench=${IXLBENCH:-build/tools/ixlbench}
iters=8
gpu=0
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --ixlbench) bench=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --gpu) gpu=$2; shift 2 ;;
    *) echo "usage: bench/gds.sh [--out FILE] [--dir DIR] [--ixlbench PATH] [--iters N] [--gpu N]" >&2; exit 2 ;;
    esac
done
[ -x "$bench" ] || { echo "gds.sh: no ixlbench at $bench (build it, or give --ixlbench)" >&2; exit 1; }
mkdir -p "$(dirname "$out")" || exit 1
tmp=$(mktemp "$out.XXXXXX") || exit 1
file=$dir/ixl-gds-calibration.$$
trap 'rm -f "$tmp" "$file" "$file.csv" "$file.err"' EXIT
{
    echo "ixl-cost-table 1"
    echo "# written by bench/gds.sh on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ): VRAM (GPU $gpu) <-> $dir,"
    echo "# O_DIRECT, one descriptor per request, ixlbench --iters $iters (medians of GB/s per row)"
    echo "# BACKEND PATH OP SIZE GBPS"
} >"$tmp"
measured=0
for be in POSIX GDS GDS_MT; do
    echo "gds.sh: measuring $be ..." >&2
    "$bench" --initiator-mem VRAM --initiator-dev "$gpu" --target-mem FILE --file "$file" \
        --direct --backend "$be" --block 1M --block-max 64M --iters "$iters" --warmup 2 \
        --no-progress --csv >"$file.csv" 2>"$file.err"
    rc=$?
    if [ $rc -ne 0 ]; then
        why=$(grep -v '^note:' "$file.err" | head -n 1)
        echo "gds.sh: $be not measured (exit $rc): $why" >&2
        echo "# $be: not measured (exit $rc): $why" >>"$tmp"
        continue
    fi
    # CSV: scenario,op,api,path,block,...,gbps (14th),...,check (last)
    awk -F, -v be="$be" '$1 == "sweep" && $NF == "pass" && $14 > 0 {
        printf "%-8s %-10s %-5s %-10s %s\n", be, $4, $2, $5, $14; n++ }
        END { exit n == 0 }' "$file.csv" >>"$tmp" && measured=$((measured + 1))
    rm -f "$file"
done
if [ $measured -eq 0 ]; then
    echo "gds.sh: no backend could be measured; $out left as it was" >&2
    exit 1
fi
mv "$tmp" "$out" || exit 1
trap 'rm -f "$file" "$file.csv" "$file.err"' EXIT
echo "gds.sh: wrote $out ($measured backend(s)):" >&2
cat "$out" >&2

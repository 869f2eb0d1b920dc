#!/bin/bash
# The time to make the KV scenario's requests (ixlbench --scenario kv: 32,768-descriptor READs,
# docs/ixlbench.md), build A against build B, alternating in each round: the prep_avg_us column
# (the mean of ixl_xfer_create_prepped over the iterations; ixl_xfer_create for single; COLUMN
# names another), per variant, and the medians over the rounds with B/A.
#
#   bench/kv_make_ab.sh BUILD_A BUILD_B   (build directories with tools/ixlbench)
#
# Environment: ROUNDS (5), PATH_KV (shm; cma runs with --target-alloc heap, as bench/kv.sh;
# vram: both pools in VRAM of GPU 0, NET's cuda-ipc path, 4 KiB blocks so that the copies stay
# short: the GPU's, or the simulated device's with IXL_CUDA_LIBRARY pointing at
# build/tests/sim/libixl_cudasim.so), KV_ITERS (5), COLUMN (prep_avg_us: the make time; e.g.
# post_avg_us for the post's, lat_avg_us for make + post + transfer, notif_avg_us for the
# notification's arrival at the target after the post's start), KV_ARGS (more ixlbench options,
# last: e.g. "--kv-regions 1 --kv-blocks 1 --kv-req-blocks 1 --kv-block-size 4K" for a
# one-block READ + notification). Exit status: 0, or 1 when a run failed.
set -u
A=${1:?build dir A}
B=${2:?build dir B}
rounds=${ROUNDS:-5}
column=${COLUMN:-prep_avg_us}
path=${PATH_KV:-shm}
alloc=ixl
[ "$path" = cma ] && alloc=heap
# What the two roles add for the path (vram: the memory types instead of a forced path).
tgt_args="" init_args="--path $path --target-alloc $alloc"
if [ "$path" = vram ]; then
    tgt_args="--target-mem VRAM"
    init_args="--initiator-mem VRAM --target-mem VRAM --kv-block-size 4K"
fi
tmp=$(mktemp -d /tmp/ixl-kv-make-ab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for r in $(seq "$rounds"); do
    for side in A B; do
        d=$A
        [ "$side" = B ] && d=$B
        rm -f "$tmp/md"
        # shellcheck disable=SC2086 # tgt_args and init_args are lists of options
        timeout 300 "$d/tools/ixlbench" --role target --md-file "$tmp/md" --quiet \
            --idle-timeout 300 $tgt_args 2>/dev/null &
        t=$!
        # shellcheck disable=SC2086
        if ! timeout 300 "$d/tools/ixlbench" --role initiator --md-file "$tmp/md" --scenario kv \
            $init_args --csv --quiet --no-progress \
            --kv-iters "${KV_ITERS:-5}" ${KV_ARGS:-} >"$tmp/csv" 2>"$tmp/err"; then
            echo "kv_make_ab.sh: round $r, build $side failed: $(tail -n 1 "$tmp/err")" >&2
            status=1
        fi
        wait "$t"
        awk -f "$root/bench/csv2tsv.awk" "$tmp/csv" | awk -F'\t' -v s="$side" -v col="$column" '
            NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "scenario") v = i; if ($i == col) m = i } }
            NR > 1 && v && m && $v ~ /^kv-/ && $v !~ /memcpy/ { print s, substr($v, 4), $m }' >>"$tmp/rows"
    done
    echo "kv_make_ab.sh: round $r" >&2
done
echo "KV $column over $path, ms: median of $rounds rounds (A = $A, B = $B)"
awk '
function med(k,    n, i, j, t, a) {
    n = cnt[k]; for (i = 1; i <= n; i++) a[i] = v[k, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2; cnt[k]++; v[k, cnt[k]] = $3 / 1000; seen[$2] = 1 }
END {
    printf "%-12s %9s %9s %7s\n", "variant", "A", "B", "B/A"
    nv = split("random sequential merged single", vs, " ")
    for (x = 1; x <= nv; x++) {
        if (!(vs[x] in seen)) continue
        ra = med("A" SUBSEP vs[x]); rb = med("B" SUBSEP vs[x])
        printf "%-12s %9.4f %9.4f %7.2f\n", vs[x], ra, rb, (ra > 0 ? rb / ra : 0)
    }
}' "$tmp/rows"
exit $status

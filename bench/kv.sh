#!/bin/bash
# The KV-cache scenario of ixlbench (docs/ixlbench.md) over each NET path, ROUNDS times, in two
# processes (a target and an initiator), and the medians of what matters: GB/s of each variant
# and the ratio of the 32,768-descriptor requests to one 1 GiB descriptor over the same path
# (target >= 0.8), next to the same ratio for plain memcpy inside one process (what the memory
# system allows for that shape); and the median time to make each request (its round's mean).
#
# Environment: BUILD_DIR (default build), ROUNDS (3), PATHS ("shm cma tcp"; cma runs with the
# target's memory from mmap, as an application's would be, so NET cannot map it), KV_ARGS (more
# ixlbench options, e.g. "--kv-iters 3"), NET_OPTS (NET options for both processes, e.g.
# "copy_threads=1"). Exit status: 0, or 1 when a run failed (a transfer error or a data check).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
rounds=${ROUNDS:-3}
paths=${PATHS:-shm cma tcp}
kv_args=${KV_ARGS:-}
timeout_s=600

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null || exit 1
fi
bench=$build/tools/ixlbench
if ! cmake --build "$build" -j"$(nproc)" --target ixlbench >"$build/kv_build.log" 2>&1; then
    if [ -x "$bench" ]; then
        echo "kv.sh: WARNING: the build failed (see $build/kv_build.log); using the ixlbench" \
            "built earlier" >&2
    else
        tail -n 20 "$build/kv_build.log" >&2
        exit 1
    fi
fi
ixl_opts=""
for kv in ${NET_OPTS:-}; do
    ixl_opts="$ixl_opts --opt $kv"
done

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine: $(uname -n), $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r)"
echo "source:  $(git -C "$root" describe --always --dirty 2>/dev/null || echo "not a git tree")"
echo "runs:    $rounds round(s) x paths: $paths; KV_ARGS: ${kv_args:-none};" \
    "NET_OPTS: ${NET_OPTS:-none}"

results=$(mktemp)
tpid=""
trap 'rm -f "$results" "$results".*; [ -n "$tpid" ] && kill "$tpid" 2>/dev/null' EXIT
failures=0
start=$(date +%s)
for r in $(seq "$rounds"); do
    for p in $paths; do
        alloc=ixl
        [ "$p" = cma ] && alloc=heap
        md=$results.md
        rm -f "$md"
        # shellcheck disable=SC2086 # option lists
        timeout "$timeout_s" "$bench" --role target --md-file "$md" --quiet \
            --idle-timeout "$timeout_s" $ixl_opts 2>"$results.terr" &
        tpid=$!
        # shellcheck disable=SC2086
        timeout "$timeout_s" "$bench" --role initiator --md-file "$md" --scenario kv --path "$p" \
            --target-alloc $alloc --csv --quiet --no-progress $ixl_opts $kv_args \
            >"$results.csv" 2>"$results.err"
        rc=$?
        [ $rc -ne 0 ] && kill "$tpid" 2>/dev/null
        wait "$tpid"
        trc=$?
        tpid=""
        if [ $rc -ne 0 ] || [ $trc -ne 0 ]; then
            failures=$((failures + 1))
            echo "  round $r, path $p: failed (initiator $rc, target $trc):" \
                "$(tail -n 2 "$results.err")" >&2
            continue
        fi
        # path variant gbps used-path check make-us (the mean of ixl_xfer_create_prepped)
        awk -f "$root/bench/csv2tsv.awk" "$results.csv" |
            awk -F'\t' -v p="$p" '$1 ~ /^kv-/ { print p, substr($1, 4), $14, $4, $NF, $18 }' \
                >>"$results"
        echo "  round $r, path $p: done" >&2
    done
done
echo "($(($(date +%s) - start)) s of runs)" >&2
echo

awk -v rounds="$rounds" -v paths="$paths" '
function median(key, mk,    n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = mk ? mkv[key, i] : val[key, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
    key = $1 SUBSEP $2
    cnt[key]++; val[key, cnt[key]] = $3; mkv[key, cnt[key]] = $6
    if ($5 == "FAIL") bad[key] = 1
    if ($2 !~ /^memcpy/ && $4 != $1 && !($1 == "shm" && $4 == "shm")) note[key] = $4
}
END {
    np = split(paths, ps, " ")
    nv = split("random sequential merged single memcpy-random memcpy-single", vs, " ")
    printf "KV scenario, GB/s, median of %d round(s)\n%-15s", rounds, "variant"
    for (i = 1; i <= np; i++) printf "  %9s", ps[i]
    printf "\n"
    for (k = 1; k <= nv; k++) {
        printf "%-15s", vs[k]
        for (i = 1; i <= np; i++) {
            key = ps[i] SUBSEP vs[k]
            med[key] = cnt[key] ? median(key, 0) : -1
            printf "  %9s", med[key] < 0 ? "-" : sprintf("%.3f%s", med[key], (key in bad) ? "!" : "")
        }
        printf "\n"
    }
    printf "\nmake (ixl_xfer_create_prepped; ixl_xfer_create for single), ms, median of the rounds\x27 means\n%-15s", "variant"
    for (i = 1; i <= np; i++) printf "  %9s", ps[i]
    printf "\n"
    for (k = 1; k <= 4; k++) {
        printf "%-15s", vs[k]
        for (i = 1; i <= np; i++) {
            key = ps[i] SUBSEP vs[k]
            printf "  %9s", cnt[key] ? sprintf("%.3f", median(key, 1) / 1000) : "-"
        }
        printf "\n"
    }
    printf "\nratios of medians (target >= 0.8 for the 32,768-descriptor requests)\n%-28s", "ratio"
    for (i = 1; i <= np; i++) printf "  %-11s", ps[i]
    printf "\n"
    nr = split("random/single:0.8 sequential/single:0.8 merged/single:0 memcpy-random/memcpy-single:0 random/memcpy-random:0", rs, " ")
    for (r = 1; r <= nr; r++) {
        split(rs[r], pt, ":"); split(pt[1], ab, "/"); target = pt[2] + 0
        printf "%-28s", pt[1]
        for (i = 1; i <= np; i++) {
            a = med[ps[i] SUBSEP ab[1]]; b = med[ps[i] SUBSEP ab[2]]
            if (a < 0 || b <= 0) { printf "  %-11s", "n/a"; continue }
            q = a / b
            printf "  %-11s", sprintf("%.2f%s", q, target > 0 ? (q >= target ? " PASS" : " MISS") : "")
        }
        printf "\n"
    }
    for (key in bad) { split(key, kk, SUBSEP); printf "! %s over %s: a data check failed\n", kk[2], kk[1] }
    for (key in note) { split(key, kk, SUBSEP); printf "note: %s over %s used path %s\n", kk[2], kk[1], note[key] }
}' "$results"

if [ $failures -gt 0 ]; then
    echo
    echo "$failures run(s) failed (see the messages above)"
    exit 1
fi
exit 0

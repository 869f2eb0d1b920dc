#!/bin/bash
# Threads on one agent, build A against build B, interleaved (issue 18, gap 6): the rows of
# bench/threads.sh (1, 2, 4, 8 threads posting WRITE requests of one descriptor on one agent to
# a target in a second process, each thread its own memory, depth 1, --no-check, aggregate
# requests/s) with both builds' runs alternating inside every round (A B, then B A), and the
# 4 KiB post->done latency of bench/net.sh's net-shm row (checked data, depth 1) beside
# `ucx_perftest ucp_put_lat` over shm in the same rounds.
#
#   bench/threads_ab.sh BUILD_A BUILD_B
#
# Each build is a build directory with tools/ixlbench (Release). Environment: ROUNDS (5),
# RUNTIME (seconds per run, 0.5), PATHS ("shm cma"), SIZES ("4K 1M"), THREADS ("1 2 4 8"),
# LATENCY (1; 0 skips the latency rows), LAT_ITERS (20000). Prints per row the median of each
# build, B/A, and each build's 2T/1T (target >= 1.6) and 8T/2T (>= 0.9); the latency rows'
# medians and NET shm / ucx_perftest (target <= 2.7).
set -u
A=${1:?build dir A}
B=${2:?build dir B}
rounds=${ROUNDS:-5}
runtime=${RUNTIME:-0.5}
paths=${PATHS:-shm cma}
sizes=${SIZES:-4K 1M}
threads=${THREADS:-1 2 4 8}
lat_iters=${LAT_ITERS:-20000}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/threads_ab.XXXXXX") || exit 1
tpid=""
trap '[ -n "$tpid" ] && kill "$tpid" 2>/dev/null; rm -rf "$tmp"' EXIT
for b in "$A" "$B"; do
    [ -x "$b/tools/ixlbench" ] || { echo "threads_ab.sh: $b/tools/ixlbench missing" >&2; exit 1; }
done

# One ixlbench run against a fresh target: prints field F of the sweep row (29: descriptors/s,
# 16: post->done p50 in us).
run() { # build field initiator-options...
    local b=$1 f=$2 out rc
    shift 2
    rm -f "$tmp/md"
    timeout 120 "$b/tools/ixlbench" --role target --md-file "$tmp/md" --idle-timeout 30 --quiet \
        2>"$tmp/t.err" &
    tpid=$!
    out=$(timeout 120 "$b/tools/ixlbench" --role initiator --md-file "$tmp/md" --op write \
        --reuse --csv --quiet --no-progress "$@" 2>"$tmp/i.err")
    rc=$?
    [ $rc -ne 0 ] && kill "$tpid" 2>/dev/null
    wait "$tpid"
    tpid=""
    if [ $rc -ne 0 ]; then
        echo "  run failed ($b $*): $(tail -n 1 "$tmp/i.err")" >&2
        return 1
    fi
    echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' -v f="$f" '$1 == "sweep" { print $f }'
}

ucx_lat() {
    local port=$((20000 + RANDOM % 20000)) spid out
    UCX_TLS=shm UCX_WARN_UNUSED_ENV_VARS=n timeout 60 ucx_perftest -t ucp_put_lat -s 4096 \
        -n "$lat_iters" -w $((lat_iters / 10)) -p "$port" >/dev/null 2>&1 &
    spid=$!
    for _ in $(seq 50); do
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        sleep 0.1
    done
    out=$(UCX_TLS=shm UCX_WARN_UNUSED_ENV_VARS=n timeout 60 ucx_perftest 127.0.0.1 \
        -t ucp_put_lat -s 4096 -n "$lat_iters" -w $((lat_iters / 10)) -p "$port" -f -v \
        2>/dev/null | tail -n 1)
    wait "$spid" 2>/dev/null
    echo "$out" | awk -F, 'NF >= 3 && $2 + 0 > 0 { printf "%.3f\n", $2 }'
}

echo "machine: $(uname -n), $(nproc) CPUs, kernel $(uname -r)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (at the start)"
echo "A = $A, B = $B; ROUNDS=$rounds RUNTIME=${runtime}s, WRITE, depth 1"
: >"$tmp/rows"
for r in $(seq "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
    for p in $paths; do
        for s in $sizes; do
            for n in $threads; do
                for w in $order; do
                    if [ "$w" = A ]; then b=$A; else b=$B; fi
                    v=$(run "$b" 29 --block "$s" --threads "$n" --iters 100000000 --warmup 20 \
                        --runtime "$runtime" --no-check --path "$p")
                    [ -n "$v" ] && echo "$p $s ${n}T $w $v" >>"$tmp/rows"
                done
            done
        done
    done
    if [ "${LATENCY:-1}" != 0 ]; then
        for w in $order; do
            if [ "$w" = A ]; then b=$A; else b=$B; fi
            v=$(run "$b" 16 --block 4K --iters "$lat_iters" --warmup 100 --depth 1 --path shm)
            [ -n "$v" ] && echo "lat shm-4K-us $w $v" >>"$tmp/lat"
        done
        if command -v ucx_perftest >/dev/null 2>&1; then
            v=$(ucx_lat)
            [ -n "$v" ] && echo "lat shm-4K-us U $v" >>"$tmp/lat"
        fi
    fi
    echo "round $r done ($(cut -d' ' -f1 /proc/loadavg))" >&2
done

echo
echo "aggregate requests/s, medians of $rounds interleaved rounds"
# shellcheck disable=SC2016 # awk code, expanded by awk
medians='
function med(k,   m, i, j, t, a) {
    m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
{ k = $1 " " $2 " " $3 " " $4; v[k, ++n[k]] = $5; row[$1 " " $2 " " $3] = 1 }'
echo "| path | size | threads | A | B | B/A |"
echo "|---|---|---|---:|---:|---:|"
awk "$medians"'
END {
    for (rw in row) {
        va = med(rw " A"); vb = med(rw " B"); split(rw, f, " ")
        printf "| %s | %s | %s | %.0f | %.0f | %.2f |\n", f[1], f[2], f[3], va, vb, (va > 0 ? vb / va : 0)
    }
}' "$tmp/rows" | sort -t'|' -k2,2 -k3,3 -k4,4n
echo
echo "| path size | A 2T/1T | B 2T/1T (>= 1.6) | A 8T/2T | B 8T/2T (>= 0.9) |"
echo "|---|---:|---:|---:|---:|"
awk "$medians"'
END {
    for (rw in row) { split(rw, f, " "); P[f[1] " " f[2]] = 1 }
    for (ps in P) {
        for (w = 1; w <= 2; w++) {
            x = w == 1 ? "A" : "B"
            one = med(ps " 1T " x); two = med(ps " 2T " x); eight = med(ps " 8T " x)
            r2[x] = one > 0 ? two / one : 0; r8[x] = two > 0 ? eight / two : 0
        }
        printf "| %s | %.2f | %.2f | %.2f | %.2f |\n", ps, r2["A"], r2["B"], r8["A"], r8["B"]
    }
}' "$tmp/rows" | sort
if [ -s "$tmp/lat" ]; then
    echo
    echo "4 KiB WRITE post->done over shm (checked, depth 1), median of the rounds' p50 (us)"
    awk '
    function med(k,   m, i, j, t, a) {
        m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
    { v[$3, ++n[$3]] = $4 }
    END {
        a = med("A"); b = med("B"); u = n["U"] ? med("U") : 0
        printf "A %.3f  B %.3f  ucx_perftest ucp_put_lat shm %s\n", a, b, u ? sprintf("%.3f", u) : "n/a"
        if (u > 0) printf "A/ucx %.2f  B/ucx %.2f (target <= 2.7)\n", a / u, b / u
    }' "$tmp/lat"
fi
echo
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (at the end)"

#!/bin/bash
# Threads on one agent: 1, 2, 4 and 8 threads of one initiator agent posting WRITE requests
# (4 KiB and 1 MiB, one descriptor each, each thread its own requests and memory, one request
# in flight per thread) to a target in a second process, over each NET path (shm, cma, tcp),
# measured side by side in one run.
#
# For each path and size it runs ROUNDS (3) interleaved rounds of the four thread counts; each
# run is ixlbench (tools/ixlbench, docs/ixlbench.md) with --no-check --runtime RUNTIME (1 s):
# aggregate requests/s = the requests completed inside the window / its length. It prints the
# medians and the ratios against the issue's targets:
#   shm, cma: 2 threads >= 1.6 x 1 thread; 8 threads >= 0.9 x 2 threads;
#   tcp:      every count >= 0.9 x 1 thread.
# Beside each row, in the same rounds (right after each ixlbench run), a baseline without NET:
# for shm and cma `net_driver memcpy-mt SIZE RUNTIME THREADS` (the same number of threads, each
# copying its own SIZE buffer into another of its own as often as it can: what the machine's
# cores and caches give the copies those paths make), for tcp `net_driver tcp-mt SIZE RUNTIME
# THREADS` (each thread its own loopback connection into a second process, SIZE bytes out and
# a 1-byte ack back, as a blocking raw-socket sender would). Each is a row of its own
# ("memcpy", "raw-tcp") with the same ratios, and ixl's figure over the baseline's.
# The environment may set BUILD_DIR (default build), ROUNDS, RUNTIME (seconds per run),
# PATHS (default "shm cma tcp"), SIZES (default "4K 1M"), THREADS (default "1 2 4 8"), NET_OPTS
# (more NET options for both sides, e.g. "conns=1"), and WAIT=poll to make the initiator
# busy-poll ixl_xfer_status instead of sleeping in ixl_xfer_wait (ixlbench --poll).
# Exit status: 0, or 1 when a run failed (a MISS of a target does not fail the run); 77 when
# libixl has no NET plugin.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
rounds=${ROUNDS:-3}
runtime=${RUNTIME:-1}
paths=${PATHS:-shm cma tcp}
sizes=${SIZES:-4K 1M}
threads=${THREADS:-1 2 4 8}
timeout_s=120

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null || exit 1
fi
bench=$build/tools/ixlbench
if ! cmake --build "$build" -j"$(nproc)" --target ixlbench net_driver >"$build/threads_build.log" 2>&1; then
    if [ -x "$bench" ]; then
        echo "threads.sh: WARNING: the build failed (see $build/threads_build.log); using the" \
            "ixlbench and libixl built earlier" >&2
    else
        tail -n 20 "$build/threads_build.log" >&2
        exit 1
    fi
fi
extra=""
for kv in ${NET_OPTS:-}; do
    extra="$extra --opt $kv"
done
[ "${WAIT:-}" = poll ] && poll=--poll || poll=""
ms=$(awk -v s="$runtime" 'BEGIN { printf "%d", s * 1000 }')

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
echo "machine: $(uname -n), $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r)"
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (at the start)"
echo "build:   $build ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt"))"
echo "runs:    ROUNDS=$rounds RUNTIME=${runtime}s, WRITE, --no-check, depth 1," \
    "waiting: ${poll:-ixl_xfer_wait}, NET options: ${NET_OPTS:-none}"
echo

tmp=$(mktemp -d "${TMPDIR:-/tmp}/threads.XXXXXX") || exit 1
tpid=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    [ -n "$tpid" ] && kill "$tpid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
failures=0

# One run: prints requests/s, or nothing on failure (77: no NET).
run() { # path size threads
    local p=$1 s=$2 n=$3 out rc trc
    rm -f "$tmp/md"
    # shellcheck disable=SC2086
    timeout "$timeout_s" "$bench" --role target --md-file "$tmp/md" --idle-timeout 30 --quiet \
        $extra 2>"$tmp/t.err" &
    tpid=$!
    # shellcheck disable=SC2086
    out=$(timeout "$timeout_s" "$bench" --role initiator --md-file "$tmp/md" --op write \
        --block "$s" --threads "$n" --iters 100000000 --warmup 20 --runtime "$runtime" \
        --reuse --no-check --path "$p" --csv --quiet --no-progress $poll $extra 2>"$tmp/i.err")
    rc=$?
    [ $rc -ne 0 ] && kill "$tpid" 2>/dev/null
    wait "$tpid"
    trc=$?
    tpid=""
    if [ $rc -eq 77 ]; then
        return 77
    fi
    # iops (descriptors/s) is field 29; one descriptor per request.
    v=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" { print $29 }')
    if [ $rc -ne 0 ] || [ $trc -ne 0 ] || [ -z "$v" ]; then
        echo "  $p $s x$n: failed (initiator $rc, target $trc): $(tail -n 1 "$tmp/i.err")" \
            "$(tail -n 1 "$tmp/t.err")" >&2
        return 1
    fi
    echo "$v"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

printf '%-5s %-5s' path size
for n in $threads; do printf ' %12s' "${n}T req/s"; done
printf '   %s\n' "ratios (target)"
for p in $paths; do
    for s in $sizes; do
        for n in $threads; do : >"$tmp/r.$n"; : >"$tmp/b.$n"; done
        r=0
        while [ $r -lt "$rounds" ]; do
            for n in $threads; do
                v=$(run "$p" "$s" "$n")
                rc=$?
                if [ $rc -eq 77 ]; then
                    echo "threads.sh: libixl has no NET plugin" >&2
                    exit 77
                fi
                if [ -n "$v" ]; then echo "$v" >>"$tmp/r.$n"; else failures=$((failures + 1)); fi
                if [ "$p" = tcp ]; then
                    v=$("$build/bench/net_driver" tcp-mt "$s" "$ms" "$n" |
                        sed -n 's/^RESULT .*msgs_per_s=\([0-9.]*\).*/\1/p')
                else
                    v=$("$build/bench/net_driver" memcpy-mt "$s" "$ms" "$n" |
                        sed -n 's/^RESULT .*copies_per_s=\([0-9.]*\).*/\1/p')
                fi
                if [ -n "$v" ]; then echo "$v" >>"$tmp/b.$n"; else failures=$((failures + 1)); fi
            done
            r=$((r + 1))
        done
        printf '%-5s %-5s' "$p" "$s"
        declare -A med=()
        for n in $threads; do
            med[$n]=$(median <"$tmp/r.$n")
            printf ' %12.0f' "${med[$n]:-0}"
        done
        one=${med[1]:-}
        two=${med[2]:-}
        eight=${med[8]:-}
        notes=""
        if [ -n "$one" ] && [ -n "$two" ] && [ -n "$eight" ]; then
            if [ "$p" = tcp ]; then
                for n in $threads; do
                    x=$(awk -v a="${med[$n]}" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
                    ok=$(awk -v x="$x" 'BEGIN { print (x >= 0.9 ? "met" : "MISS") }')
                    notes="$notes ${n}T/1T=$x(>=0.9 $ok)"
                done
            else
                x=$(awk -v a="$two" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
                ok=$(awk -v x="$x" 'BEGIN { print (x >= 1.6 ? "met" : "MISS") }')
                y=$(awk -v a="$eight" -v b="$two" 'BEGIN { printf "%.2f", a / b }')
                ok2=$(awk -v x="$y" 'BEGIN { print (x >= 0.9 ? "met" : "MISS") }')
                notes=" 2T/1T=$x(>=1.6 $ok) 8T/2T=$y(>=0.9 $ok2)"
            fi
        fi
        printf '  %s\n' "$notes"
        declare -A base=()
        if [ "$p" = tcp ]; then name=raw-tcp; else name=memcpy; fi
        printf '%-5s %-5s' "$name" "$s"
        for n in $threads; do
            base[$n]=$(median <"$tmp/b.$n")
            printf ' %12.0f' "${base[$n]:-0}"
        done
        if [ -n "${base[1]:-}" ] && [ -n "${base[2]:-}" ] && [ -n "${base[8]:-}" ] &&
            [ -n "$one" ] && [ -n "$two" ] && [ -n "$eight" ]; then
            if [ "$p" = tcp ]; then
                printf '   (baseline)'
                for n in $threads; do
                    awk -v b="${base[$n]}" -v b1="${base[1]}" -v i="${med[$n]}" -v n="$n" \
                        'BEGIN { printf " %dT/1T=%.2f ixl/it=%.2f", n, b / b1, i / b }'
                done
                echo
            else
                awk -v b1="${base[1]}" -v b2="${base[2]}" -v b8="${base[8]}" -v i1="$one" \
                    -v i2="$two" -v i8="$eight" 'BEGIN {
                    printf "   2T/1T=%.2f 8T/2T=%.2f (baseline; %s over it: 2T/1T %.2f, 8T/2T %.2f)\n",
                        b2 / b1, b8 / b2, "ixl", (i2 / i1) / (b2 / b1), (i8 / i2) / (b8 / b2) }'
            fi
        else
            echo
        fi
        unset base
        unset med
    done
done
echo
echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (at the end)"
[ $failures -eq 0 ] || exit 1
exit 0

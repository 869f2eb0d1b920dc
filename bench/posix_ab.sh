#!/bin/bash
# Two builds of ixl's POSIX backend against fio on the rows of issue 18 that missed, interleaved
# in one run (fio, A, B in rotating order each round), so that a shared machine's drift hits all
# three alike:
#   lat:  batch-1 latency, one LAT_BLOCK (1M) request at a time, LAT_ITERS (300) requests per
#         run: fio --iodepth=1 (its "lat" p50: submission to completion) against ixlbench
#         --depth 1 waiting in ixl_xfer_wait (lat_p50_us: post to wait's return), for each of
#         LAT_ROWS (direct:write direct:read buffered:write); also the context switches per
#         request of each ixlbench process (perf stat, when perf is installed: the hand-offs
#         between the thread that sees a completion and the one that waits for it; the
#         process's start-up adds ~0.1 at 300 requests).
#   rate: direct READ at queue depth 16, SIZES (16M 64M), BYTES (the whole file) from idle to
#         idle: fio --iodepth=16 against ixlbench --depth 16 --opt queue_depth=16
#         --cold-buffers, as bench/posix.sh runs them; also the mean size of the requests the
#         disk saw in each run (/sys/block/DEV/stat deltas; other I/O on the disk counts too).
# The median of ROUNDS (7) per cell, with [min-max]; the ratios are fio/ixl for latency (>= 0.9
# is the target: ixl within 10% of fio) and ixl/fio for GB/s.
#
# Usage: bench/posix_ab.sh BUILD_A BUILD_B   (build directories with tools/ixlbench, e.g. main's
#        and this tree's; RelWithDebInfo or Release)
# Environment: ROUNDS (7), SECTIONS ("lat rate"), LAT_ROWS, LAT_BLOCK (1M), LAT_ITERS (300),
# SIZES ("16M 64M"), BENCH_DIR (/var/tmp; the file is BENCH_DIR/ixl-posix-ab/bench.dat, FILE_SIZE
# 1G, kept when KEEP_FILE=1), THP (always: transparent huge pages for fio and both builds during
# the run, restored at exit; keep: the system's setting; bench/thp.sh says why). Needs fio
# (apt-get install fio).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_A BUILD_B" >&2
    exit 2
fi
A=$(cd "$1" && pwd) || exit 2
B=$(cd "$2" && pwd) || exit 2
for b in "$A" "$B"; do
    [ -x "$b/tools/ixlbench" ] || {
        echo "posix_ab.sh: no $b/tools/ixlbench (cmake --build $b --target ixlbench)" >&2
        exit 2
    }
done
command -v fio >/dev/null 2>&1 || {
    echo "posix_ab.sh: fio is needed (apt-get install fio)" >&2
    exit 1
}
rounds=${ROUNDS:-7}
sections=${SECTIONS:-lat rate}
lat_rows=${LAT_ROWS:-direct:write direct:read buffered:write}
lat_block=${LAT_BLOCK:-1M}
lat_iters=${LAT_ITERS:-300}
sizes=${SIZES:-16M 64M}
file_size=${FILE_SIZE:-1G}
dir=${BENCH_DIR:-/var/tmp}/ixl-posix-ab
mkdir -p "$dir" || exit 1
case $(stat -f -c %T "$dir") in tmpfs | ramfs)
    echo "posix_ab.sh: $dir is on tmpfs: give a BENCH_DIR on a disk" >&2
    exit 1
    ;;
esac
file=$dir/bench.dat
out=$(mktemp -d /tmp/ixl_posix_ab.XXXXXX)
cleanup() {
    rm -rf "$out"
    [ "${KEEP_FILE:-0}" = 1 ] || rm -f "$file"
    thp_restore
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=bench/thp.sh
. "$root/bench/thp.sh"
thp_set
if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != "$(numfmt --from=iec "$file_size")" ]; then
    fio --name=layout --filename="$file" --size="$file_size" --rw=write --bs=1M --direct=1 \
        --ioengine=io_uring --iodepth=16 --output=/dev/null || exit 1
fi
disk=$(lsblk -no pkname "$(df --output=source "$dir" | tail -n 1)" 2>/dev/null | head -n 1)
[ -n "$disk" ] || disk=$(basename "$(df --output=source "$dir" | tail -n 1)")
stat_file=/sys/block/$disk/stat
have_perf=0
perf stat -e context-switches true >/dev/null 2>&1 && have_perf=1
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine: $(uname -n), $(nproc) CPUs, kernel $(uname -r); fio: $(fio --version)"
echo "thp:     transparent huge pages $(thp_mode) for fio and both builds (THP=${THP:-always}; bench/thp.sh)"
src_of() { # build dir -> "source dir, commit" (the commit where the source is a git tree's top)
    local s
    s=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt" 2>/dev/null)
    if [ -n "$s" ] && [ "$(git -C "$s" rev-parse --show-toplevel 2>/dev/null)" = "$s" ]; then
        echo "$s, $(git -C "$s" describe --always --dirty 2>/dev/null)"
    else
        echo "${s:-unknown source}"
    fi
}
echo "A:       $A (source $(src_of "$A"))"
echo "B:       $B (source $(src_of "$B"))"
echo "file:    $file, $file_size ($disk); $rounds interleaved rounds per row"

rd_stat() { [ -r "$stat_file" ] && awk '{ print $1, $3 }' "$stat_file" || echo "0 0"; }
rec() { echo "$*" >>"$out/res"; } # section row tool value [extra]

fio_lat() { # policy op
    local d=0 v
    [ "$1" = direct ] && d=1
    fio --name=lat --filename="$file" --size="$file_size" --rw="$2" --bs="$lat_block" \
        --iodepth=1 --direct=$d --invalidate=0 --scramble_buffers=0 --ioengine=io_uring \
        --io_size=$(($(numfmt --from=iec "$lat_block") * lat_iters)) --lat_percentiles=1 \
        --output-format=json --output="$out/f.json" >/dev/null 2>&1
    v=$(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]
print("%.1f" % (j["lat_ns"]["percentile"]["50.000000"] / 1e3))' "$out/f.json" "$2" 2>/dev/null)
    [ -n "$v" ] && rec lat "$1:$2" fio "$v"
}
ixl_lat() { # build label policy op
    local -a args=(--file "$file" --no-check --csv --quiet --no-progress --op "$4"
        --block "$lat_block" --depth 1 --iters "$lat_iters" --warmup 10)
    local v cs=""
    [ "$3" = direct ] && args+=(--direct)
    if [ $have_perf = 1 ]; then
        v=$(perf stat -x, -e context-switches -o "$out/cs" "$1/tools/ixlbench" "${args[@]}" |
            awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "lat_p50_us") k = i }
            $1 == "sweep" && k { print $k }')
        cs=$(awk -F, -v n=$((lat_iters + 10)) '$3 == "context-switches" { printf "%.2f", $1 / n }' "$out/cs")
    else
        v=$("$1/tools/ixlbench" "${args[@]}" | awk -f "$root/bench/csv2tsv.awk" |
            awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "lat_p50_us") k = i }
            $1 == "sweep" && k { print $k }')
    fi
    [ -n "$v" ] && rec lat "$3:$4" "$2" "$v" "$cs"
}
fio_rate() { # size
    local s0 s1 g
    s0=$(rd_stat)
    g=$(fio --name=rate --filename="$file" --size="$file_size" --rw=read --bs="$1" --iodepth=16 \
        --direct=1 --invalidate=0 --scramble_buffers=0 --ioengine=io_uring --io_size="$file_size" \
        --minimal --terse-version=3 2>/dev/null | awk -F';' 'NF > 50 { printf "%.4f", $7 * 1024 / 1e9 }')
    s1=$(rd_stat)
    [ -n "$g" ] && rec rate "$1" fio "$g" "$(echo "$s0 $s1" | awk '$3 > $1 { printf "%.0f", ($4 - $2) / 2 / ($3 - $1) }')"
}
ixl_rate() { # build label size
    local s0 s1 g chunk=()
    [ "$(numfmt --from=iec "$3")" -gt $((64 << 20)) ] && chunk=(--opt "chunk=$3")
    s0=$(rd_stat)
    g=$("$1/tools/ixlbench" --file "$file" --direct --no-check --iters 1000000 --csv --quiet \
        --no-progress --op read --block "$3" --depth 16 --opt queue_depth=16 "${chunk[@]}" \
        --warmup 0 --max-bytes "$file_size" --cold-buffers 2>/dev/null |
        awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "gbps") k = i }
        $1 == "sweep" && k { print $k }')
    s1=$(rd_stat)
    [ -n "$g" ] && rec rate "$3" "$2" "$g" "$(echo "$s0 $s1" | awk '$3 > $1 { printf "%.0f", ($4 - $2) / 2 / ($3 - $1) }')"
}
rotate() { # round tools... -> the tools, rotated by round
    local r=$1
    shift
    for _ in $(seq $((r % $#))); do set -- "$@" "$1" && shift; done
    echo "$@"
}

case " $sections " in *" lat "*)
    for row in $lat_rows; do
        pol=${row%%:*} op=${row#*:}
        sync "$file"
        if [ "$pol" = direct ]; then
            dd if="$file" iflag=nocache count=0 status=none
        else
            cat "$file" >/dev/null
        fi
        echo "  latency $pol $op: $rounds rounds" >&2
        for r in $(seq "$rounds"); do
            for t in $(rotate "$r" fio A B); do
                [ "$op" = write ] && sync "$file"
                case $t in
                fio) fio_lat "$pol" "$op" ;;
                A) ixl_lat "$A" A "$pol" "$op" ;;
                B) ixl_lat "$B" B "$pol" "$op" ;;
                esac
            done
        done
        sync "$file"
    done
    ;;
esac
case " $sections " in *" rate "*)
    sync "$file"
    dd if="$file" iflag=nocache count=0 status=none
    for s in $sizes; do
        echo "  direct READ $s QD 16: $rounds rounds" >&2
        for r in $(seq "$rounds"); do
            for t in $(rotate "$r" fio A B); do
                case $t in
                fio) fio_rate "$s" ;;
                A) ixl_rate "$A" A "$s" ;;
                B) ixl_rate "$B" B "$s" ;;
                esac
            done
        done
    done
    ;;
esac

echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -s "$out/res" ] || exit 1
awk -v rounds="$rounds" '
function med(k,    n, i, j, t, a) {
    n = cnt[k]; for (i = 1; i <= n; i++) a[i] = v[k, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    lo[k] = a[1]; hi[k] = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(k, fmt) { return cnt[k] ? sprintf(fmt, med(k), lo[k], hi[k]) (cnt[k] < rounds ? "*" : "") : "failed" }
function xmed(k) { return xc[k] ? sprintf("%.2f", xm(k)) : "-" }
function xm(k,    n, i, j, t, a) {
    n = xc[k]; for (i = 1; i <= n; i++) a[i] = xv[k, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
    k = $1 SUBSEP $2 SUBSEP $3; cnt[k]++; v[k, cnt[k]] = $4
    if (NF >= 5 && $5 != "") { xc[k]++; xv[k, xc[k]] = $5 }
    if (!(($1 SUBSEP $2) in seen)) { seen[$1 SUBSEP $2] = 1; order[$1, ++no[$1]] = $2 }
}
END {
    if (no["lat"]) {
        printf "\nBatch-1 latency, us (median of %d [min-max]); ratio fio/ixl (target >= 0.9); cs = context switches per request\n", rounds
        printf "%-16s %-22s %-22s %-22s %7s %7s %6s %6s\n", "row", "fio iodepth=1", "ixl A (wait)", "ixl B (wait)", "fio/A", "fio/B", "cs A", "cs B"
        for (i = 1; i <= no["lat"]; i++) {
            r = order["lat", i]; f = "lat" SUBSEP r SUBSEP "fio"; a = "lat" SUBSEP r SUBSEP "A"; b = "lat" SUBSEP r SUBSEP "B"
            printf "%-16s %-22s %-22s %-22s %7s %7s %6s %6s\n", r, cell(f, "%7.1f [%.0f-%.0f]"), cell(a, "%7.1f [%.0f-%.0f]"), cell(b, "%7.1f [%.0f-%.0f]"),
                cnt[f] && cnt[a] ? sprintf("%.3f", med(f) / med(a)) : "n/a", cnt[f] && cnt[b] ? sprintf("%.3f", med(f) / med(b)) : "n/a", xmed(a), xmed(b)
        }
    }
    if (no["rate"]) {
        printf "\nDirect READ, queue depth 16, GB/s (median of %d [min-max]); ratio ixl/fio (target >= 0.9); KiB = mean request size the disk saw (median)\n", rounds
        printf "%-6s %-22s %-22s %-22s %6s %6s %6s %6s %6s\n", "block", "fio", "ixl A", "ixl B", "A/fio", "B/fio", "KiB f", "KiB A", "KiB B"
        for (i = 1; i <= no["rate"]; i++) {
            r = order["rate", i]; f = "rate" SUBSEP r SUBSEP "fio"; a = "rate" SUBSEP r SUBSEP "A"; b = "rate" SUBSEP r SUBSEP "B"
            printf "%-6s %-22s %-22s %-22s %6s %6s %6s %6s %6s\n", r, cell(f, "%6.3f [%.3f-%.3f]"), cell(a, "%6.3f [%.3f-%.3f]"), cell(b, "%6.3f [%.3f-%.3f]"),
                cnt[f] && cnt[a] ? sprintf("%.3f", med(a) / med(f)) : "n/a", cnt[f] && cnt[b] ? sprintf("%.3f", med(b) / med(f)) : "n/a",
                xc[f] ? sprintf("%.0f", xm(f)) : "-", xc[a] ? sprintf("%.0f", xm(a)) : "-", xc[b] ? sprintf("%.0f", xm(b)) : "-"
        }
    }
}' "$out/res"

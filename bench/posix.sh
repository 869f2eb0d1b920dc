#!/bin/bash
# The POSIX backend (DRAM <-> FILE over io_uring) against fio on the same file, side by side.
#
# One file (FILE_SIZE, default 2 GiB, in ${BENCH_DIR:-/var/tmp}/ixl-posix; refused on tmpfs,
# where there is no disk to measure and no O_DIRECT), written once with real data. For each
# cache policy, each block size of SIZES (1M 16M 64M), each queue depth of QDS (1 16) and READ
# and WRITE, ROUNDS (7) interleaved rounds each run (in alternating order) fio and ixlbench
# with the same block size and the same number of I/Os in flight, and the table gives the
# medians, their ratio (ixl / fio), the geometric mean of the ratios and the lowest one
# against the targets (geomean >= 0.95, no row < 0.85), marked pass/FAIL.
#
#   direct:   fio --direct=1; ixlbench --direct (the file registered "rw,direct,create:PATH",
#             page-aligned buffers). The file's page cache is dropped first (clean pages only:
#             it is synced before).
#   buffered: fio --direct=0 --invalidate=0; ixlbench without --direct. The page cache is
#             warm: the whole file is read once (cat) before the buffered rows, and nothing
#             drops it (fio's --invalidate=0; ixlbench never does). READ rows run before WRITE
#             rows, which dirty the cache (synced at the end of the section).
#
# What runs, per row (block B, queue depth Q); each run moves BYTES (default FILE_SIZE: the
# whole file once), from nothing in flight to nothing in flight, timed from its first I/O to
# its last completion:
#   fio --ioengine=io_uring --rw=read|write (sequential) --bs=B --iodepth=Q --direct=0|1
#       --invalidate=0 --scramble_buffers=0 --size=FILE_SIZE --io_size=BYTES, one job
#       (--scramble_buffers=0: by default fio rewrites part of its buffer before every write,
#       against deduplication, which costs it ~20% on buffered 64 MiB writes here; ixl writes
#       the buffer as it is).
#   ixlbench --file F [--direct] --op read|write --block B --depth Q --opt queue_depth=Q
#       --no-check --warmup 0 --max-bytes BYTES --cold-buffers (consecutive layout).
# fio keeps Q I/Os of B bytes in flight and submits a new one as each completes. The closest
# ixl shape is --depth Q of single-descriptor requests: Q requests in flight, each one I/O of
# B bytes at the next file offset, a new request made and posted as soon as the oldest
# completed, and POSIX's queue_depth=Q, so that ixl has no more I/Os in the kernel than fio.
# (A request of Q descriptors, --batch Q, drains to zero in flight at the end of every request
# before the next one is made and posted; it is what an application moving a batch of KV
# blocks does, but not what fio measures.) POSIX splits a descriptor larger than its chunk
# option (read from ixl-info) into several I/Os; where B is larger, ixlbench runs with
# --opt chunk=B, so that each descriptor is one I/O like fio's block. Both start at offset 0
# and go through the file sequentially: fio by its own offsets, ixl because consecutive
# requests take adjacent ranges (docs/ixlbench.md, storage mode).
# Why fixed bytes, no warm-up and --cold-buffers: fio's buffers are fresh memory, so its READs
# fault their pages in during the run (at 64 MiB x 16, a page fault per 4 KiB of 1 GiB);
# --cold-buffers gives ixl's READs fresh pages too (its WRITE sources are filled first, as
# fio's are): its pool untouched until the row, as fio's fresh malloc is (before issue 18 it
# was MADV_DONTNEED of the poisoned pool, whose refaults got the just-freed pages back in
# reverse physical order: no two contiguous, so the disk saw ~0.55 MiB requests where fio's
# saw ~0.6-2 MiB, unfair to ixl; /sys/block/DEV/stat deltas show it, and bench/posix_ab.sh
# prints them). A time-based fio job (--time_based --ramp_time) avoids the faults but counts
# the I/Os in flight when its ramp ends and those it reaps after its runtime: at 64 MiB x 16
# (1 GiB in flight, completions in bursts on this disk) a 1 s run reads 2.2-2.3 GB/s where a
# 4 s run, and the rate of its own completions, read 1.5-1.7.
# GB/s = 10^9 B/s: fio's bandwidth (bytes / its runtime) and ixlbench's (bytes / the timed
# part, request creation and release included).
#
# Before the timed rows, ixlbench checks the data of both policies once (WRITE then READ, 1 MiB
# to 64 MiB and a scattered 4 KiB batch, fresh patterns, poisoned destinations; pread/pwrite
# on its own fd to verify). Last, the IOPS row, from the warm page cache: ixl requests of 10^4
# descriptors of 4 KiB each at scattered (shuffled, 4 KiB-aligned) offsets of the file, one
# request at a time (one warm-up request, then IOPS_BYTES, 1G, of them), with POSIX's
# queue_depth=IOPS_QD (64, its default), against fio --rw=randread --bs=4k --io_size=IOPS_BYTES
# --iodepth=IOPS_QD --direct=0 --invalidate=0; the two IOPS are printed side by side (no
# target).
#
# Last, the batch-1 latency rows (issue 18): one request of one 1 MiB descriptor at a time
# (depth 1), the median microseconds from post to done, for each LAT_ROWS entry (policy:op),
# LAT_ROUNDS interleaved rounds (in rotating order) of
#   fio --rw=read|write --bs=LAT_BLOCK --iodepth=1 --lat_percentiles=1, LAT_ITERS I/Os: the
#       median of its total latency (submission to completion: "lat", not "clat", which for an
#       I/O that completes inside its submission, a buffered READ from the page cache, is ~0);
#   ixlbench --block LAT_BLOCK --depth 1 --iters LAT_ITERS --warmup 10: lat_p50_us (from
#       ixl_xfer_post to ixl_xfer_wait returning), the caller waiting in ixl_xfer_wait;
#   the same with --poll (the caller busy-polls ixl_xfer_status), when ixlbench has it.
# Each row's speed ratios are fio us / ixl us and polling us / waiting us, against the targets
# (>= 0.9 each: the waiting caller within 10% of fio at iodepth 1 and of a polling caller).
# Direct rows run on the dropped page cache, buffered READ on the warm one, buffered WRITE
# last (it dirties the cache: synced after).
#
# Environment: BUILD_DIR (default build-bench), ROUNDS (7), SIZES ("1M 16M 64M"), QDS ("1 16"),
# BENCH_DIR (/var/tmp), FILE_SIZE (2G), BYTES (FILE_SIZE), POLICIES ("direct buffered"), OPS
# ("read write"), IOPS_QD (64), IOPS_BYTES (1G), LAT_ROWS ("direct:write direct:read
# buffered:read buffered:write"; "" skips the section), LAT_BLOCK (1M), LAT_ITERS (300),
# LAT_ROUNDS (ROUNDS), KEEP_FILE (0: the file is removed at the end; 1: kept for the next run),
# THP (always: transparent huge pages for both tools during the run, restored at exit; keep:
# the system's setting; bench/thp.sh says why).
# SECTIONS ("rate iops lat"): which parts run (the data checks always do). Duration with the
# defaults on the 2-core test VM: the rate rows took about 5 minutes at 5 rounds on a quiet
# machine (so about 7 at 7); the latency rows (4 x 7 rounds) took 4 minutes under a load
# average of 20 (less when quiet); together well under 25 minutes.
# fio is installed with apt-get when missing (as root). Exit status: 0, or 1 when a run or a
# data check failed; a FAIL of a target is reported, not an error.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
case $build in /*) ;; *) build=$root/$build ;; esac
rounds=${ROUNDS:-7}
sizes=${SIZES:-1M 16M 64M}
qds=${QDS:-1 16}
dir=${BENCH_DIR:-/var/tmp}/ixl-posix
file_size=${FILE_SIZE:-2G}
bytes_run=${BYTES:-$file_size}
iops_bytes=${IOPS_BYTES:-1G}
policies=${POLICIES:-direct buffered}
ops=${OPS:-read write}
iops_qd=${IOPS_QD:-64}
keep=${KEEP_FILE:-0}
lat_rows=${LAT_ROWS-direct:write direct:read buffered:read buffered:write}
lat_block=${LAT_BLOCK:-1M}
lat_iters=${LAT_ITERS:-300}
lat_rounds=${LAT_ROUNDS:-$rounds}
sections=${SECTIONS:-rate iops lat}
want() { case " $sections " in *" $1 "*) return 0 ;; esac; return 1; }
timeout_s=120 # per command: a hung run must not hang the benchmark

bytes() { # 64M -> 67108864
    case $1 in
    *[kK]) echo $((${1%?} << 10)) ;;
    *[mM]) echo $((${1%?} << 20)) ;;
    *[gG]) echo $((${1%?} << 30)) ;;
    *) echo "$1" ;;
    esac
}

# --- Tools ----------------------------------------------------------------------------------
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null || exit 1
fi
bench=$build/tools/ixlbench
if ! cmake --build "$build" -j"$(nproc)" --target ixlbench ixl-info >"$build/posix_build.log" 2>&1; then
    if [ -x "$bench" ]; then
        echo "posix.sh: WARNING: the build failed (see $build/posix_build.log); using the" \
            "ixlbench and libixl built earlier" >&2
    else
        tail -n 20 "$build/posix_build.log" >&2
        echo "posix.sh: the build failed (cmake --build $build --target ixlbench)" >&2
        exit 1
    fi
fi
if ! command -v fio >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "fio:     missing; installing it with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq fio >/dev/null 2>&1 ||
            { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq fio >/dev/null 2>&1; }
    fi
    if ! command -v fio >/dev/null 2>&1; then
        echo "posix.sh: fio is needed (as root: apt-get install fio)" >&2
        exit 1
    fi
fi

# POSIX's default chunk (the largest single I/O), from ixl-info.
# (The line reads: option chunk size 4K..1G bytes, default "64M".)
px_chunk=$("$build/tools/ixl-info" 2>/dev/null | awk '/^  [A-Z]/ { p = ($1 == "POSIX") }
    p && $1 == "option" && $2 == "chunk" && match($0, /default "[0-9]+[KMG]?"/) {
        print substr($0, RSTART + 9, RLENGTH - 10); exit }')
px_chunk=$(bytes "$px_chunk")
case $px_chunk in '' | *[!0-9]*) px_chunk=$((8 << 20)) ;; esac

# --- The file -------------------------------------------------------------------------------
mkdir -p "$dir" || exit 1
fstype=$(stat -f -c %T "$dir")
if [ "$fstype" = tmpfs ] || [ "$fstype" = ramfs ]; then
    echo "posix.sh: $dir is on $fstype: give a BENCH_DIR on a disk" >&2
    exit 1
fi
file=$dir/bench.dat
fsize=$(bytes "$file_size")
results=$(mktemp)
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    rm -f "$results" "$results".*
    [ "$keep" = 1 ] || rm -f "$file"
    thp_restore
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=bench/thp.sh
. "$root/bench/thp.sh"
thp_set

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
src=$(cat "$root"/plugins/posix/*.[ch] 2>/dev/null | sha256sum | cut -c1-12)
dev=$(df --output=source "$dir" | tail -n 1)
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine: $(uname -n), $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r)," \
    "$(free -g | awk '/^Mem:/ { print $2 }') GiB"
echo "build:   $build (CMAKE_BUILD_TYPE=${type:-RelWithDebInfo, the default})"
echo "source:  $(git -C "$root" describe --always --dirty 2>/dev/null || echo "not a git tree")," \
    "plugins/posix digest ${src}"
echo "fio:     $(fio --version)"
echo "file:    $file, $file_size on $fstype ($dev)"
echo "thp:     transparent huge pages $(thp_mode) for both tools (THP=${THP:-always}; bench/thp.sh)"
echo "runs:    $rounds interleaved round(s) per row, each run $bytes_run from idle to idle;" \
    "SIZES: $sizes; QDS: $qds; POSIX chunk $((px_chunk >> 20)) MiB"

if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != "$fsize" ]; then
    echo "writing $file_size of data into $file (once)"
    rm -f "$file"
    if ! fio --name=layout --filename="$file" --size="$fsize" --rw=write --bs=1M --direct=1 \
        --ioengine=io_uring --iodepth=16 --output=/dev/null; then
        echo "posix.sh: cannot write $file" >&2
        exit 1
    fi
fi
fsync_file() {
    # coreutils sync with an argument syncs that file only.
    sync "$file" 2>/dev/null || sync
}
cached() {
    local b
    b=$(fincore -b -n -o RES "$file" 2>/dev/null | tr -d ' ')
    [ -n "$b" ] && echo "$((b >> 20)) MiB of $((fsize >> 20)) MiB in the page cache" ||
        echo "page cache: unknown (no fincore)"
}

# --- Runs -----------------------------------------------------------------------------------
failures=0
record() { # policy op size qd tool value [path]
    echo "$1 $2 $3 $4 $5 $6 ${7:--}" >>"$results"
}

# fio's terse output v3: read bandwidth (KiB/s) in field 7, read IOPS in 8, write bandwidth in 48.
run_fio() { # policy op size qd rw-for-fio [extra...]
    local pol=$1 op=$2 size=$3 qd=$4 rw=$5 out g d=0
    shift 5
    [ "$pol" = direct ] && d=1
    out=$(timeout "$timeout_s" fio --name=posix --filename="$file" --size="$fsize" \
        --rw="$rw" --bs="$size" --iodepth="$qd" --direct=$d --invalidate=0 \
        --scramble_buffers=0 --ioengine=io_uring --numjobs=1 --minimal --terse-version=3 \
        "$@" 2>"$results.err")
    case $op in
    read) g=$(echo "$out" | awk -F';' 'NF > 50 { printf "%.4f", $7 * 1024 / 1e9 }') ;;
    write) g=$(echo "$out" | awk -F';' 'NF > 50 { printf "%.4f", $48 * 1024 / 1e9 }') ;;
    iops) g=$(echo "$out" | awk -F';' 'NF > 50 { print $8 }') ;;
    esac
    if [ -n "$g" ]; then
        record "$pol" "$op" "$size" "$qd" fio "$g"
    else
        record "$pol" "$op" "$size" "$qd" fio NA failed
        failures=$((failures + 1))
        echo "  fio $pol $op $size QD $qd failed: $(tail -n 2 "$results.err")" >&2
    fi
}

# ixlbench's CSV: the columns are looked up by name (gbps, iops, path).
csv_col() { # name
    awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
        $1 == "sweep" && k { print $k; exit }'
}

run_ixl() { # policy op size qd [extra ixlbench options...]
    local pol=$1 op=$2 size=$3 qd=$4 out rc g p col=gbps iop=$2
    shift 4
    local -a args=(--file "$file" --no-check --iters 1000000 --csv --quiet --no-progress)
    [ "$pol" = direct ] && args+=(--direct)
    [ "$op" = iops ] && col=iops iop=read
    out=$(timeout "$timeout_s" "$bench" "${args[@]}" --op "$iop" "$@" 2>"$results.err")
    rc=$?
    g=$(echo "$out" | csv_col "$col")
    p=$(echo "$out" | csv_col path)
    if [ $rc -eq 0 ] && [ -n "$g" ]; then
        record "$pol" "$op" "$size" "$qd" ixl "$g" "$p"
    else
        record "$pol" "$op" "$size" "$qd" ixl NA failed
        failures=$((failures + 1))
        echo "  ixlbench $pol $op $size QD $qd failed (status $rc): $(tail -n 2 "$results.err")" >&2
    fi
}

# Data checks first: every byte of WRITE (read back with pread) and READ (written with pwrite).
echo
echo "data checks (ixlbench, checks on, WRITE then READ):"
for pol in $policies; do
    dflag=""
    [ "$pol" = direct ] && dflag=--direct
    for shape in "--block 1M --block-max 64M --depth 2 --iters 3 --warmup 1" \
        "--block 4K --batch 1000 --layout scattered --iters 3 --warmup 1"; do
        # shellcheck disable=SC2086 # option lists
        out=$(timeout "$timeout_s" "$bench" --file "$file" $dflag $shape --csv --quiet \
            --no-progress 2>"$results.err")
        rc=$?
        n=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" && $NF == "pass"' | wc -l)
        bad=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" && $NF != "pass"' | wc -l)
        if [ $rc -eq 0 ] && [ "$n" -gt 0 ] && [ "$bad" -eq 0 ]; then
            echo "  $pol, $shape: $n row(s) pass"
        else
            echo "  $pol, $shape: FAIL (status $rc): $(tail -n 3 "$results.err")"
            failures=$((failures + 1))
        fi
    done
done

start=$(date +%s)
rate_policies=""
want rate && rate_policies=$policies
for pol in $rate_policies; do
    fsync_file
    if [ "$pol" = direct ]; then
        dd if="$file" iflag=nocache count=0 status=none 2>/dev/null
        echo "direct:   page cache of the file dropped first ($(cached))"
    else
        cat "$file" >/dev/null
        echo "buffered: page cache warmed: the file was read once first ($(cached))"
    fi
    for op in $ops; do
        for s in $sizes; do
            b=$(bytes "$s")
            chunk=()
            [ "$b" -gt "$px_chunk" ] && chunk=(--opt "chunk=$b")
            for q in $qds; do
                echo "  $pol $op $s QD $q: $rounds round(s)" >&2
                for r in $(seq "$rounds"); do
                    if [ $((r % 2)) -eq 1 ]; then
                        run_fio "$pol" "$op" "$s" "$q" "$op" --io_size="$bytes_run"
                        run_ixl "$pol" "$op" "$s" "$q" --block "$s" --depth "$q" \
                            --opt "queue_depth=$q" "${chunk[@]}" --warmup 0 \
                            --max-bytes "$bytes_run" --cold-buffers
                    else
                        run_ixl "$pol" "$op" "$s" "$q" --block "$s" --depth "$q" \
                            --opt "queue_depth=$q" "${chunk[@]}" --warmup 0 \
                            --max-bytes "$bytes_run" --cold-buffers
                        run_fio "$pol" "$op" "$s" "$q" "$op" --io_size="$bytes_run"
                    fi
                done
            done
        done
    done
done
# The IOPS row: the page cache warm (after the buffered section, or warmed now).
warm_state=""
if want iops; then
    fsync_file
    cat "$file" >/dev/null
    warm_state=$(cached)
    echo "  IOPS: 10^4 x 4 KiB scattered, QD $iops_qd: $rounds round(s) ($warm_state)" >&2
    for r in $(seq "$rounds"); do
        run_ixl buffered iops 4K "$iops_qd" --block 4K --batch 10000 --layout scattered \
            --opt "queue_depth=$iops_qd" --warmup 1 --max-bytes "$iops_bytes"
        run_fio buffered iops 4K "$iops_qd" randread --io_size="$iops_bytes"
    done
    fsync_file
fi

# The batch-1 latency rows: fio at iodepth 1 (its total latency), ixlbench at depth 1 waiting
# in ixl_xfer_wait, and polling (--poll) where this ixlbench has it.
lat_b=$(bytes "$lat_block")
have_poll=0
"$bench" --help 2>&1 | grep -q -- '--poll' && have_poll=1
lat_record() { # policy op tool value
    echo "$1 $2 $3 $4" >>"$results.lat"
}
run_fio_lat() { # policy op
    local pol=$1 op=$2 d=0 v
    [ "$pol" = direct ] && d=1
    rm -f "$results.json"
    timeout "$timeout_s" fio --name=lat --filename="$file" --size="$fsize" --rw="$op" \
        --bs="$lat_b" --iodepth=1 --direct=$d --invalidate=0 --scramble_buffers=0 \
        --ioengine=io_uring --numjobs=1 --io_size=$((lat_b * lat_iters)) --lat_percentiles=1 \
        --output-format=json --output="$results.json" >/dev/null 2>"$results.err"
    v=$(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]
print("%.2f" % (j["lat_ns"]["percentile"]["50.000000"] / 1e3))' "$results.json" "$op" 2>/dev/null)
    if [ -n "$v" ]; then
        lat_record "$pol" "$op" fio "$v"
    else
        failures=$((failures + 1))
        echo "  fio latency $pol $op failed: $(tail -n 2 "$results.err")" >&2
    fi
}
run_ixl_lat() { # policy op wait|poll
    local pol=$1 op=$2 mode=$3 out rc v
    local -a args=(--file "$file" --no-check --csv --quiet --no-progress --op "$op"
        --block "$lat_block" --depth 1 --iters "$lat_iters" --warmup 10)
    [ "$pol" = direct ] && args+=(--direct)
    [ "$mode" = poll ] && args+=(--poll)
    out=$(timeout "$timeout_s" "$bench" "${args[@]}" 2>"$results.err")
    rc=$?
    v=$(echo "$out" | csv_col lat_p50_us)
    if [ $rc -eq 0 ] && [ -n "$v" ]; then
        lat_record "$pol" "$op" "$mode" "$v"
    else
        failures=$((failures + 1))
        echo "  ixlbench latency $pol $op ($mode) failed (status $rc): $(tail -n 2 "$results.err")" >&2
    fi
}
run_lat() { # policy op tool
    [ "$2" = write ] && fsync_file # every run starts from a clean page cache
    case $3 in
    fio) run_fio_lat "$1" "$2" ;;
    *) run_ixl_lat "$1" "$2" "$3" ;;
    esac
}
if want lat && [ -n "$lat_rows" ]; then
    lat_tools="fio wait"
    [ $have_poll = 1 ] && lat_tools="fio wait poll"
    [ $have_poll = 1 ] || echo "  latency: polling mode unavailable in this build" \
        "(ixlbench --help lists no --poll)" >&2
    for row in $lat_rows; do
        pol=${row%%:*} op=${row#*:}
        fsync_file
        if [ "$pol" = direct ]; then
            dd if="$file" iflag=nocache count=0 status=none 2>/dev/null
        else
            cat "$file" >/dev/null
        fi
        echo "  latency $pol $op $lat_block, depth 1: $lat_rounds round(s) of $lat_iters" >&2
        for r in $(seq "$lat_rounds"); do
            # Rotating order: each tool goes first in a third of the rounds.
            # shellcheck disable=SC2086 # the list of tools
            set -- $lat_tools
            for _ in $(seq $((r % $#))); do set -- "$@" "$1" && shift; done
            for t in "$@"; do run_lat "$pol" "$op" "$t"; done
        done
    done
    fsync_file
fi
echo "($(($(date +%s) - start)) s of runs)" >&2
echo

# --- Report ---------------------------------------------------------------------------------
touch "$results"
do_rate=0 do_iops=0
want rate && do_rate=1
want iops && do_iops=1
awk -v rounds="$rounds" -v policies="$policies" -v ops="$ops" -v sizes="$sizes" -v qds="$qds" \
    -v warm="$warm_state" -v iqd="$iops_qd" -v do_rate=$do_rate -v do_iops=$do_iops '
function median(key,    n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    lo[key] = a[1]; hi[key] = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(key, fmt) {
    if (!cnt[key]) return "failed"
    return sprintf(fmt, median(key), lo[key], hi[key]) (cnt[key] < rounds ? "*" : "")
}
{
    key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5
    if ($6 != "NA") { cnt[key]++; val[key, cnt[key]] = $6 }
    if ($7 != "-" && $7 != "failed") path[$1 SUBSEP $2 SUBSEP $3 SUBSEP $4] = $7
}
END {
    if (do_rate) rate_report()
    if (do_iops) iops_report()
}
function rate_report(    np, no, ns, nq, P, O, S, Q, n, lsum, minr, minw, a, b, c, d, row, kf, ki, f, x, rs, q, nl, low, i, g, missing) {
    printf "GB/s (10^9 B/s), median of %d interleaved runs [min-max]; ratio = ixl median / fio median\n", rounds
    printf "%-9s %-6s %6s %3s  %-22s %-22s %6s  %s\n", "policy", "op", "block", "QD", "fio", "ixl (POSIX)", "ratio", "ixl path"
    np = split(policies, P, " "); no = split(ops, O, " "); ns = split(sizes, S, " "); nq = split(qds, Q, " ")
    n = 0; lsum = 0; minr = -1
    for (a = 1; a <= np; a++) for (b = 1; b <= no; b++) for (c = 1; c <= ns; c++) for (d = 1; d <= nq; d++) {
        row = P[a] SUBSEP O[b] SUBSEP S[c] SUBSEP Q[d]
        kf = row SUBSEP "fio"; ki = row SUBSEP "ixl"
        f = cnt[kf] ? median(kf) : -1; x = cnt[ki] ? median(ki) : -1
        rs = "n/a"
        if (f > 0 && x > 0) {
            q = x / f; rs = sprintf("%.3f", q); n++; lsum += log(q)
            if (q < 0.85) { rs = rs " <"; low[++nl] = sprintf("%s %s %s QD %s (%.2f)", P[a], toupper(O[b]), S[c], Q[d], q) }
            if (minr < 0 || q < minr) { minr = q; minw = sprintf("%s %s %s QD %s", P[a], toupper(O[b]), S[c], Q[d]) }
        } else missing++
        printf "%-9s %-6s %6s %3s  %-22s %-22s %6s  %s\n", P[a], toupper(O[b]), S[c], Q[d],
            cell(kf, "%6.3f [%5.3f-%5.3f]"), cell(ki, "%6.3f [%5.3f-%5.3f]"), rs, (row in path ? path[row] : "-")
    }
    printf "(direct: O_DIRECT on both sides; buffered: the page cache warm, %s before the IOPS row;\n", warm
    printf " fio --invalidate=0; * = fewer than %d runs succeeded; < = below 0.85)\n", rounds
    if (n > 0) {
        g = exp(lsum / n)
        printf "\ngeometric mean of %d ratios: %.4f  (target >= 0.95: %s)\n", n, g, (g >= 0.95 ? "pass" : "FAIL")
        printf "lowest ratio: %.4f, %s  (target: no row < 0.85: %s)\n", minr, minw, (nl ? "FAIL" : "pass")
        for (i = 1; i <= nl; i++) printf "  below 0.85: %s\n", low[i]
    }
    if (missing) printf "%d row(s) without both medians: not in the geometric mean\n", missing
}
function iops_report(    kf, ki) {
    kf = "buffered" SUBSEP "iops" SUBSEP "4K" SUBSEP iqd SUBSEP "fio"
    ki = "buffered" SUBSEP "iops" SUBSEP "4K" SUBSEP iqd SUBSEP "ixl"
    printf "\nIOPS, 4 KiB reads at scattered offsets from the warm page cache, median of %d [min-max]:\n", rounds
    printf "  ixl (POSIX): %s  one request of 10^4 descriptors, queue_depth=%s\n", cell(ki, "%.0f [%.0f-%.0f]"), iqd
    printf "  fio:         %s  --rw=randread --bs=4k --iodepth=%s --invalidate=0\n", cell(kf, "%.0f [%.0f-%.0f]"), iqd
    if (cnt[kf] && cnt[ki]) printf "  ixl / fio:   %.2f (no target)\n", median(ki) / median(kf)
}' "$results"

if want lat && [ -s "$results.lat" ]; then
    echo
    awk -v rows="$lat_rows" -v rounds="$lat_rounds" -v iters="$lat_iters" -v blk="$lat_block" \
        -v have_poll=$have_poll '
function median(key,    n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    lo[key] = a[1]; hi[key] = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(key) {
    if (!cnt[key]) return (key ~ /poll$/ && !have_poll) ? "unavailable" : "failed"
    return sprintf("%7.1f [%.0f-%.0f]", median(key), lo[key], hi[key]) (cnt[key] < rounds ? "*" : "")
}
{ key = $1 SUBSEP $2 SUBSEP $3; cnt[key]++; val[key, cnt[key]] = $4 }
END {
    printf "Batch-1 latency: one %s descriptor per request, depth 1; microseconds from post to done,\n", blk
    printf "median of %d interleaved rounds [min-max], each the median of %d requests (fio: %d I/Os,\n", rounds, iters, iters
    printf "its lat p50); speed ratios fio/wait and poll/wait (targets >= 0.9)\n"
    printf "%-9s %-6s %-20s %-20s %-20s %8s %9s\n", "policy", "op", "fio iodepth=1", "ixl waiting", "ixl polling", "fio/wait", "poll/wait"
    nr = split(rows, R, " "); bad = 0; n = 0
    for (i = 1; i <= nr; i++) {
        pol = R[i]; sub(/:.*/, "", pol); op = R[i]; sub(/^[^:]*:/, "", op)
        kf = pol SUBSEP op SUBSEP "fio"; kw = pol SUBSEP op SUBSEP "wait"; kp = pol SUBSEP op SUBSEP "poll"
        r1 = r2 = "n/a"
        if (cnt[kf] && cnt[kw]) { q = median(kf) / median(kw); r1 = sprintf("%.3f", q) (q < 0.9 ? " <" : ""); n++; if (q < 0.9) bad++ }
        if (cnt[kp] && cnt[kw]) { q = median(kp) / median(kw); r2 = sprintf("%.3f", q) (q < 0.9 ? " <" : ""); n++; if (q < 0.9) bad++ }
        printf "%-9s %-6s %-20s %-20s %-20s %8s %9s\n", pol, toupper(op), cell(kf), cell(kw), cell(kp), r1, r2
    }
    printf "(< = below 0.9; * = fewer than %d runs succeeded)\n", rounds
    if (n) printf "latency targets (every ratio >= 0.9): %s (%d of %d ratios below)\n", bad ? "FAIL" : "pass", bad, n
    if (!have_poll) printf "polling mode unavailable in this build (ixlbench --help lists no --poll): poll/wait not measured\n"
}' "$results.lat"
fi

if [ $failures -gt 0 ]; then
    echo
    echo "$failures run(s) or check(s) failed (see the messages above)"
    exit 1
fi
exit 0

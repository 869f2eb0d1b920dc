#!/bin/bash
# ixl over UCX (the UCX plugin, through ixlbench) against raw UCX (ucx_perftest ucp_put_bw),
# with the same transports and sizes, interleaved, in one run.
#
# Modes (knob MODES, default "shm shm-heap tcp"):
#   shm       UCX_TLS=shm; ixl: --opt transports=shm --opt err_mode=none, ucx_perftest without
#             -e (UCX 1.13 refuses shared memory with peer error handling). Target: ixl / UCX
#             >= 0.9 at every size.
#   tcp       UCX_TLS=tcp, UCX_NET_DEVICES=lo; ixl: transports=tcp devices=lo err_mode=peer,
#             ucx_perftest with -e (peer error handling). Ratio reported, no target: UCX 1.13's
#             own put over tcp is slow and erratic here.
#             The plugin moves WRITE/READ over tcp with its own active messages (path tcp+am;
#             rma_emulation=ixl, docs/ucx.md).
#   tcp-none  the same with err_mode=none and no -e.
#   tcp-ucx   tcp as above, the plugin with rma_emulation=ucx: UCX's own emulated put (path
#             tcp), for comparison with the plugin's messages. No target.
#   shm-heap  a diagnostic: shm, but ucx_perftest's buffers from the heap (UCX_ALLOC_PRIO=heap),
#             not from UCX's shared-memory allocator: the kind of memory ixl registers when
#             the plugin does not allocate (docs/ucx.md). No target.
# For each size (knob SIZES, default "1M 64M") it runs ROUNDS (5) rounds; each round runs every
# mode's ucx_perftest and ixlbench back to back, so drift on this shared machine hits both alike.
#
# ucx_perftest: a server and a client on 127.0.0.1, -t ucp_put_bw -s SIZE -n N -w W; bandwidth =
# the client's final CSV line (MB/s = 2^20 B/s, converted to GB/s = 10^9 B/s). It keeps many puts
# in flight and flushes at the end.
# ixlbench: a target and an initiator process (tools/ixlbench, docs/ixlbench.md), --backend UCX,
# WRITE of one SIZE block per request (made once and posted again: --reuse), DEPTH (4) requests
# in flight over tcp, SHM_DEPTH (1) over shared memory (a request = the put + a flush of the
# endpoint), checks off for timing
# (--no-check), the target's memory from the plugin (--target-alloc ixl) where it allocates,
# else from mmap (--target-alloc heap; the header says which). Before the timed runs each mode gets one untimed run with data checks on (4
# iterations at the first size): a transfer that delivers wrong bytes fails the script.
#
# Why SHM_DEPTH 1: ucx_perftest puts into one destination buffer from one source buffer, so at
# 1 MiB its working set (2 MiB) stays in the L2 cache of this VM's cores (2 MiB each); ixlbench
# gives each request in flight its own slot, so at depth 4 it copies through 8 MiB, and a plain
# memcpy loop of 1 MiB blocks drops from ~30 to ~14 GB/s here between 1 and 2+ slots
# (docs/benchmarks.md). Over shared memory into UCX-allocated memory a put is a memcpy in the
# posting thread and the request is done when ixl_xfer_post returns, so depth adds no overlap;
# depth 1 is the like-for-like shape. SHM_DEPTH=4 shows the cache effect.
# Latency section (knob LAT_MODES, default "shm tcp"; LAT_MODES= skips it, MODES= skips the
# bandwidth rows): 4 KiB WRITE post->done, one request in flight, against ucx_perftest -t
# ucp_put_lat -s 4096 on the same transports, in the same rounds (ROUNDS, interleaved):
#   shm   UCX_TLS=shm, err_mode=none; both sides' memory from the heap (ixlbench
#         --target-alloc heap, ucx_perftest with UCX_ALLOC_PRIO=heap): UCX 1.13 emulates a put
#         into heap memory with active messages, so the target's worker must handle every put.
#   tcp   UCX_TLS=tcp on lo, err_mode=peer (ucx_perftest -e); the plugin's own messages.
# ucx_perftest: the "50.0_percentile_lat" of its CSV line (half a round trip of a put and the
# answer put: both sides busy-polling). ixl: ixlbench --block 4K --depth 1 --reuse --no-check,
# LAT_ITERS (3000) requests, the median post->done (lat_p50_us: inside ixl_xfer_post, then
# until the request is seen complete); "wait" = ixl_xfer_wait, "poll" = ixlbench --poll (a
# caller polling ixl_xfer_status; the row is left out when this ixlbench has no --poll).
# Target (issue 18): ixl's median <= 2x ucx_perftest's (the plugin's post->done includes
# the put's round trip, ucx_perftest's figure is half of one).
# A/B of the latency rows: BASE_DIR=<another build> (e.g. main's Release build) runs that
# build's ixlbench and UCX plugin too, in every round right after this build's run of the same
# row (ucx_perftest, B wait, A wait, B poll, A poll, per mode), and the table gains an "A" row
# per mode and a B/A column (medians). The baseline is not rebuilt.
# Knobs: BUILD_DIR (default build; give it a directory of its own where others rebuild build/),
# ROUNDS (5), SIZES ("1M 64M"; K/M/G suffixes), MODES ("shm shm-heap tcp"), DEPTH (4), SHM_DEPTH
# (1), WORKERS
# (1: the plugin's workers option on both sides; ucx_perftest always uses one worker).
# Exit status: 0, or 1 when a run failed (a transfer error, a failed data check, a missing
# plugin); a FAIL against the 0.9 target is printed but does not change the status.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
rounds=${ROUNDS:-5}
sizes=${SIZES:-1M 64M}
modes=${MODES-shm shm-heap tcp}
lat_modes=${LAT_MODES-shm tcp}
lat_iters=${LAT_ITERS:-3000}
base=${BASE_DIR:-}
if [ -n "$base" ]; then
    case $base in /*) ;; *) base=$root/$base ;; esac
    if [ ! -x "$base/tools/ixlbench" ] || [ ! -f "$base/lib/plugins/libixl_plugin_UCX.so" ]; then
        echo "ucx.sh: BASE_DIR=$base has no tools/ixlbench and UCX plugin" >&2
        exit 2
    fi
fi
depth=${DEPTH:-4}
shm_depth=${SHM_DEPTH:-1}
workers=${WORKERS:-1}
timeout_s=120 # per command: a hung peer must not hang the benchmark

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null || exit 1
fi
bench=$build/tools/ixlbench
plugin=$build/lib/plugins/libixl_plugin_UCX.so
if ! cmake --build "$build" -j"$(nproc)" --target ixlbench ixl-info ixl_plugin_UCX \
    >"$build/ucx_build.log" 2>&1; then
    if [ -x "$bench" ] && [ -f "$plugin" ]; then
        echo "ucx.sh: WARNING: the build failed (see $build/ucx_build.log); using the" \
            "ixlbench and UCX plugin built earlier" >&2
    else
        tail -n 20 "$build/ucx_build.log" >&2
        echo "ucx.sh: the build failed (cmake --build $build --target ixlbench ixl_plugin_UCX);" \
            "the UCX plugin needs libucx-dev (scripts/deps.sh)" >&2
        exit 1
    fi
fi
if [ ! -f "$plugin" ]; then
    echo "ucx.sh: no UCX plugin in $build/lib/plugins (libucx-dev missing at configure time?)" >&2
    exit 1
fi
export IXL_PLUGIN_DIR=${IXL_PLUGIN_DIR:-$build/lib/plugins}

if ! command -v ucx_perftest >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "ucx.sh: ucx_perftest missing; installing ucx-utils with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq ucx-utils >/dev/null 2>&1 ||
            { apt-get update -qq >/dev/null 2>&1 &&
                apt-get install -y -qq ucx-utils >/dev/null 2>&1; }
    fi
    if ! command -v ucx_perftest >/dev/null 2>&1; then
        echo "ucx.sh: ucx_perftest not found (install ucx-utils as root)" >&2
        exit 1
    fi
fi

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine: $(uname -n), $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r)"
if grep -q '^flags.* hypervisor' /proc/cpuinfo; then
    echo "         (a virtual machine: timings vary more from run to run)"
fi
echo "build:   $build (CMAKE_BUILD_TYPE=${type:-RelWithDebInfo, the default})"
ucx_src=$(cat "$root"/plugins/ucx/*.[ch] 2>/dev/null | sha256sum | cut -c1-12)
echo "source:  $(git -C "$root" describe --always --dirty 2>/dev/null || echo "not a git tree")," \
    "plugins/ucx digest ${ucx_src}"
[ -n "$base" ] && echo "base:    A = $base ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' \
    "$base/CMakeCache.txt")), B = the build above; latency rows only"
echo "ucx:     $(ucx_info -v 2>/dev/null | sed -n 's/^# *Version */ucx_perftest /p' | head -n 1)"

bytes() { # 64M -> 67108864
    case $1 in
    *[kK]) echo $((${1%?} << 10)) ;;
    *[mM]) echo $((${1%?} << 20)) ;;
    *[gG]) echo $((${1%?} << 30)) ;;
    *) echo "$1" ;;
    esac
}

# Per mode: UCX environment, ucx_perftest flags, ixlbench options.
mode_env() {
    case $1 in
    shm) echo "UCX_TLS=shm" ;;
    shm-heap) echo "UCX_TLS=shm UCX_ALLOC_PRIO=heap" ;;
    tcp | tcp-none | tcp-ucx) echo "UCX_TLS=tcp UCX_NET_DEVICES=lo" ;;
    esac
}
mode_pflags() {
    case $1 in
    tcp | tcp-ucx) echo "-e" ;;
    esac
}
mode_opts() {
    case $1 in
    shm | shm-heap) echo "--opt transports=shm --opt err_mode=none" ;;
    tcp) echo "--opt transports=tcp --opt devices=lo --opt err_mode=peer" ;;
    tcp-none) echo "--opt transports=tcp --opt devices=lo --opt err_mode=none" ;;
    tcp-ucx) echo "--opt transports=tcp --opt devices=lo --opt err_mode=peer --opt rma_emulation=ucx" ;;
    esac
}
for m in $lat_modes; do
    case $m in
    shm | tcp) ;;
    *)
        echo "ucx.sh: unknown latency mode '$m' (LAT_MODES: shm tcp)" >&2
        exit 2
        ;;
    esac
done
for m in $modes; do
    case $m in
    shm | shm-heap | tcp | tcp-none | tcp-ucx) ;;
    *)
        echo "ucx.sh: unknown mode '$m' (MODES: shm shm-heap tcp tcp-none tcp-ucx)" >&2
        exit 2
        ;;
    esac
done

# Iterations (and warm-up) per run: ~0.1-0.5 s of copying. UCX 1.13's put over tcp moves
# 0.1-0.8 GB/s here: few iterations, none at all of warm-up at 64 MiB.
iters_for() { # mode bytes -> "iters warmup"
    if [ "$1" = shm ]; then
        if [ "$2" -le $((4 << 20)) ]; then echo "400 8"; else echo "16 2"; fi
    elif [ "$1" = shm-heap ]; then # UCX's put emulated in software: ~1 GB/s, 0.1 at 64 MiB
        if [ "$2" -le $((4 << 20)) ]; then echo "100 4"; else echo "4 1"; fi
    else
        if [ "$2" -le $((4 << 20)) ]; then echo "40 4"; else echo "2 0"; fi
    fi
}

results=$(mktemp)
failures=0
port=$((20000 + $$ % 20000))
bgpid=""
trap 'rm -f "$results" "$results".* "$lat_results"; [ -n "$bgpid" ] && kill "$bgpid" 2>/dev/null' EXIT

record() { # size label value [note]
    echo "$1 $2 $3 ${4:--}" >>"$results"
}

# ucx_perftest ucp_put_bw: the server in the background, the client in the foreground.
run_ucx() { # mode size iters warmup
    local mode=$1 size=$2 iters=$3 warm=$4 out g
    local -a env flags
    read -r -a env <<<"$(mode_env "$mode") UCX_WARN_UNUSED_ENV_VARS=n"
    read -r -a flags <<<"$(mode_pflags "$mode")"
    port=$((port + 1))
    env "${env[@]}" timeout "$timeout_s" ucx_perftest -t ucp_put_bw -s "$size" -n "$iters" \
        -w "$warm" -p "$port" "${flags[@]}" >/dev/null 2>&1 &
    bgpid=$!
    for _ in $(seq 50); do # wait for the server's listener, at most 5 s
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        sleep 0.1
    done
    out=$(env "${env[@]}" timeout "$timeout_s" ucx_perftest 127.0.0.1 -t ucp_put_bw -s "$size" \
        -n "$iters" -w "$warm" -p "$port" "${flags[@]}" -f -v 2>"$results.err" | tail -n 1)
    wait "$bgpid" 2>/dev/null
    bgpid=""
    g=$(echo "$out" | awk -F, 'NF >= 6 && $6 + 0 > 0 { printf "%.3f", $6 * 1048576 / 1e9 }')
    if [ -n "$g" ]; then
        record "$size" "ucx-$mode" "$g"
    else
        record "$size" "ucx-$mode" NA failed
        failures=$((failures + 1))
        echo "  ucx-$mode at $size: ucx_perftest failed: $(tail -n 1 "$results.err")" >&2
    fi
}

# ixlbench: the target in the background, the initiator in the foreground. GB/s and the path
# are read from the CSV row (bench/csv2tsv.awk: the path UCX reports for shared memory,
# "sysv,cma", is a quoted field).
run_ixl() { # mode size iters warmup [timed]
    local mode=$1 size=$2 iters=$3 warm=$4 timed=${5:-} md=$results.md out rc trc g path
    local -a opts
    local d=$depth
    case $mode in shm*) d=$shm_depth ;; esac
    read -r -a opts <<<"--backend UCX $(mode_opts "$mode") --opt workers=$workers"
    rm -f "$md"
    timeout "$timeout_s" "$bench" --role target --md-file "$md" --idle-timeout "$timeout_s" \
        --quiet "${opts[@]}" 2>"$results.terr" &
    bgpid=$!
    out=$(timeout "$timeout_s" "$bench" --role initiator --md-file "$md" --op write \
        --block "$size" --iters "$iters" --warmup "$warm" --max-bytes $((size * iters)) \
        --depth "$d" --reuse --target-alloc "$talloc" ${timed:+--no-check} --csv --quiet \
        --no-progress "${opts[@]}" 2>"$results.err")
    rc=$?
    [ $rc -ne 0 ] && kill "$bgpid" 2>/dev/null
    wait "$bgpid"
    trc=$?
    bgpid=""
    g=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" { print $14 }')
    path=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" { print $4 }')
    if [ $rc -eq 0 ] && [ $trc -eq 0 ] && [ -n "$g" ]; then
        [ -z "$timed" ] && echo "  ixl-$mode: data check at $size B passed (path $path)" >&2
        [ -n "$timed" ] && record "$size" "ixl-$mode" "$g" "$path"
    else
        [ -n "$timed" ] && record "$size" "ixl-$mode" NA failed
        failures=$((failures + 1))
        echo "  ixl-$mode at $size: failed (initiator $rc, target $trc):" \
            "$(tail -n 1 "$results.err") $(tail -n 1 "$results.terr")" >&2
    fi
}

# --- Latency: 4 KiB post->done against ucx_perftest ucp_put_lat ---------------------------
lat_results=$(mktemp)
lat_env() {
    case $1 in
    shm) echo "UCX_TLS=shm UCX_ALLOC_PRIO=heap" ;;
    tcp) echo "UCX_TLS=tcp UCX_NET_DEVICES=lo" ;;
    esac
}
lat_record() { # mode label value
    echo "$1 $2 $3" >>"$lat_results"
}
run_put_lat() { # mode
    local mode=$1 out v
    local -a env flags
    read -r -a env <<<"$(lat_env "$mode") UCX_WARN_UNUSED_ENV_VARS=n"
    read -r -a flags <<<"$(mode_pflags "$mode")"
    port=$((port + 1))
    env "${env[@]}" timeout "$timeout_s" ucx_perftest -t ucp_put_lat -s 4096 -n "$lat_iters" \
        -w 100 -p "$port" "${flags[@]}" >/dev/null 2>&1 &
    bgpid=$!
    for _ in $(seq 50); do
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        sleep 0.1
    done
    out=$(env "${env[@]}" timeout "$timeout_s" ucx_perftest 127.0.0.1 -t ucp_put_lat -s 4096 \
        -n "$lat_iters" -w 100 -p "$port" "${flags[@]}" -f -v 2>"$results.err" | tail -n 1)
    wait "$bgpid" 2>/dev/null
    bgpid=""
    v=$(echo "$out" | awk -F, 'NF >= 3 && $2 + 0 > 0 { printf "%.3f", $2 }')
    if [ -n "$v" ]; then
        lat_record "$mode" ucx "$v"
    else
        lat_record "$mode" ucx NA
        failures=$((failures + 1))
        echo "  put_lat $mode: ucx_perftest failed: $(tail -n 1 "$results.err")" >&2
    fi
}
run_ixl_lat() { # mode wait|--poll [A: the BASE_DIR build]
    local mode=$1 how=$2 side=${3:-} md=$results.md out rc trc v b=$bench pd=$IXL_PLUGIN_DIR
    local -a opts
    read -r -a opts <<<"--backend UCX $(mode_opts "$mode") --opt workers=$workers"
    if [ "$side" = A ]; then
        b=$base/tools/ixlbench
        pd=$base/lib/plugins
    fi
    rm -f "$md"
    IXL_PLUGIN_DIR=$pd timeout "$timeout_s" "$b" --role target --md-file "$md" --idle-timeout "$timeout_s" \
        --quiet "${opts[@]}" 2>"$results.terr" &
    bgpid=$!
    out=$(IXL_PLUGIN_DIR=$pd timeout "$timeout_s" "$b" --role initiator --md-file "$md" --op write \
        --block 4K --iters "$lat_iters" --warmup 100 --depth 1 --reuse --target-alloc heap \
        --no-check --csv --quiet --no-progress ${how/#wait/} "${opts[@]}" 2>"$results.err")
    rc=$?
    [ $rc -ne 0 ] && kill "$bgpid" 2>/dev/null
    wait "$bgpid"
    trc=$?
    bgpid=""
    v=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" |
        awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "lat_p50_us") c = i }
                    $1 == "sweep" && c { print $c }')
    if [ $rc -eq 0 ] && [ $trc -eq 0 ] && [ -n "$v" ]; then
        lat_record "$mode" "${side:-ixl}-${how#--}" "$v"
    else
        lat_record "$mode" "${side:-ixl}-${how#--}" NA
        failures=$((failures + 1))
        echo "  ixl latency $mode ($how): failed (initiator $rc, target $trc):" \
            "$(tail -n 1 "$results.err") $(tail -n 1 "$results.terr")" >&2
    fi
}
lat_hows=wait
if "$bench" --help 2>&1 | grep -q -- '--poll'; then
    lat_hows="wait --poll"
fi

start=$(date +%s)
first=$(bytes "${sizes%% *}")
# The target's memory: from the plugin (ixl_mem_alloc) where it allocates, else mmap.
talloc=ixl
if ! "$bench" --backend UCX --opt transports=shm --opt err_mode=none --target-opt \
    transports=shm --target-opt err_mode=none --block 4K --iters 1 --warmup 0 --op write \
    --quiet --no-progress --csv >/dev/null 2>"$results.err" &&
    grep -q 'allocates' "$results.err"; then
    talloc=heap
fi
echo "ixl:     ixlbench --backend UCX, WRITE, depth $depth (shm: $shm_depth), --reuse, --no-check," \
    "--target-alloc $talloc, workers=$workers"
echo
for m in $modes; do # one checked run per mode, untimed
    run_ixl "$m" "$first" 4 0
done
if [ -n "$lat_modes" ]; then
    echo "latency: 4 KiB, $rounds rounds" >&2
    for _ in $(seq "$rounds"); do
        for m in $lat_modes; do
            run_put_lat "$m"
            for h in $lat_hows; do
                run_ixl_lat "$m" "$h"
                [ -n "$base" ] && run_ixl_lat "$m" "$h" A
            done
        done
    done
fi
for s in $sizes; do
    [ -n "$modes" ] || break
    b=$(bytes "$s")
    echo "size $s: $rounds rounds" >&2
    for _ in $(seq "$rounds"); do
        for m in $modes; do
            read -r n w <<<"$(iters_for "$m" "$b")"
            run_ucx "$m" "$b" "$n" "$w"
            run_ixl "$m" "$b" "$n" "$w" timed
        done
    done
done
echo "($(($(date +%s) - start)) s of runs)" >&2

# --- Report ---------------------------------------------------------------------------------
[ -n "$modes" ] && awk -v modes="$modes" -v sizes_h="$sizes" -v rounds="$rounds" '
function median(key,    n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    lo[key] = a[1]; hi[key] = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
    key = $1 SUBSEP $2
    if ($3 != "NA") { cnt[key]++; val[key, cnt[key]] = $3 } else why[key] = $4
    if ($4 != "-" && $3 != "NA" && index(" " used[key] " ", " " $4 " ") == 0) used[key] = used[key] " " $4
    if (!($1 in seen)) { seen[$1] = 1; order[++ns] = $1 }
}
END {
    nm = split(modes, m, " ")
    split(sizes_h, sh, " ")
    printf "GB/s (10^9 B/s), median of %d interleaved runs [min-max]; ratio = ixl / UCX medians\n", rounds
    printf "%-9s %-6s %-24s %-24s %-7s %-10s %s\n", "mode", "size", "ucx_perftest put_bw", "ixl over UCX", "ratio", "target", "ixl path"
    for (i = 1; i <= ns; i++) for (k = 1; k <= nm; k++) {
        ku = order[i] SUBSEP "ucx-" m[k]; ki = order[i] SUBSEP "ixl-" m[k]
        a = cnt[ki] ? median(ki) : -1; b = cnt[ku] ? median(ku) : -1
        cu = b < 0 ? (ku in why ? why[ku] : "-") : sprintf("%7.3f [%.3f-%.3f]", b, lo[ku], hi[ku])
        ci = a < 0 ? (ki in why ? why[ki] : "-") : sprintf("%7.3f [%.3f-%.3f]", a, lo[ki], hi[ki])
        if (a < 0 || b <= 0) { q = "n/a"; verdict = m[k] == "shm" ? "FAIL" : "-" }
        else {
            q = sprintf("%.2f", a / b)
            verdict = m[k] == "shm" ? (a / b >= 0.9 ? ">=0.9 pass" : ">=0.9 FAIL") : "(none)"
        }
        if ((cnt[ki] && cnt[ki] < rounds) || (cnt[ku] && cnt[ku] < rounds)) { q = q "*"; partial = 1 }
        printf "%-9s %-6s %-24s %-24s %-7s %-10s %s\n", m[k], sh[i], cu, ci, q, verdict, substr(used[ki], 2)
    }
    if (partial) printf "* fewer than %d runs succeeded on a side: the median is of those that did\n", rounds
}' "$results"

if [ -n "$lat_modes" ]; then
    [ -n "$modes" ] && echo
    awk -v lmodes="$lat_modes" -v hows="$lat_hows" -v rounds="$rounds" -v ab="${base:+1}" '
function median(key,    n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    lo[key] = a[1]; hi[key] = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$3 != "NA" { key = $1 SUBSEP $2; cnt[key]++; val[key, cnt[key]] = $3 }
END {
    nm = split(lmodes, m, " "); nh = split(hows, h, " ")
    printf "4 KiB latency (us), median of %d interleaved runs [min-max]; ratio = ixl / ucx_perftest\n", rounds
    printf "%-5s %-26s %-8s %-26s %-7s %-9s%s\n", "mode", "ucx_perftest put_lat p50", "ixl", "ixl post->done p50", "ratio", "target", ab ? " B/A" : ""
    for (k = 1; k <= nm; k++) for (j = 1; j <= nh; j++) for (s = 0; s <= (ab ? 1 : 0); s++) {
        ku = m[k] SUBSEP "ucx"; hw = h[j]; sub(/^--/, "", hw)
        ki = m[k] SUBSEP (s ? "A-" : "ixl-") hw
        b = cnt[ku] ? median(ku) : -1; a = cnt[ki] ? median(ki) : -1
        if (!s) { kA = m[k] SUBSEP "A-" hw; aA = cnt[kA] ? median(kA) : -1 }
        cu = b < 0 ? "failed" : sprintf("%8.2f [%.2f-%.2f]", b, lo[ku], hi[ku])
        ci = a < 0 ? "failed" : sprintf("%8.2f [%.2f-%.2f]", a, lo[ki], hi[ki])
        if (a < 0 || b <= 0) { q = "n/a"; v = "FAIL" }
        else { q = sprintf("%.2f", a / b); v = a / b <= 2 ? "<=2 pass" : "<=2 FAIL" }
        ba = ab && !s ? (a > 0 && aA > 0 ? sprintf(" %.2f", a / aA) : " n/a") : ""
        printf "%-5s %-26s %-8s %-26s %-7s %-9s%s\n", m[k], cu, (s ? "A " : "") hw, ci, q, v, ba
    }
}' "$lat_results"
fi

if [ $failures -gt 0 ]; then
    echo
    echo "$failures run(s) failed (see the messages above)"
    exit 1
fi
exit 0

#!/bin/bash
# NET backend bandwidth against its baselines, measured side by side in one run.
#
# For each size (1, 64, 256 MiB) it runs ROUNDS (5) interleaved rounds; each round runs, in
# order, memcpy (1 thread), raw process_vm_writev, raw TCP loopback, ucx_perftest ucp_put_bw
# with UCX_TLS=shm and with UCX_TLS=tcp, and NET's three paths (shm = the target's memory
# mapped, cma = process_vm_writev, tcp), so that drift on this shared machine hits every
# figure alike. It prints the medians (GB/s = 10^9 B/s) and the ratios of medians against the
# targets at 64 and 256 MiB:
#   NET shm >= 0.9 x memcpy and >= 0.9 x UCX shm; NET cma >= 0.9 x process_vm_writev;
#   NET tcp >= 0.8 x raw TCP (at every size from 1 MiB, issue 18); NET tcp / UCX tcp is
#   reported without a target.
# TCP over loopback depends on where the two processes run: on one CPU the receiver copies the
# bytes the sender just wrote, still in that CPU's cache; on two they cross between caches. On
# the 2-core VM the raw stream at 1 MiB takes 8.6 GB/s on one CPU and 3.3-3.8 on two, and left
# to the scheduler it lands on either from run to run, so an unpinned ratio compares one
# placement's luck with another's. PLACE (default "1cpu 2cpu"; "" skips) adds, per round, the
# raw stream and NET tcp with placement fixed: 1cpu has both processes (every thread) on the
# first allowed CPU, 2cpu has the sender/initiator on the first and the receiver/target on the
# second (net_driver's NET_DRIVER_CPUS, taskset for ixlbench). The tcp targets apply to each.
#
# The raw baselines come from bench/net_driver (see its header); the NET runs from ixlbench
# (tools/ixlbench, docs/ixlbench.md) in two processes, a target and an initiator, WRITE of one
# SIZE block per request (made once and posted again: --reuse), one warm-up iteration, the
# path forced on the initiator, a data check after every iteration (outside the timing). UCX
# is skipped, with a note, when ucx_perftest is missing and cannot be installed (apt-get, as
# root only); the NET rows read "unavailable" while libixl has no NET plugin. The environment may set BUILD_DIR
# (default build), ROUNDS (default 5), SIZES (default "1M 64M 256M"; K/M/G suffixes) and
# NET_OPTS, more NET options for both sides of every NET run (e.g. "copy_threads=1 conns=1"
# for a like-for-like comparison with the one-thread, one-stream baselines). Where others
# rebuild build/ while this runs, give it a BUILD_DIR of its own: a libixl replaced mid-run
# makes later runs measure other code.
#
# Then a latency section (LATENCY=0 skips it; SIZES="" runs only it): per round, the median
# microseconds of LAT_ITERS (default 2000) round trips of LAT_SIZE (default 4K) bytes, depth 1:
#   raw-pp       net_driver tcplat: a blocking TCP ping-pong (LAT_SIZE out, one byte back)
#   raw-pp-poll  net_driver tcplat-poll: the same, non-blocking sockets spinning on recv
#   ucx-lat-shm  ucx_perftest ucp_put_lat, UCX_TLS=shm (its median, one-way as UCX reports it)
#   net-tcp      ixlbench WRITE over NET tcp, post->done median, the caller in ixl_xfer_wait
#   net-tcp-poll the same with the caller polling ixl_xfer_status (ixlbench --poll, when this
#                build's ixlbench has it; else the row says "polling mode unavailable")
#   net-tcp-busy the polling caller against a target whose one event-loop thread busy-polls
#                (NET busy_poll_us=1000 io_threads=1 on the target only; BUSY_OPTS replaces
#                those, "" skips the row): one thread spins on each side, as in raw-pp-poll
#   net-shm      ixlbench WRITE over NET shm (same node), post->done median
#   raw-pp@P, net-tcp@P  raw-pp and net-tcp with placement P fixed (PLACE, above)
# and the targets: net-tcp <= 1.1 x raw-pp (and at each placement); net-tcp-poll and
# net-tcp-busy <= 1.1 x raw-pp-poll; net-shm <= 2.7 x ucx-lat-shm.
# Exit status: 0, or 1 when a run failed for any reason but NET's absence (a transfer error, a
# failed ixlbench data check); a MISS of a target or a failed ucx_perftest (reported as
# "failed") does not fail the run.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
rounds=${ROUNDS:-5}
sizes=${SIZES-1M 64M 256M}
latency=${LATENCY:-1}
lat_size=${LAT_SIZE:-4K}
lat_iters=${LAT_ITERS:-2000}
busy=${BUSY_OPTS-busy_poll_us=1000 io_threads=1}
lat_topts="" # NET options of the target alone, for one row
net_opts=${NET_OPTS:-}
place=${PLACE-1cpu 2cpu}
timeout_s=120 # per command: a hung peer must not hang the benchmark

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null || exit 1
fi
driver=$build/bench/net_driver
bench=$build/tools/ixlbench
if ! cmake --build "$build" -j"$(nproc)" --target net_driver ixlbench ixl-info \
    >"$build/net_build.log" 2>&1; then
    # libixl (with the NET plugin in it) may be mid-edit: binaries built earlier still
    # measure, but say so loudly.
    if [ -x "$driver" ] && [ -x "$bench" ]; then
        echo "net.sh: WARNING: the build failed (see $build/net_build.log); using the" \
            "net_driver, ixlbench and libixl built earlier" >&2
    else
        tail -n 20 "$build/net_build.log" >&2
        echo "net.sh: the build failed (cmake --build $build --target net_driver ixlbench)" >&2
        exit 1
    fi
fi
# NET_OPTS, as ixlbench options for the backend of each process.
ixl_opts=""
for kv in $net_opts; do
    ixl_opts="$ixl_opts --opt $kv"
done

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine: $(uname -n), $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r)"
if grep -q '^flags.* hypervisor' /proc/cpuinfo; then
    echo "         (a virtual machine: timings vary more from run to run)"
fi
echo "build:   $build (CMAKE_BUILD_TYPE=${type:-RelWithDebInfo, the default})"
# The NET sources may be uncommitted: a digest ties the numbers to what was built.
net_src=$(cat "$root"/plugins/net/*.[ch] 2>/dev/null | sha256sum | cut -c1-12)
echo "source:  $(git -C "$root" describe --always --dirty 2>/dev/null || echo "not a git tree")," \
    "plugins/net digest ${net_src}"
echo "ixl:     $("$build/tools/ixl-info" 2>/dev/null | grep -m1 '^plugins')" \
    "$("$build/tools/ixl-info" 2>/dev/null | sed -n 's/^  \([A-Za-z0-9_]*\) .*version.*/\1/p' |
        tr '\n' ' ')"

# --- UCX ------------------------------------------------------------------------------------
ucx=yes
if ! command -v ucx_perftest >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "ucx:     ucx_perftest missing; installing ucx-utils with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq ucx-utils >/dev/null 2>&1 ||
            { apt-get update -qq >/dev/null 2>&1 &&
                apt-get install -y -qq ucx-utils >/dev/null 2>&1; }
    fi
    command -v ucx_perftest >/dev/null 2>&1 || ucx=no
fi
if [ $ucx = yes ]; then
    echo "ucx:     $(ucx_info -v 2>/dev/null | sed -n 's/^# *Version */ucx_perftest /p' | head -n 1)"
else
    echo "ucx:     SKIPPED (ucx_perftest not found; install ucx-utils as root)"
fi

# --- NET ------------------------------------------------------------------------------------
# One small run in one process: 77 means there is no NET backend.
# shellcheck disable=SC2086 # ixl_opts is a list of words
"$bench" --block 4K --iters 1 --op write --quiet --no-progress $ixl_opts >/dev/null \
    2>"$build/net_probe.err"
case $? in
0) net=yes ;;
77) net=no ;;
*) net=yes ;; # present but failing: run it anyway so each path says what fails
esac
if [ $net = yes ]; then
    echo "NET:     present (measured with ixlbench); extra options: ${net_opts:-none}"
else
    echo "NET:     unavailable ($(grep -m1 'backend' "$build/net_probe.err"))"
fi

# --- Placement ------------------------------------------------------------------------------
# The first two CPUs this process may run on (taskset's list: "0-3,8" and the like).
cpus=$(taskset -cp $$ 2>/dev/null | sed 's/.*: *//' | tr ',' '\n' |
    awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }' | head -n 2 | tr '\n' ' ')
set -- $cpus
cpu_a=${1:-}
cpu_b=${2:-}
if [ -n "$place" ] && { [ -z "$cpu_b" ] || ! command -v taskset >/dev/null 2>&1; }; then
    echo "place:   SKIPPED (needs taskset and two CPUs; have: ${cpus:-none})"
    place=""
elif [ -n "$place" ]; then
    echo "place:   $place (1cpu: CPU $cpu_a; 2cpu: sender/initiator CPU $cpu_a, receiver/target CPU $cpu_b)"
fi
echo

# --- Runs -----------------------------------------------------------------------------------
bytes() { # 64M -> 67108864
    case $1 in
    *[kK]) echo $((${1%?} << 10)) ;;
    *[mM]) echo $((${1%?} << 20)) ;;
    *[gG]) echo $((${1%?} << 30)) ;;
    *) echo "$1" ;;
    esac
}

# Iterations per run: enough for ~0.1-0.5 s of copying at the slowest raw path.
iters_for() {
    local b=$1
    if [ "$b" -le $((4 << 20)) ]; then
        echo 200
    elif [ "$b" -le $((64 << 20)) ]; then
        echo 20
    else
        echo 8
    fi
}

results=$(mktemp)
failures=0
port=$((20000 + $$ % 20000))
tpid=""
trap 'rm -f "$results" "$results".*; [ -n "$tpid" ] && kill "$tpid" 2>/dev/null' EXIT

record() { # size mode value [used-path]
    echo "$1 $2 $3 ${4:--}" >>"$results"
}

run_driver() { # label size iters args... (drv_cpus: NET_DRIVER_CPUS for this run)
    local label=$1 size=$2 iters=$3 out rc g used
    shift 3
    out=$(NET_DRIVER_CPUS=$drv_cpus timeout "$timeout_s" "$driver" "$@" 2>"$results.err")
    rc=$?
    g=$(echo "$out" | sed -n 's/^RESULT .*gbps=\([0-9.]*\).*/\1/p')
    used=$(echo "$out" | sed -n 's/^RESULT .* used=\([^ ]*\).*/\1/p')
    if [ $rc -eq 0 ] && [ -n "$g" ]; then
        record "$size" "$label" "$g" "$used"
    elif [ $rc -eq 77 ]; then
        record "$size" "$label" NA unavailable
    else
        record "$size" "$label" NA failed
        failures=$((failures + 1))
        echo "  $label at $size: failed (status $rc): $(tail -n 1 "$results.err")" >&2
    fi
}

# NET through ixlbench: a target process in the background, an initiator in the foreground;
# the CSV row gives GB/s (field 14) and the path NET used (field 4). pin_t and pin_i, when set,
# are taskset prefixes for the target and the initiator (every thread of each).
run_ixlbench() { # label size iters path
    local label=$1 size=$2 iters=$3 path=$4 md=$results.md out rc trc g used
    rm -f "$md"
    # shellcheck disable=SC2086
    $pin_t timeout "$timeout_s" "$bench" --role target --md-file "$md" --idle-timeout "$timeout_s" \
        --quiet $ixl_opts $lat_topts 2>"$results.terr" &
    tpid=$!
    # shellcheck disable=SC2086
    out=$($pin_i timeout "$timeout_s" "$bench" --role initiator --md-file "$md" --op write \
        --block "$size" --iters "$iters" --warmup 1 --max-bytes $((size * iters)) --reuse \
        --path "$path" --csv --quiet --no-progress $ixl_opts 2>"$results.err")
    rc=$?
    [ $rc -ne 0 ] && kill "$tpid" 2>/dev/null
    wait "$tpid"
    trc=$?
    tpid=""
    g=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" { print $14 }')
    used=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" { print $4 }')
    if [ $rc -eq 0 ] && [ $trc -eq 0 ] && [ -n "$g" ]; then
        record "$size" "$label" "$g" "$used"
    elif [ $rc -eq 77 ]; then
        record "$size" "$label" NA unavailable
    else
        record "$size" "$label" NA failed
        failures=$((failures + 1))
        echo "  $label at $size: failed (initiator $rc, target $trc):" \
            "$(tail -n 1 "$results.err") $(tail -n 1 "$results.terr")" >&2
    fi
}

# ucx_perftest ucp_put_bw: a server in the background and a client; the client's final CSV
# line has the overall bandwidth in MB/s (2^20 B/s) in field 6.
run_ucx() { # label tls size iters warmup
    local label=$1 tls=$2 size=$3 iters=$4 warm=$5 out g spid
    local -a env=(UCX_TLS="$tls" UCX_WARN_UNUSED_ENV_VARS=n)
    # With tcp, keep UCX on the loopback device, like the raw TCP baseline.
    [ "$tls" = tcp ] && env+=(UCX_NET_DEVICES=lo)
    port=$((port + 1))
    env "${env[@]}" timeout "$timeout_s" ucx_perftest -t ucp_put_bw -s "$size" -n "$iters" \
        -w "$warm" -p "$port" >/dev/null 2>&1 &
    spid=$!
    for _ in $(seq 50); do # wait for the server's listener, at most 5 s
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        sleep 0.1
    done
    out=$(env "${env[@]}" timeout "$timeout_s" ucx_perftest 127.0.0.1 -t ucp_put_bw -s "$size" \
        -n "$iters" -w "$warm" -p "$port" -f -v 2>"$results.err" | tail -n 1)
    wait "$spid" 2>/dev/null
    g=$(echo "$out" | awk -F, 'NF >= 6 && $6 + 0 > 0 { printf "%.3f", $6 * 1048576 / 1e9 }')
    if [ -n "$g" ]; then
        record "$size" "$label" "$g"
    else
        record "$size" "$label" NA failed
        echo "  $label at $size: ucx_perftest failed: $(tail -n 1 "$results.err")" >&2
    fi
}

# Placement pl (PLACE) for the next runs: net_driver's NET_DRIVER_CPUS and ixlbench's taskset.
place_on() {
    if [ "$1" = 1cpu ]; then
        drv_cpus=$cpu_a,$cpu_a pin_t="taskset -c $cpu_a" pin_i="taskset -c $cpu_a"
    else
        drv_cpus=$cpu_a,$cpu_b pin_t="taskset -c $cpu_b" pin_i="taskset -c $cpu_a"
    fi
}

modes="memcpy pvm tcp ucx-shm ucx-tcp net-shm net-cma net-tcp"
for pl in $place; do modes="$modes tcp@$pl net-tcp@$pl"; done
drv_cpus="" pin_t="" pin_i=""
start=$(date +%s)
for s in $sizes; do
    b=$(bytes "$s")
    n=$(iters_for "$b")
    # UCX 1.13's put over tcp runs at tens of MB/s here (10 s per 256 MiB): one iteration
    # without warm-up per run for large sizes keeps the script within minutes. No target
    # rests on it.
    if [ "$b" -gt $((4 << 20)) ]; then
        ucx_tcp_n=1 ucx_tcp_w=0
    else
        ucx_tcp_n=20 ucx_tcp_w=2
    fi
    echo "size $s: $rounds rounds of $n iterations (UCX tcp: $ucx_tcp_n)" >&2
    for _ in $(seq "$rounds"); do
        run_driver memcpy "$b" "$n" memcpy "$b" "$n"
        run_driver pvm "$b" "$n" pvm "$b" "$n"
        run_driver tcp "$b" "$n" tcp "$b" "$n"
        if [ $ucx = yes ]; then
            run_ucx ucx-shm shm "$b" "$n" 2
            run_ucx ucx-tcp tcp "$b" "$ucx_tcp_n" "$ucx_tcp_w"
        else
            record "$b" ucx-shm NA skipped
            record "$b" ucx-tcp NA skipped
        fi
        for p in shm cma tcp; do
            if [ $net = yes ]; then
                run_ixlbench net-$p "$b" "$n" $p
            else
                record "$b" net-$p NA unavailable
            fi
        done
        for pl in $place; do
            place_on "$pl"
            run_driver "tcp@$pl" "$b" "$n" tcp "$b" "$n"
            if [ $net = yes ]; then
                run_ixlbench "net-tcp@$pl" "$b" "$n" tcp
            else
                record "$b" "net-tcp@$pl" NA unavailable
            fi
            drv_cpus="" pin_t="" pin_i=""
        done
    done
done
[ -n "$sizes" ] && echo "($(($(date +%s) - start)) s of runs)" >&2
echo

# --- Report ---------------------------------------------------------------------------------
# Medians (and the spread) of each (size, mode); the ratio table is built from the medians.
[ -n "$sizes" ] && awk -v modes="$modes" -v sizes_h="$sizes" -v rounds="$rounds" -v place="$place" '
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
    if ($4 != "-" && $3 != "NA") used[key] = used[key] (index(" " used[key] " ", " " $4 " ") ? "" : " " $4)
    if (!($1 in seen)) { seen[$1] = 1; order[++ns] = $1 }
}
END {
    nm = split(modes, m, " ")
    split(sizes_h, sh, " ")
    for (i = 1; i <= ns; i++) for (k = 1; k <= nm; k++) {
        key = order[i] SUBSEP m[k]
        med[key] = cnt[key] ? median(key) : -1
    }
    printf "GB/s, median of %d interleaved runs [min-max]\n", rounds
    printf "%-13s", "mode"
    for (i = 1; i <= ns; i++) printf "  %23s", sh[i] " (" order[i] " B)"
    printf "\n"
    for (k = 1; k <= nm; k++) {
        printf "%-13s", m[k]
        for (i = 1; i <= ns; i++) {
            key = order[i] SUBSEP m[k]
            if (med[key] < 0) cell = (key in why ? why[key] : "-")
            else cell = sprintf("%6.2f [%5.2f-%5.2f]%s", med[key], lo[key], hi[key], cnt[key] < rounds ? "*" : " ")
            if (cnt[key] && cnt[key] < rounds) partial = 1
            printf "  %23s", cell
        }
        printf "\n"
    }
    if (partial) printf "* fewer than %d runs succeeded: the median is of those that did\n", rounds
    # A NET run on another path than the one forced is a finding in itself.
    for (i = 1; i <= ns; i++) for (k = 1; k <= nm; k++) {
        key = order[i] SUBSEP m[k]
        if (m[k] ~ /^net-/ && (key in used)) {
            want = substr(m[k], 5)
            sub(/@.*/, "", want)
            if (used[key] != " " want)
                printf "note: %s at %s reported path(s)%s\n", m[k], sh[i], used[key]
        }
    }
    printf "\nratios of medians (targets apply at 64 MiB and above; the tcp ones from 1 MiB)\n"
    # ratio:target:the smallest size it applies at
    big = 64 * 1048576
    rl = "net-shm/memcpy:0.9:" big " net-shm/ucx-shm:0.9:" big " net-cma/pvm:0.9:" big
    rl = rl " net-tcp/tcp:0.8:1048576 net-tcp/ucx-tcp:0:0"
    np = split(place, pls, " ")
    for (p = 1; p <= np; p++) rl = rl " net-tcp@" pls[p] "/tcp@" pls[p] ":0.8:1048576"
    nr = split(rl, rs, " ")
    printf "%-22s %-6s", "ratio", "target"
    for (i = 1; i <= ns; i++) printf "  %-13s", sh[i]
    printf "\n"
    for (r = 1; r <= nr; r++) {
        split(rs[r], pt, ":"); split(pt[1], ab, "/"); target = pt[2] + 0
        printf "%-22s %-6s", pt[1], (target > 0 ? ">=" target : "-")
        for (i = 1; i <= ns; i++) {
            a = med[order[i] SUBSEP ab[1]]; b = med[order[i] SUBSEP ab[2]]
            if (a < 0 || b <= 0) { printf "  %-13s", "n/a"; continue }
            q = a / b
            verdict = ""
            if (target > 0 && order[i] + 0 >= pt[3] + 0) verdict = q >= target ? " PASS" : " MISS"
            if (cnt[order[i] SUBSEP ab[1]] < rounds || cnt[order[i] SUBSEP ab[2]] < rounds) verdict = verdict "*"
            printf "  %-13s", sprintf("%.2f%s", q, verdict)
        }
        printf "\n"
    }
}' "$results"

# --- Latency ----------------------------------------------------------------------------------
lat_results=$(mktemp)
trap 'rm -f "$results" "$results".* "$lat_results"; [ -n "$tpid" ] && kill "$tpid" 2>/dev/null' EXIT
lat_record() { # mode value [why]
    echo "$1 $2 ${3:--}" >>"$lat_results"
}

run_lat_driver() { # label mode
    local out rc v
    out=$(NET_DRIVER_CPUS=$drv_cpus timeout "$timeout_s" "$driver" "$2" "$lat_b" "$lat_iters" \
        2>"$results.err")
    rc=$?
    v=$(echo "$out" | sed -n 's/^RESULT .*p50_us=\([0-9.]*\).*/\1/p')
    if [ $rc -eq 0 ] && [ -n "$v" ]; then
        lat_record "$1" "$v"
    else
        lat_record "$1" NA failed
        failures=$((failures + 1))
        echo "  $1: failed (status $rc): $(tail -n 1 "$results.err")" >&2
    fi
}

# ixlbench initiator against a target, depth 1, one LAT_SIZE block per request: the CSV's
# lat_p50_us (field 16) is the median of post -> done.
run_lat_ixlbench() { # label path iters [more initiator options]
    local label=$1 path=$2 iters=$3 md=$results.md out rc trc v used
    shift 3
    rm -f "$md"
    # shellcheck disable=SC2086
    $pin_t timeout "$timeout_s" "$bench" --role target --md-file "$md" --idle-timeout "$timeout_s" \
        --quiet $ixl_opts $lat_topts 2>"$results.terr" &
    tpid=$!
    # shellcheck disable=SC2086
    out=$($pin_i timeout "$timeout_s" "$bench" --role initiator --md-file "$md" --op write \
        --block "$lat_b" --iters "$iters" --warmup $((iters / 10 < 100 ? iters / 10 : 100)) \
        --depth 1 --reuse --path "$path" --csv --quiet --no-progress "$@" $ixl_opts \
        2>"$results.err")
    rc=$?
    [ $rc -ne 0 ] && kill "$tpid" 2>/dev/null
    wait "$tpid"
    trc=$?
    tpid=""
    v=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" { print $16 }')
    used=$(echo "$out" | awk -f "$root/bench/csv2tsv.awk" | awk -F'\t' '$1 == "sweep" { print $4 }')
    if [ $rc -eq 0 ] && [ $trc -eq 0 ] && [ -n "$v" ]; then
        lat_record "$label" "$v"
        [ "$used" != "$path" ] && echo "  note: $label reported path $used" >&2
    elif [ $rc -eq 77 ]; then
        lat_record "$label" NA unavailable
    else
        lat_record "$label" NA failed
        failures=$((failures + 1))
        echo "  $label: failed (initiator $rc, target $trc):" \
            "$(tail -n 1 "$results.err") $(tail -n 1 "$results.terr")" >&2
    fi
}

# ucx_perftest ucp_put_lat: the client's final CSV line has the median latency (us) in field 2.
run_ucx_lat() { # label tls iters
    local label=$1 tls=$2 iters=$3 out v spid
    local -a env=(UCX_TLS="$tls" UCX_WARN_UNUSED_ENV_VARS=n)
    port=$((port + 1))
    env "${env[@]}" timeout "$timeout_s" ucx_perftest -t ucp_put_lat -s "$lat_b" -n "$iters" \
        -w $((iters / 10)) -p "$port" >/dev/null 2>&1 &
    spid=$!
    for _ in $(seq 50); do
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        sleep 0.1
    done
    out=$(env "${env[@]}" timeout "$timeout_s" ucx_perftest 127.0.0.1 -t ucp_put_lat -s "$lat_b" \
        -n "$iters" -w $((iters / 10)) -p "$port" -f -v 2>"$results.err" | tail -n 1)
    wait "$spid" 2>/dev/null
    v=$(echo "$out" | awk -F, 'NF >= 3 && $2 + 0 > 0 { printf "%.3f", $2 }')
    if [ -n "$v" ]; then
        lat_record "$label" "$v"
    else
        lat_record "$label" NA failed
        echo "  $label: ucx_perftest failed: $(tail -n 1 "$results.err")" >&2
    fi
}

if [ "$latency" != 0 ]; then
    lat_b=$(bytes "$lat_size")
    if "$bench" --help 2>/dev/null | grep -q -- '--poll'; then
        poll=yes
    else
        poll=no
        echo "latency: polling mode unavailable in this build (ixlbench has no --poll)" >&2
    fi
    lat_modes="raw-pp raw-pp-poll ucx-lat-shm net-tcp net-tcp-poll net-tcp-busy net-shm"
    for pl in $place; do lat_modes="$lat_modes raw-pp@$pl net-tcp@$pl"; done
    echo "latency $lat_size: $rounds rounds of $lat_iters round trips (shm: $((lat_iters * 10)))" >&2
    start=$(date +%s)
    for _ in $(seq "$rounds"); do
        run_lat_driver raw-pp tcplat
        run_lat_driver raw-pp-poll tcplat-poll
        if [ $ucx = yes ]; then
            run_ucx_lat ucx-lat-shm shm $((lat_iters * 10))
        else
            lat_record ucx-lat-shm NA skipped
        fi
        if [ $net = yes ]; then
            run_lat_ixlbench net-tcp tcp "$lat_iters"
            if [ $poll = yes ]; then
                run_lat_ixlbench net-tcp-poll tcp "$lat_iters" --poll
            else
                lat_record net-tcp-poll NA "polling mode unavailable in this build"
            fi
            if [ $poll = yes ] && [ -n "$busy" ]; then
                lat_topts=""
                for o in $busy; do lat_topts="$lat_topts --opt $o"; done
                run_lat_ixlbench net-tcp-busy tcp "$lat_iters" --poll
                lat_topts=""
            else
                lat_record net-tcp-busy NA "not run (BUSY_OPTS empty or no polling mode)"
            fi
            run_lat_ixlbench net-shm shm $((lat_iters * 10))
        else
            for m in net-tcp net-tcp-poll net-tcp-busy net-shm; do lat_record $m NA unavailable; done
        fi
        # The waiting rows with placement fixed (PLACE, above): a blocking ping-pong's round
        # trip is 12 us with both ends on one CPU and ~55 with one on each here, and unpinned
        # it lands on either. (The spinning rows are not bimodal, and two spinners on one CPU
        # measure the scheduler.)
        for pl in $place; do
            place_on "$pl"
            run_lat_driver "raw-pp@$pl" tcplat
            if [ $net = yes ]; then
                run_lat_ixlbench "net-tcp@$pl" tcp "$lat_iters"
            else
                lat_record "net-tcp@$pl" NA unavailable
            fi
            drv_cpus="" pin_t="" pin_i=""
        done
    done
    echo "($(($(date +%s) - start)) s of latency runs)" >&2
    echo
    awk -v modes="$lat_modes" -v rounds="$rounds" -v size="$lat_size" -v place="$place" '
    function median(m,    n, i, j, t, a) {
        n = cnt[m]
        for (i = 1; i <= n; i++) a[i] = val[m, i]
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        lo[m] = a[1]; hi[m] = a[n]
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        if ($2 != "NA") { cnt[$1]++; val[$1, cnt[$1]] = $2 }
        else { w = $3; for (i = 4; i <= NF; i++) w = w " " $i; why[$1] = w }
    }
    END {
        printf "latency of %s, us: median over %d rounds of each round'"'"'s median [min-max]\n", size, rounds
        nm = split(modes, m, " ")
        for (k = 1; k <= nm; k++) {
            med[m[k]] = cnt[m[k]] ? median(m[k]) : -1
            if (med[m[k]] < 0) cell = (m[k] in why ? why[m[k]] : "-")
            else cell = sprintf("%8.2f [%.2f-%.2f]%s", med[m[k]], lo[m[k]], hi[m[k]], cnt[m[k]] < rounds ? "*" : "")
            printf "%-16s %s\n", m[k], cell
        }
        printf "\nratios of medians (lower is better)\n"
        rl = "net-tcp/raw-pp:1.1 net-tcp-poll/raw-pp-poll:1.1 net-tcp-busy/raw-pp-poll:1.1 net-shm/ucx-lat-shm:2.7"
        np = split(place, pls, " ")
        for (p = 1; p <= np; p++) rl = rl " net-tcp@" pls[p] "/raw-pp@" pls[p] ":1.1"
        nr = split(rl, rs, " ")
        printf "%-24s %-7s %s\n", "ratio", "target", "value"
        for (r = 1; r <= nr; r++) {
            split(rs[r], pt, ":"); split(pt[1], ab, "/")
            a = med[ab[1]]; b = med[ab[2]]
            if (a < 0 || b <= 0) { printf "%-24s <=%-5s n/a\n", pt[1], pt[2]; continue }
            q = a / b
            printf "%-24s <=%-5s %.2f %s\n", pt[1], pt[2], q, q <= pt[2] + 0 ? "PASS" : "MISS"
        }
    }' "$lat_results"
fi

if [ $failures -gt 0 ]; then
    echo
    echo "$failures run(s) failed (see the messages above)"
    exit 1
fi
exit 0

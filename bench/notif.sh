#!/bin/bash
# NET notifications, two builds side by side: bench/notif_lat (its header says what it
# measures) from build A and from build B, alternating A, B, then B, A, ... for ROUNDS rounds,
# so that drift on a shared machine hits both alike; then the medians over the rounds and the
# ratio B/A of each. Rows:
#   pp-us      median round trip of a notification there and one back (SIZE bytes), in us
#   pp-p99-us  its 99th percentile
#   flood/s    notifications of SIZE bytes per second, one way, back to back
# With NET_LAT=1 each round also runs bench/net.sh's latency section (SIZES="" ROUNDS=1,
# LAT_ITERS round trips of 4 KiB WRITEs, no notification) against each build, and the rows
# raw-pp, net-tcp, net-tcp-poll and net-shm (us, medians over the rounds) follow.
#
# Usage: bench/notif.sh BUILD_A [BUILD_B]   (build directories, each configured from the source
# it measures; with one, only its numbers). Environment: ROUNDS (7), PP_ITERS (2000),
# FLOOD_ITERS (20000), SIZE (64), NET_LAT (0), LAT_ITERS (2000). Prints the load (uptime)
# before and after.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_A [BUILD_B]" >&2; exit 2; }
builds=()
for b in "$@"; do
    d=$(cd "$b" && pwd) || exit 2
    cmake --build "$d" -j"$(nproc)" --target notif_lat >"$d/notif_build.log" 2>&1 ||
        { tail -n 20 "$d/notif_build.log" >&2; exit 1; }
    builds+=("$d")
done
rounds=${ROUNDS:-7}
pp_iters=${PP_ITERS:-2000}
flood_iters=${FLOOD_ITERS:-20000}
size=${SIZE:-64}
net_lat=${NET_LAT:-0}
lat_iters=${LAT_ITERS:-2000}
out=$(mktemp -d /tmp/ixl_notif.XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "load:    $(uptime)"
for i in "${!builds[@]}"; do echo "build $((i + 1)): ${builds[$i]}"; done
echo "rounds $rounds, ping-pong $pp_iters x $size B, flood $flood_iters x $size B"
status=0
order=("${!builds[@]}")
for r in $(seq 1 "$rounds"); do
    # The order flips every round: a run right after another measures slower on a busy
    # machine (seen: 10% on two cores), which must not favour one build.
    if [ $((r % 2)) = 0 ]; then
        order=($(printf '%s\n' "${!builds[@]}" | sort -rn))
    else
        order=("${!builds[@]}")
    fi
    for i in "${order[@]}"; do
        d=${builds[$i]}
        if ! timeout 120 "$d/bench/notif_lat" pp "$pp_iters" "$size" >>"$out/pp.$i"; then
            echo "notif_lat pp failed (build $((i + 1)))" >&2
            status=1
        fi
        if ! timeout 120 "$d/bench/notif_lat" flood "$flood_iters" "$size" >>"$out/flood.$i"; then
            echo "notif_lat flood failed (build $((i + 1)))" >&2
            status=1
        fi
        if [ "$net_lat" = 1 ]; then
            SIZES="" ROUNDS=1 LAT_ITERS=$lat_iters BUILD_DIR=$d timeout 600 "$root/bench/net.sh" \
                >"$out/net.$i.$r" 2>&1
            for m in raw-pp net-tcp net-tcp-poll net-shm; do
                awk -v m="$m" '$1 == m && $2 ~ /^[0-9.]+$/ {print $2; exit}' "$out/net.$i.$r" \
                    >>"$out/lat.$m.$i"
            done
        fi
    done
done
median() { sort -n | awk '{v[NR] = $1} END {if (NR == 0) print "NA"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf '%-13s' row
for i in "${!builds[@]}"; do printf ' %12s' "build$((i + 1))"; done
[ ${#builds[@]} -eq 2 ] && printf ' %8s' "B/A"
echo
rows="pp-us pp-p99-us flood/s"
[ "$net_lat" = 1 ] && rows="$rows raw-pp net-tcp net-tcp-poll net-shm"
for row in $rows; do
    vals=()
    for i in "${!builds[@]}"; do
        case $row in
        pp-us) v=$(awk '{print $2}' "$out/pp.$i" 2>/dev/null | median) ;;
        pp-p99-us) v=$(awk '{print $3}' "$out/pp.$i" 2>/dev/null | median) ;;
        flood/s) v=$(awk '{print $2}' "$out/flood.$i" 2>/dev/null | median) ;;
        *) v=$(median <"$out/lat.$row.$i" 2>/dev/null) ;;
        esac
        vals+=("$v")
    done
    printf '%-13s' "$row"
    for v in "${vals[@]}"; do printf ' %12s' "$v"; done
    if [ ${#builds[@]} -eq 2 ]; then
        awk -v a="${vals[0]}" -v b="${vals[1]}" 'BEGIN {if (a + 0 > 0) printf " %8.3f", b / a; else printf " %8s", "NA"}'
    fi
    echo
done
echo "per round (build: pp-us pp-p99-us | flood/s):"
for i in "${!builds[@]}"; do
    echo "  build$((i + 1)): $(awk '{printf "%s/%s ", $2, $3}' "$out/pp.$i") | $(awk '{printf "%s ", $2}' "$out/flood.$i")"
    if [ "$net_lat" = 1 ]; then
        for m in raw-pp net-tcp net-tcp-poll net-shm; do
            echo "    $m: $(tr '\n' ' ' <"$out/lat.$m.$i" 2>/dev/null)"
        done
    fi
done
echo "load:    $(uptime)"
exit $status

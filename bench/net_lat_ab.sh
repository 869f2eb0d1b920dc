#!/bin/bash
# NET tcp 4 KiB post->done latency, build A against build B, interleaved: ROUNDS rounds, each
# runs the raw baselines of bench/net.sh's latency section (net_driver tcplat: a blocking
# ping-pong; tcplat-poll: both sides spinning) and, for A then B (B then A on even rounds),
# ixlbench WRITE over NET tcp in two processes (depth 1, --reuse, data checked after every
# iteration outside the timing) with the caller waiting in ixl_xfer_wait and polling
# ixl_xfer_status (--poll). Prints the median of each row's per-run medians (us) and the
# ratios against the baselines (bench/net.sh's targets: waiting <= 1.1 x raw-pp, polling
# <= 1.1 x raw-pp-poll). Two more baselines, for reading those ratios, not targets: the same
# ping-pongs with ixlbench's per-iteration check around each timed round trip, untimed
# (net_driver tcplat-chk, tcplat-poll-chk: a fresh pattern before, and after it another thread
# of the echoing process checks and poisons the bytes over a second connection), printed as
# raw-pp-chk and raw-pp-poll-chk with ixl's ratios over them too.
# One more raw row, a reading aid where the build has it: raw-frame-poll (net_driver
# tcplat-frame-poll), NET's system calls for the busy row without NET's code.
# A third ixl row, busy: the caller polling as in the polling row, against a target whose one
# event-loop thread busy-polls (NET options BUSY_OPTS on the target only, by default
# "busy_poll_us=1000 io_threads=1"): one thread spins on each side, as in raw-pp-poll, where
# the polling row's target sleeps between requests. BUSY_OPTS="" leaves the row out (a build
# from before busy_poll_us refuses the option: its rows say FAIL).
#
#   bench/net_lat_ab.sh BUILD_A BUILD_B
#
# Environment: ROUNDS (default 5), ITERS (default 2000), SIZE (default 4K), NET_OPTS (more NET
# options for both sides), BUSY_OPTS (above), NET_PATH (tcp; shm or cma: the same-node paths,
# A against B only: no raw rows, no busy row). The raw baselines come from BUILD_A's net_driver.
# Each ixl row also gives B/A. OP (default write; read) is ixlbench's --op: a READ's 4 KiB
# come back with the answer, which the loop thread reads (the caller's watch takes only a
# WRITE's answer), so it measures the caller's sleep and wake-up after the watch; the raw
# rows stay the WRITE-shaped ping-pongs. PLACE (default "", the scheduler's choice) fixes
# where the two processes run, as bench/net.sh's PLACE: 1cpu puts both (every thread, the
# raw baselines' too) on the first CPU this script may use, 2cpu the initiator on the first
# and the target on the second.
set -u
A=${1:?build dir A}
B=${2:?build dir B}
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-2000}
SIZE=${SIZE:-4K}
OP=${OP:-write}
NET_PATH=${NET_PATH:-tcp}
BUSY=${BUSY_OPTS-busy_poll_us=1000 io_threads=1}
[ "$NET_PATH" != tcp ] && BUSY=""
busy_opts=""
for o in $BUSY; do busy_opts="$busy_opts --opt $o"; done
tmp=$(mktemp -d /tmp/ixl-net-lat-ab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
opts=""
for o in ${NET_OPTS:-}; do opts="$opts --opt $o"; done
PLACE=${PLACE:-}
pin_t="" pin_i=""
if [ -n "$PLACE" ]; then
    # shellcheck disable=SC2046 # the CPU numbers, one word each
    set -- $(taskset -cp $$ | sed 's/.*: *//' | tr ',' '\n' |
        awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }' | head -n 2)
    case $PLACE in
    1cpu) pin_t="taskset -c $1" pin_i="taskset -c $1" && export NET_DRIVER_CPUS=$1,$1 ;;
    2cpu) pin_t="taskset -c ${2:?2cpu needs two CPUs}" pin_i="taskset -c $1" &&
        export NET_DRIVER_CPUS=$1,$2 ;;
    *) echo "net_lat_ab.sh: PLACE must be 1cpu or 2cpu, not '$PLACE'" >&2 && exit 2 ;;
    esac
fi
bytes=$(numfmt --from=iec "$SIZE")

lat() { # build mode -> p50 us of post->done
    local md=$tmp/md extra="" topts=""
    [ "$2" != wait ] && extra=--poll
    [ "$2" = busy ] && topts=$busy_opts
    rm -f "$md"
    # shellcheck disable=SC2086
    timeout 120 $pin_t "$1/tools/ixlbench" --role target --md-file "$md" --idle-timeout 60 \
        --quiet $opts $topts >/dev/null 2>"$tmp/t.err" &
    local t=$!
    # shellcheck disable=SC2086
    timeout 120 $pin_i "$1/tools/ixlbench" --role initiator --md-file "$md" --op "$OP" \
        --block "$SIZE" --iters "$ITERS" --warmup 100 --depth 1 --reuse --path "$NET_PATH" --csv \
        --quiet --no-progress $extra $opts 2>>"$tmp/i.err" |
        awk -F, '$1 == "sweep" { v = $16; c = $NF } END { if (c != "pass") v = "FAIL"; print v }'
    wait "$t"
}
raw() { # mode [build] -> p50 us
    "${2:-$A}/bench/net_driver" "$1" "$bytes" "$ITERS" 2>/dev/null |
        sed -n 's/^RESULT .*p50_us=\([0-9.]*\).*/\1/p'
}
# NET's own system calls without NET (net_driver tcplat-frame-poll: its header, its busy loop's
# epoll_wait, its scratch read and copy, the caller's one recv per look), from the first build
# whose net_driver has the mode: the floor of the busy row's wire; a reading aid, not a target.
frame_drv=""
for d in "$A" "$B"; do
    [ -z "$frame_drv" ] && [ -n "$(raw tcplat-frame-poll "$d")" ] && frame_drv=$d
done

: >"$tmp/rows"
for r in $(seq 1 "$ROUNDS"); do
    echo "net_lat_ab.sh: round $r" >&2
    [ "$NET_PATH" = tcp ] && {
        echo "raw-pp $(raw tcplat)"
        echo "raw-pp-poll $(raw tcplat-poll)"
        echo "raw-pp-chk $(raw tcplat-chk)"
        echo "raw-pp-poll-chk $(raw tcplat-poll-chk)"
        [ -n "$frame_drv" ] && echo "raw-frame-poll $(raw tcplat-frame-poll "$frame_drv")"
    } >>"$tmp/rows"
    if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
    for b in $order; do
        dir=$A
        [ "$b" = B ] && dir=$B
        echo "$b-wait $(lat "$dir" wait)" >>"$tmp/rows"
        echo "$b-poll $(lat "$dir" poll)" >>"$tmp/rows"
        [ -n "$BUSY" ] && echo "$b-busy $(lat "$dir" busy)" >>"$tmp/rows"
    done
done
echo "NET $NET_PATH $SIZE $OP post->done, two processes, loopback; medians of $ROUNDS interleaved rounds (us)"
echo "(A = $A, B = $B; placement ${PLACE:-unpinned}; load $(cut -d' ' -f1-3 /proc/loadavg))"
awk -v busy="$BUSY" '{ v[$1, ++n[$1]] = $2; if ($2 == "FAIL" || $2 == "") bad[$1] = 1 }
    function med(k,   i, j, t, m, a) {
        m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i] + 0
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return a[int((m + 1) / 2)] }
    function all(k,   i, s) { s = ""; for (i = 1; i <= n[k]; i++) s = s " " v[k, i]; return s }
    # row: label, key, raw baseline and its checked twin (none on the same-node paths), B/A
    function row(b, label, k, base, bname, cbase, cname,   m, r) {
        m = med(b "-" k); r = ""
        if (n["raw-pp"]) r = sprintf(" (%.2f x %s; %.2f x %s)", m / base, bname, m / cbase, cname)
        if (b == "B" && med("A-" k) > 0) r = r sprintf(" [B/A %.3f]", m / med("A-" k))
        printf "| %s %s | %.3g%s%s |%s |\n", b, label, m, r, bad[b "-" k] ? " FAIL" : "", all(b "-" k)
    }
    END {
        printf "| row | median | per round |\n|---|---:|---|\n"
        if (n["raw-pp"]) {
            pp = med("raw-pp"); pq = med("raw-pp-poll"); pc = med("raw-pp-chk"); qc = med("raw-pp-poll-chk")
            printf "| raw-pp (blocking) | %.1f |%s |\n", pp, all("raw-pp")
            printf "| raw-pp-poll (busy) | %.1f |%s |\n", pq, all("raw-pp-poll")
            printf "| raw-pp-chk (blocking, checked like ixlbench; not a target) | %.1f |%s |\n", pc, all("raw-pp-chk")
            printf "| raw-pp-poll-chk (busy, checked; not a target) | %.1f |%s |\n", qc, all("raw-pp-poll-chk")
            if (n["raw-frame-poll"])
                printf "| raw-frame-poll (NET'"'"'s system calls without NET, busy; not a target) | %.1f (%.2f x raw-pp-poll) |%s |\n", med("raw-frame-poll"), med("raw-frame-poll") / pq, all("raw-frame-poll")
        }
        split("A B", bs, " ")
        for (i = 1; i <= 2; i++) {
            b = bs[i]
            row(b, "waiting", "wait", pp, "raw-pp", pc, "raw-pp-chk")
            row(b, "polling", "poll", pq, "raw-pp-poll", qc, "raw-pp-poll-chk")
            if (n[b "-busy"])
                row(b, "polling, target " busy, "busy", pq, "raw-pp-poll", qc, "raw-pp-poll-chk")
        }
        if (n["raw-frame-poll"] && n["A-busy"])
            printf "\nbusy rows over raw-frame-poll: A %.2f, B %.2f\n", med("A-busy") / med("raw-frame-poll"), med("B-busy") / med("raw-frame-poll")
    }' "$tmp/rows"

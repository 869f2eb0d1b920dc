#!/bin/bash
# One NET target agent against 1, 16, 64 and 256 initiator agents (issue 15): aggregate GB/s of
# WRITE and READ of 64 KiB and 1 MiB over TCP and over the same-node path, the target's thread
# count and RSS at each peer count, and its RSS per idle connected peer, in one run.
#
# bench/peers_driver (its header says exactly what it does) runs the target in its own process
# and the initiators in WORKERS (4) worker processes, THREADS (4) threads each; each initiator
# has its own NET backend and its own 1 MiB slice of the target's registered memory, and every
# round's data is checked (a fresh pattern per round, a poisoned destination, compared after).
# Paths: tcp (the initiators' path=tcp) and auto (same node: shm, as the target's memory comes
# from ixl_mem_alloc). For each peer count the new agents connect with one 4 KiB WRITE, then
# the target's threads and RSS are read with every peer idle; then ROUNDS (3) rounds of MS
# (500) ms of each size and op (after a checked warm-up round of 100 ms), with the target
# sampled mid-round. It prints the medians and the issue's targets:
#   aggregate at 256 peers >= 0.9 x at 1 peer (each path, size, op);
#   target threads independent of the peer count (the same at 256 idle peers as at 1);
#   target RSS per idle connected peer < 64 KiB (at 256 peers).
#
# Environment: BUILD_DIR (default build), ROUNDS (3), MS (500), PATHS ("tcp auto"), PEERS
# ("1 16 64 256"), SIZES ("64K 1M"), WORKERS (4), THREADS (4), CONNS (NET's conns, 2: 256 peers
# x 2 connections must fit the target's RLIMIT_NOFILE, which the driver raises to the hard
# limit; it prints what it needs), NET_OPTS (more NET options for every agent, e.g.
# "io_threads=2"). About 2-3 minutes on 2 cores. Exit status: 0, or 1 when anything failed (an
# agent that could not be made or connected, a transfer error, a data check, a hung worker: each
# printed as a FAIL line, and the run goes on); a MISS of a target does not fail the run.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
rounds=${ROUNDS:-3}
ms=${MS:-500}
paths=${PATHS:-tcp auto}
peers=${PEERS:-1 16 64 256}
sizes=${SIZES:-64K 1M}
workers=${WORKERS:-4}
threads=${THREADS:-4}
conns=${CONNS:-2}

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null || exit 1
fi
driver=$build/bench/peers_driver
if ! cmake --build "$build" -j"$(nproc)" --target peers_driver >"$build/peers_build.log" 2>&1; then
    if [ -x "$driver" ]; then
        echo "peers.sh: WARNING: the build failed (see $build/peers_build.log); using the" \
            "peers_driver and libixl built earlier" >&2
    else
        tail -n 20 "$build/peers_build.log" >&2
        exit 1
    fi
fi
extra=()
for kv in ${NET_OPTS:-}; do
    extra+=(--opt "$kv")
done

cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
net_src=$(cat "$root"/plugins/net/*.[ch] 2>/dev/null | sha256sum | cut -c1-12)
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine: $(uname -n), $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r)"
echo "build:   $build (CMAKE_BUILD_TYPE=${type:-RelWithDebInfo, the default})"
echo "source:  $(git -C "$root" describe --always --dirty 2>/dev/null || echo "not a git tree")," \
    "plugins/net digest ${net_src}"
echo "setup:   $workers worker processes x $threads threads, conns=$conns," \
    "NET_OPTS=${NET_OPTS:-none}, $rounds rounds of $ms ms"

out=$(mktemp)
trap 'rm -f "$out" "$out.log"' EXIT
start=$(date +%s)
# shellcheck disable=SC2086
timeout 1200 "$driver" --paths "$paths" --peers "$peers" --sizes "$sizes" --workers "$workers" \
    --threads "$threads" --ms "$ms" --rounds "$rounds" --conns "$conns" "${extra[@]}" \
    >"$out" 2>"$out.log"
rc=$?
case $rc in
0) ;;
77)
    echo "NET:     unavailable ($(grep -m1 '^#' "$out"))"
    exit 0
    ;;
124) echo "peers.sh: the driver ran past 20 minutes and was killed" ;;
*) ;;
esac
echo "($(($(date +%s) - start)) s of runs)"
grep '^#' "$out" | sed 's/^# */note:    /'
grep '^FAIL' "$out"
if [ -s "$out.log" ]; then
    # ixl's own log (warnings of peers found silent, say): how much, and the last lines.
    echo "log:     $(wc -l <"$out.log") line(s) from ixl; the last 5:"
    tail -n 5 "$out.log" | sed 's/^/         /'
fi
echo

awk -v peers_h="$peers" '
function kv(line, key,    i, n, f, a) {
    n = split(line, f, " ")
    for (i = 1; i <= n; i++) if (index(f[i], key "=") == 1) return substr(f[i], length(key) + 2)
    return ""
}
function median(key,    n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    lo[key] = a[1]; hi[key] = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
/^IDLE/ {
    p = kv($0, "path"); n = kv($0, "peers")
    ith[p, n] = kv($0, "threads"); irss[p, n] = kv($0, "rss_kib"); ipp[p, n] = kv($0, "per_peer_kib")
    icon[p, n] = kv($0, "connected"); ics[p, n] = kv($0, "connect_s")
    if (!((p) in seenp)) { seenp[p] = 1; porder[++np] = p }
}
/^RUN/ {
    p = kv($0, "path"); n = kv($0, "peers"); s = kv($0, "size"); o = kv($0, "op")
    key = p SUBSEP s SUBSEP o SUBSEP n
    cnt[key]++; val[key, cnt[key]] = kv($0, "gbps")
    th = kv($0, "threads") + 0; if (th > rth[key]) rth[key] = th
    rs = kv($0, "rss_kib") + 0; if (rs > rrss[key]) rrss[key] = rs
    used[p] = kv($0, "used")
    if (!((p SUBSEP s SUBSEP o) in seenc)) { seenc[p SUBSEP s SUBSEP o] = 1; corder[++nc] = p SUBSEP s SUBSEP o }
}
END {
    nn = split(peers_h, pn, " ")
    printf "target with N peers connected and idle (threads of the target process; RSS in MiB; per peer in KiB)\n"
    printf "%-6s %6s %10s %8s %9s %13s %9s\n", "path", "peers", "connected", "threads", "RSS", "RSS/peer KiB", "connect s"
    for (i = 1; i <= np; i++) for (k = 1; k <= nn; k++) {
        p = porder[i]; n = pn[k]
        if (!((p, n) in ith)) continue
        printf "%-6s %6d %10d %8d %9.1f %13.1f %9.2f\n", p, n, icon[p, n], ith[p, n], irss[p, n] / 1024, ipp[p, n], ics[p, n]
    }
    printf "\naggregate GB/s (10^9 B/s), median of the rounds [min-max], then target threads (t) and RSS (M = MiB), max mid-round\n"
    printf "%-11s %-5s %-6s", "path", "op", "size"
    for (k = 1; k <= nn; k++) printf " %28s", pn[k] " peers"
    printf "\n"
    for (c = 1; c <= nc; c++) {
        split(corder[c], f, SUBSEP)
        printf "%-11s %-5s %-6s", f[1] "(" used[f[1]] ")", f[3], (f[2] >= 1048576 ? f[2] / 1048576 "M" : f[2] / 1024 "K")
        for (k = 1; k <= nn; k++) {
            key = corder[c] SUBSEP pn[k]
            if (!cnt[key]) { printf " %28s", "-"; continue }
            med[key] = median(key)
            printf " %28s", sprintf("%.2f [%.2f-%.2f] %dt %.0fM", med[key], lo[key], hi[key], rth[key], rrss[key] / 1024)
        }
        printf "\n"
    }
    first = pn[1]; last = pn[nn]
    printf "\ntargets (%s peers against %s)\n", last, first
    for (c = 1; c <= nc; c++) {
        split(corder[c], f, SUBSEP)
        a = corder[c] SUBSEP last; b = corder[c] SUBSEP first
        if (!cnt[a] || !cnt[b] || med[b] <= 0) { printf "  %-28s n/a (missing runs)\n", f[1] " " f[3] " " f[2] " B"; continue }
        q = med[a] / med[b]
        printf "  %-28s aggregate %s/%s = %.2f (>= 0.9) %s\n", f[1] " " f[3] " " f[2] " B", last, first, q, (q >= 0.9 ? "PASS" : "MISS")
    }
    for (i = 1; i <= np; i++) {
        p = porder[i]
        if (!((p, first) in ith) || !((p, last) in ith)) { printf "  %-28s n/a\n", p " threads"; continue }
        d = ith[p, last] - ith[p, first]
        printf "  %-28s target threads %d at %s idle peers, %d at %s: %s\n", p " threads", ith[p, last], last, ith[p, first], first, (d <= 0 ? "PASS (independent)" : "MISS (+" d ")")
        printf "  %-28s %.1f KiB per idle peer at %s (< 64) %s\n", p " RSS", ipp[p, last], last, (ipp[p, last] < 64 ? "PASS" : "MISS")
    }
}' "$out"
if grep -q '^FAIL' "$out" || [ $rc -ne 0 ]; then
    echo
    echo "peers.sh: $(grep -c '^FAIL' "$out") failure(s) (FAIL lines above); driver status $rc"
    exit 1
fi
exit 0

#!/bin/sh
# NET over loopback TCP in two processes, build A against build B, interleaved: for ROUNDS
# rounds, A then B (then B then A on odd rounds), each an ixlbench target and initiator
# (local_paths=0, path tcp, DRAM, data checked) over SIZES, READ and WRITE. Prints the median
# GB/s of each build per row and B/A. For a change to NET's TCP path, on this machine.
#
#   bench/net_ab.sh BUILD_A BUILD_B
#
# Environment: BLOCK and BLOCK_MAX (the sizes, doubling; default 1M and 64M), ROUNDS (default
# 5), ITERS (default 20), NET_OPTS (more NET options for both sides, e.g. "conns=4"). A target
# serves one initiator run (ixlbench's initiator ends it), so each build's run is one sweep.
set -u
A=${1:?build dir A}
B=${2:?build dir B}
BLOCK=${BLOCK:-1M}
BLOCK_MAX=${BLOCK_MAX:-64M}
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-20}
tmp=$(mktemp -d /tmp/ixl-net-ab.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
opts=""
for o in ${NET_OPTS:-}; do opts="$opts --opt $o"; done

one() { # build label round
    ixb=$1/tools/ixlbench
    md=$tmp/md
    rm -f "$md"
    # shellcheck disable=SC2086
    "$ixb" --role target --md-file "$md" --idle-timeout 60 --opt local_paths=0 $opts \
        >"$tmp/t.log" 2>&1 &
    t=$!
    # shellcheck disable=SC2086
    "$ixb" --role initiator --md-file "$md" --opt local_paths=0 --path tcp $opts \
        --block "$BLOCK" --block-max "$BLOCK_MAX" --iters "$ITERS" --warmup 2 --csv \
        --no-progress 2>>"$tmp/i.log" | awk -F, -v b="$2" -v r="$3" 'NR > 1 && $1 == "sweep" {
            print b, $2, $5, $14, $NF, r }' >>"$tmp/rows"
    kill "$t" 2>/dev/null
    wait "$t" 2>/dev/null
}

: >"$tmp/rows"
for r in $(seq 1 "$ROUNDS"); do
    echo "net_ab.sh: round $r" >&2
    if [ $((r % 2)) -eq 1 ]; then
        one "$A" A "$r"
        one "$B" B "$r"
    else
        one "$B" B "$r"
        one "$A" A "$r"
    fi
done
echo "NET tcp, two processes, loopback, DRAM; median GB/s of $ROUNDS interleaved rounds"
echo "(A = $A, B = $B; load $(cut -d' ' -f1-3 /proc/loadavg))"
echo ""
echo "| op | size | A | B | B/A | checks |"
echo "|---|---:|---:|---:|---:|---|"
awk '{ k = $2 " " $3; v[k, $1, ++n[k, $1]] = $4; if ($5 != "pass") bad[k] = 1; keys[k] = 1 }
    function med(k, b,   i, j, t, m, a) {
        m = n[k, b]; for (i = 1; i <= m; i++) a[i] = v[k, b, i]
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return a[int((m + 1) / 2)] }
    END { for (k in keys) { split(k, f, " "); ma = med(k, "A"); mb = med(k, "B")
        printf "| %s | %s | %.2f | %.2f | %.2f | %s |\n", f[1], f[2], ma, mb, (ma > 0 ? mb / ma : 0), bad[k] ? "FAIL" : "pass" } }' \
    "$tmp/rows" | sort -t'|' -k2,2 -k3,3n

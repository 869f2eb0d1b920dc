#!/bin/sh
# Staged VRAM between two processes over loopback TCP (NET's tcp-staged path, local_paths=0 at
# both ends), swept over NET's conns and stage_bytes and the requests in flight (--depth), with
# ixlbench's two roles; and raw loopback TCP over the same numbers of connections, in the same
# run, as the baseline (issue 20: staged >= 0.8x the slower of DtoH and raw TCP). Needs a GPU
# (ixlbench exits 77 without one: so does this script).
#
#   bench/gpu_stage.sh [BUILD_DIR]        (default build; its tools/ixlbench)
#
# Environment: SIZES (default "64M 256M"), CONFIGS (default "4:64M 8:64M 4:256M 8:256M": conns:
# stage_bytes), DEPTHS (default "1 2"), ITERS (default 10), ROUNDS (interleaved rounds, default
# 3; the table gives medians). Output: a Markdown table on stdout, progress on stderr.
set -u
BUILD=${1:-build}
IXB=$BUILD/tools/ixlbench
SIZES=${SIZES:-64M 256M}
CONFIGS=${CONFIGS:-4:64M 8:64M 4:256M 8:256M}
DEPTHS=${DEPTHS:-1 2}
ITERS=${ITERS:-10}
ROUNDS=${ROUNDS:-3}
[ -x "$IXB" ] || {
    echo "gpu_stage.sh: no $IXB (build first)" >&2
    exit 1
}
tmp=$(mktemp -d /tmp/ixl-gpu-stage.XXXXXX)
trap 'rm -rf "$tmp"; [ -n "${tpid:-}" ] && kill "$tpid" 2>/dev/null' EXIT
say() { echo "gpu_stage.sh: $*" >&2; }

# one CONF SIZE DEPTH ROUND: a target and an initiator, READ and WRITE rows into $tmp/rows
one() {
    conns=${1%%:*} stage=${1#*:}
    md=$tmp/md.$$
    rm -f "$md"
    "$IXB" --role target --target-mem VRAM --md-file "$md" --idle-timeout 60 \
        --opt local_paths=0 --opt stage_bytes="$stage" >"$tmp/target.log" 2>&1 &
    tpid=$!
    "$IXB" --role initiator --initiator-mem VRAM --target-mem VRAM --md-file "$md" \
        --opt local_paths=0 --opt conns="$conns" --opt stage_bytes="$stage" \
        --block "$2" --block-max "$2" --depth "$3" --iters "$ITERS" --warmup 2 \
        --csv --no-progress >"$tmp/out.csv" 2>"$tmp/init.log"
    rc=$?
    kill "$tpid" 2>/dev/null
    wait "$tpid" 2>/dev/null
    tpid=""
    if [ $rc -eq 77 ]; then
        say "no GPU: $(tail -n 1 "$tmp/init.log")"
        exit 77
    fi
    if [ $rc -ne 0 ]; then
        say "ixlbench failed ($rc) for conns=$conns stage_bytes=$stage $2 depth $3:"
        tail -n 5 "$tmp/init.log" >&2
        exit 1
    fi
    awk -F, -v c="$1" -v d="$3" -v r="$4" 'NR > 1 && $1 == "sweep" {
        print c, $5, d, $2, $4, $14, $NF, r }' "$tmp/out.csv" >>"$tmp/rows"
}

# The raw-TCP baseline (1 and 4 connections) is test_gpu_stage's, in tests/gpu/run.sh.
: >"$tmp/rows"
for r in $(seq 1 "$ROUNDS"); do
    for s in $SIZES; do
        for c in $CONFIGS; do
            for d in $DEPTHS; do
                say "round $r: conns:stage_bytes $c, $s, depth $d"
                one "$c" "$s" "$d" "$r"
            done
        done
    done
done

echo "Staged VRAM -> VRAM between two processes (NET tcp-staged, local_paths=0, loopback TCP),"
echo "ixlbench --role target/initiator, $ITERS iterations per row, medians of $ROUNDS interleaved"
echo "rounds, GB/s; data checked (check column)."
echo ""
echo "| conns:stage_bytes | size | depth | op | path | GB/s (median) | rounds | check |"
echo "|---|---:|---:|---|---|---:|---|---|"
sort -k1,1 -k2,2n -k3,3n -k4,4 "$tmp/rows" | awk '
    function flush() {
        if (n == 0) return
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        printf "| %s | %s | %s | %s | %s | %.2f | %s | %s |\n", k1, k2, k3, k4, path, v[int((n + 1) / 2)], all, chk
        n = 0; all = ""
    }
    { key = $1 " " $2 " " $3 " " $4
      if (key != prev) { flush(); prev = key; k1 = $1; k2 = $2; k3 = $3; k4 = $4; chk = "pass" }
      n++; v[n] = $6; path = $5; all = all (all == "" ? "" : " ") sprintf("%.2f", $6)
      if ($7 != "pass") chk = $7 }
    END { flush() }'

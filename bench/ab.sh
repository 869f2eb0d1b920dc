#!/bin/bash
# Two builds of ixl side by side in one run: bench/net.sh and bench/kv.sh against build A and
# build B, alternating A, B, A, B... (PASSES times each), so that drift on a shared machine
# hits both alike. Each pass is a whole net.sh / kv.sh run with its own baselines (memcpy, raw
# TCP, UCX, one big descriptor), and what is compared are their ratio tables: this script
# prints every pass's ratio tables under the build's label, then the median over the passes of
# each ratio, for A and B next to each other.
#
# Usage: bench/ab.sh BUILD_A BUILD_B   (build directories, each configured from the source it
# measures; e.g. a worktree of the old commit's build/ and this tree's build/)
# Environment: PASSES (2), ROUNDS (3: net.sh's and kv.sh's rounds per pass), SIZES (net.sh's,
# default "1M 64M 256M"), BENCHES ("net kv"), NET_OPTS (as net.sh), ENV_A and ENV_B (more
# environment for build A's and build B's runs, space-separated NAME=value words; e.g. the same
# build twice with ENV_B="IXL_AUTH_KEY=..." measures the cluster key's cost). The ratios whose target
# applies say PASS/MISS in their own tables; here they are set side by side without verdicts.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_A BUILD_B" >&2
    exit 2
fi
a=$(cd "$1" && pwd) || exit 2
b=$(cd "$2" && pwd) || exit 2
passes=${PASSES:-2}
rounds=${ROUNDS:-3}
benches=${BENCHES:-net kv}
out=$(mktemp -d /tmp/ixl_ab.XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "A = $a${ENV_A:+ with $ENV_A}"
echo "B = $b${ENV_B:+ with $ENV_B}"
echo "$passes pass(es) of: ${benches} (ROUNDS=$rounds), A then B each pass"
status=0
for p in $(seq 1 "$passes"); do
    for which in A B; do
        dir=$a
        [ $which = B ] && dir=$b
        for bench in $benches; do
            log=$out/$bench.$which.$p
            extra=${ENV_A:-}
            [ $which = B ] && extra=${ENV_B:-}
            # shellcheck disable=SC2086 # NAME=value words, split on purpose
            env $extra BUILD_DIR="$dir" ROUNDS="$rounds" bash "$root/bench/$bench.sh" \
                >"$log" 2>"$log.err" || status=1
            echo "== pass $p, build $which, $bench.sh: ratios"
            sed -n '/^ratios of medians/,$p' "$log"
        done
    done
done
# Medians over the passes of each ratio cell: rows "name  target  v1  v2 ..." (net) or
# "name  v1 ..." (kv); cells like "0.93" or "0.93 PASS".
for bench in $benches; do
    echo
    echo "== $bench.sh: median over $passes pass(es) of each ratio, A | B"
    for which in A B; do
        for p in $(seq 1 "$passes"); do
            sed -n '/^ratios of medians/,/^$/p' "$out/$bench.$which.$p" | tail -n +3 |
                sed "s/^/$which $p /"
        done
    done | awk '
        NF < 3 { next }
        {
            w = $1; row = $3; n = 0
            for (i = 4; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { n++; v[w, row, n, ++c[w, row, n]] = $i }
            if (n > cols[row]) cols[row] = n
            if (!(row in seen)) { seen[row] = 1; order[++nr] = row }
        }
        function med(w, row, k,    m, i, j, t, x) {
            m = c[w, row, k]; if (m == 0) return "-"
            for (i = 1; i <= m; i++) x[i] = v[w, row, k, i]
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
            return m % 2 ? x[(m + 1) / 2] : sprintf("%.2f", (x[m / 2] + x[m / 2 + 1]) / 2)
        }
        END {
            for (r = 1; r <= nr; r++) {
                row = order[r]; line = sprintf("%-28s", row)
                for (k = 1; k <= cols[row]; k++) line = line sprintf("  %5s | %-5s", med("A", row, k), med("B", row, k))
                print line
            }
        }'
done
exit $status

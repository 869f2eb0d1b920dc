#!/bin/sh
# bench_core of two builds side by side in one run: for each part (-o kv, md, churn), build A
# then build B, PASSES times (interleaved, so that drift on a shared machine hits both alike),
# then each row's median over the passes for A and B and B/A. Page-fault rows count faults,
# which a loaded machine does not change; times it does, so read them as ratios of one run.
#
# Usage: bench/core_ab.sh BUILD_A BUILD_B   (build directories with bench_core built, each
# configured from the source it measures, with BUILD_TESTING=ON for the TEST plugin; a Release
# build is the meaningful one)
# Environment: PASSES (3), REPS (bench_core -r, 11), PARTS ("kv md churn"), SEED (bench_core -s,
# drawn anew per pass when unset: both builds of a pass get the same one), BACKEND (bench_core
# -b: the agents' backend, TEST when unset; both bench_core binaries must take -b).
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_A BUILD_B" >&2
    exit 2
fi
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
passes=${PASSES:-3}
reps=${REPS:-11}
parts=${PARTS:-kv md churn}
for d in "$a" "$b"; do
    if [ ! -x "$d/bench/bench_core" ]; then
        echo "$0: $d/bench/bench_core is missing (cmake --build $d --target bench_core)" >&2
        exit 2
    fi
done
out=$(mktemp -d /tmp/ixl_core_ab.XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "A = $a"
echo "B = $b"
backend=${BACKEND:+-b $BACKEND}
echo "$passes pass(es) of bench_core -r $reps $backend over: $parts (A then B each pass)"
echo "start $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for p in $(seq 1 "$passes"); do
    seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
    [ "$seed" = 0 ] && seed=1
    for part in $parts; do
        for which in A B; do
            dir=$a
            [ $which = B ] && dir=$b
            "$dir/bench/bench_core" -o "$part" -r "$reps" -s "$seed" $backend >"$out/$part.$which.$p" 2>&1 || {
                echo "$0: bench_core -o $part failed for $which (pass $p):" >&2
                tail -n 5 "$out/$part.$which.$p" >&2
                exit 1
            }
        done
    done
done
echo "end   $(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-72s %12s %12s %8s %s\n' measurement "A (median)" "B (median)" "B/A" unit
for part in $parts; do
    for which in A B; do
        # A name that comes again in one output (the sub-rows of each layout) gets its count.
        for f in "$out/$part.$which".*; do
            # From the right: result, target ("-" or "< N"), unit, value; the rest is the name.
            awk -v w=$which '
                /^measurement/ { t = 1; next }
                t && NF >= 5 {
                    k = $(NF - 2) == "<" ? NF - 3 : NF - 2
                    name = $1
                    for (i = 2; i < k - 1; i++) name = name " " $i
                    if (substr($0, 1, 2) == "  ") name = "  " name
                    if (++cnt[name] > 1) name = name " (" cnt[name] ")"
                    print w "\t" name "\t" $(k - 1) "\t" $k
                }' "$f"
        done
    done
done | awk -F'\t' '
    { key = $2; if (!(key in seen)) { seen[key] = ++n; order[n] = key }
      v[$1, key, ++c[$1, key]] = $3; unit[key] = $4 }
    function med(w, key,    k, i, j, t, a) {
        k = c[w, key]; if (k == 0) return ""
        for (i = 1; i <= k; i++) a[i] = v[w, key, i] + 0
        for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    END {
        for (i = 1; i <= n; i++) {
            key = order[i]; ma = med("A", key); mb = med("B", key)
            r = (ma != "" && mb != "" && ma + 0 != 0) ? sprintf("%.3f", mb / ma) : "-"
            printf "%-72s %12s %12s %8s %s\n", key, ma, mb, r, unit[key]
        }
    }'

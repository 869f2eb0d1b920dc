#!/bin/sh
# Runs each libFuzzer target of a build made with IXL_FUZZ=ON for a set time, over a copy of
# the checked-in corpus kept in the build directory (new inputs never dirty the git tree),
# then prints how many executions each ran. Fails on the first target that finds a crash,
# leak or timeout, and names the reproducer it wrote.
#
#   sh tests/fuzz/run_fuzz.sh <build dir> <seconds per target> <corpus name>...
#   (target fuzz_<name>, corpus tests/fuzz/corpus/<name>)
#
# Reproduce a finding with the replay binary of any build:
#   build/tests/fuzz_<name>_replay <build dir>/fuzz-artifacts/<name>/crash-...
set -eu
build=$1
seconds=$2
shift 2
src=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" && pwd)
: "${IXL_PLUGIN_DIR:=$build/tests/plugins}"
export IXL_PLUGIN_DIR

summary=""
for name in "$@"; do
    bin=$build/tests/fuzz_$name
    corpus=$build/fuzz-corpus/$name
    artifacts=$build/fuzz-artifacts/$name
    log=$build/fuzz_$name.log
    [ -x "$bin" ] || { echo "run_fuzz: $bin is missing (configure with IXL_FUZZ=ON)" >&2; exit 1; }
    mkdir -p "$corpus" "$artifacts"
    cp "$src/corpus/$name"/* "$corpus"/
    echo "== fuzz_$name: ${seconds}s over $corpus (log: $log)"
    rc=0
    "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || rc=$?
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    if [ "$rc" -ne 0 ] || [ -z "$runs" ]; then
        tail -n 40 "$log" >&2
        echo "run_fuzz: fuzz_$name FAILED (exit $rc); reproducer(s) in $artifacts:" >&2
        ls "$artifacts" >&2 || true
        exit 1
    fi
    line="fuzz_$name: $(grep '^Done ' "$log" | tail -n 1), corpus $(ls "$corpus" | wc -l) files"
    echo "$line"
    summary="$summary$line
"
done
printf '== fuzzing done, no crash\n%s' "$summary"

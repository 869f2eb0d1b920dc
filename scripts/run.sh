#!/bin/sh
# The main job (make run), for a person's first run: a page of output ending in a summary.
#
#  1. The Debian packages it needs (scripts/deps.sh run: apt-get as root), one line.
#  2. The build of what it runs, and nothing else: libixl (NET and POSIX are built in) and
#     ixlbench, one line. No test binaries.
#  3. ixlbench between two processes on this machine over the NET backend: a target process
#     serves memory, an initiator runs the sweep (4 KiB to 64 MiB, READ and WRITE, every byte
#     of every iteration checked) and the KV-cache scenario. No service, no configuration: the
#     target's metadata travels through a file in a temporary directory.
#  4. The POSIX backend's round trip DRAM -> FILE -> DRAM: ixlbench in storage mode (one
#     process), WRITE then READ rows of 4 KiB to 64 MiB with every byte checked, buffered (a
#     file in the temporary directory), then with O_DIRECT (a temporary file in /var/tmp,
#     skipped with a note where that is tmpfs). ixlbench removes the files.
#  5. A summary computed from ixlbench's CSV: the NET path and its peak GB/s, the KV request's
#     GB/s and its ratio to one descriptor, the POSIX peaks, the data checks; the paths of the
#     plot of the NET sweep (ixlbench --plot, gnuplot) and of the log with the full tables.
#
# A step prints one line; a failed one prints the tail of its log. While ixlbench runs, its
# step's line shows its progress (ixlbench's own, in percent, live when stdout and stderr are a
# terminal; otherwise the line is completed at the end), then the rows measured and the time.
# Everything is kept in BUILD_DIR/run: run.log (the tables, ixlbench's messages),
# packages.log, build.log, net.csv, posix-buffered.csv, posix-direct.csv, net.png.
#
# Usage: scripts/run.sh [BUILD_DIR]   (default build). Environment: CMAKE_FLAGS (cmake's
# configure), JOBS (build jobs), IXLBENCH_ARGS (more NET initiator options, e.g. "--path tcp").
# Exit status: 0 when every step and process succeeded and every data check passed, else
# non-zero. See docs/ixlbench.md.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
out=$build/run
mkdir -p "$out" || exit 1
log=$out/run.log
bench=$build/tools/ixlbench
start=$(date +%s)

# --- 1. packages, 2. build --------------------------------------------------------------------
sh "$root/scripts/deps.sh" run --log "$out/packages.log" || exit 1
printf 'build: libixl and ixlbench (NET, POSIX built in) in %s ... ' "$build"
t0=$(date +%s)
# Configured once (cmake --build configures again when a CMakeLists.txt changed), or again
# when CMAKE_FLAGS says something.
configure=1
[ -f "$build/CMakeCache.txt" ] && [ -z "${CMAKE_FLAGS:-}" ] && configure=0
# shellcheck disable=SC2086 # CMAKE_FLAGS is a list of words
if { [ "$configure" = 0 ] || cmake -S "$root" -B "$build" ${CMAKE_FLAGS:-}; } >"$out/build.log" 2>&1 &&
    { cmake --build "$build" -j "${JOBS:-$(nproc)}" --target ixl ixlbench; } >>"$out/build.log" 2>&1; then
    echo "done, $(($(date +%s) - t0)) s"
else
    echo "FAILED"
    tail -n 25 "$out/build.log"
    echo "build: FAILED (the whole log: $out/build.log)"
    exit 1
fi

# --- 3., 4. ixlbench ----------------------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ixl-run.XXXXXX") || exit 1
pids=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    for p in $pids; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
: >"$log"
rm -f "$out"/*.csv "$out/net.png"
# The live counter: when both stdout and stderr are a terminal.
[ -t 1 ] && [ -t 2 ] && live=1 || live=0
nsteps=3
step_rc=0

# rows CSV: the rows ixlbench wrote into CSV so far (its header excluded).
rows() {
    r=0
    [ -f "$1" ] && r=$(($(wc -l <"$1") - 1))
    [ "$r" -ge 0 ] || r=0
    echo "$r"
}

# ixlbench's progress bar goes to a file (its stderr) when the counter is live: the percentage
# shown is its last one ("\r[####....]  63% label").
progress=--no-progress
[ "$live" = 1 ] && progress=--progress

# step N CSV TITLE -- COMMAND...: runs COMMAND (an ixlbench that writes CSV, with $progress) in
# the background, its tables into the log and its messages after them, and shows its progress
# on stderr while it runs (a terminal), or prints the line at the end (otherwise). The line
# ends with the rows measured and the seconds. Sets step_rc.
step() {
    n=$1 csv=$2 title=$3
    shift 4
    printf '\n== [%s/%s] %s\n' "$n" "$nsteps" "$title" >>"$log"
    [ "$live" = 1 ] || printf '[%s/%s] %s ... ' "$n" "$nsteps" "$title"
    t0=$(date +%s)
    "$@" >>"$log" 2>"$tmp/err" &
    spid=$!
    pids="$pids $spid"
    while kill -0 "$spid" 2>/dev/null; do
        if [ "$live" = 1 ]; then
            pct=$(tail -c 300 "$tmp/err" | tr '\r' '\n' | sed -n 's/^\[[#.]*\] *\([0-9]*\)%.*/\1/p' |
                tail -n 1)
            printf '\r[%s/%s] %s ... %s%%, %s s\033[K' "$n" "$nsteps" "$title" "${pct:-0}" \
                "$(($(date +%s) - t0))" >&2
        fi
        sleep 0.5
    done
    wait "$spid"
    step_rc=$?
    # Its messages, without the bar.
    tr '\r' '\n' <"$tmp/err" | sed 's/\x1b\[K//g' | grep -v '^\[[#.]*\] ' | grep . >>"$log"
    nrows=$(rows "$csv")
    [ "$live" = 1 ] && printf '\r\033[K[%s/%s] %s ... ' "$n" "$nsteps" "$title"
    if [ "$step_rc" -eq 0 ]; then
        echo "$nrows rows, $(($(date +%s) - t0)) s"
    else
        echo "FAILED (exit $step_rc), $nrows rows, $(($(date +%s) - t0)) s"
    fi
}

# 3. NET, two processes. The target exits when the initiator says "done", or after 5 idle
# minutes if it never does.
"$bench" --role target --md-file "$tmp/md" --idle-timeout 300 --quiet >>"$log" 2>&1 &
tpid=$!
pids="$tpid"
# shellcheck disable=SC2086 # IXLBENCH_ARGS is a list of words
step 1 "$out/net.csv" "NET, two processes: sweep 4 KiB-64 MiB, KV scenario" -- \
    "$bench" --role initiator --md-file "$tmp/md" --scenario all $progress \
    --csv="$out/net.csv" --plot "$out/net.png" ${IXLBENCH_ARGS:-}
rc=$step_rc
[ "$rc" -eq 0 ] || kill "$tpid" 2>/dev/null # it may wait for an initiator that never came
wait "$tpid"
trc=$?
pids=""
[ "$rc" -eq 0 ] || trc=0 # stopped here: the initiator's failure is the one to report
[ "$trc" -eq 0 ] || echo "      the target exited $trc"

# 4. POSIX: DRAM -> FILE -> DRAM in one process (the agent's own file; WRITE rows, then READ).
storage="--block 4K --block-max 64M --op both $progress"
# shellcheck disable=SC2086 # a list of options
step 2 "$out/posix-buffered.csv" "POSIX, DRAM <-> FILE, buffered" -- \
    "$bench" --backend POSIX --target-mem FILE --file "$tmp/posix.dat" $storage --iters 200 \
    --max-bytes 128M --csv="$out/posix-buffered.csv"
src=$step_rc
drc=0
fs=$(stat -f -c %T /var/tmp 2>/dev/null)
if [ "$fs" = tmpfs ] || [ "$fs" = ramfs ]; then
    echo "[3/3] POSIX, DRAM <-> FILE, O_DIRECT: skipped (/var/tmp is $fs: no O_DIRECT)"
else
    # shellcheck disable=SC2086
    step 3 "$out/posix-direct.csv" "POSIX, DRAM <-> FILE, O_DIRECT (/var/tmp)" -- \
        "$bench" --backend POSIX --target-mem FILE --direct $storage --iters 100 \
        --max-bytes 64M --csv="$out/posix-direct.csv"
    drc=$step_rc
fi
pids=""

# --- 5. the summary, from the CSVs ------------------------------------------------------------
# One awk over the three files (bench/csv2tsv.awk: RFC 4180 to tabs), columns by name.
summary() {
    for f in net posix-buffered posix-direct; do
        [ -s "$out/$f.csv" ] || continue
        awk -f "$root/bench/csv2tsv.awk" "$out/$f.csv" | awk -v f="$f" '{ print f "\t" $0 }'
    done | awk -F'\t' '
    function size(b) {
        if (b >= 1073741824 && b % 1073741824 == 0) return b / 1073741824 " GiB"
        if (b >= 1048576 && b % 1048576 == 0) return b / 1048576 " MiB"
        if (b >= 1024 && b % 1024 == 0) return b / 1024 " KiB"
        return b " B"
    }
    function peak(f, op) {
        if (!((f, op) in best)) return op " -"
        return sprintf("%s %.2f GB/s (%s)", op, best[f, op], size(bblock[f, op]))
    }
    $2 == "scenario" { for (i = 2; i <= NF; i++) c[$i] = i; next }
    {
        f = $1; sc = $c["scenario"]; op = $c["op"]; g = $c["gbps"] + 0; chk = $c["check"]
        if (chk == "off" && $c["path"] == "memcpy") next # the KV baselines: no ixl, no check
        checks[chk]++
        rows++
        if (sc == "sweep") {
            if (!((f, op) in best) || g > best[f, op]) { best[f, op] = g; bblock[f, op] = $c["block"] }
            if (f == "net" && !(($c["path"]) in seen)) {
                seen[$c["path"]] = 1
                paths = paths (paths == "" ? "" : ", ") $c["path"]
            }
        } else if (f == "net") {
            kv[sc] = g
            if (sc == "kv-random") {
                kvdescs = $c["descs"]
                kvbytes = $c["iters"] > 0 ? $c["bytes"] / $c["iters"] : 0
            }
        }
    }
    END {
        if (("net", "READ") in best)
            printf "  NET, two processes   path %s: peak %s, %s\n", paths, peak("net", "READ"), peak("net", "WRITE")
        if ("kv-random" in kv && kv["kv-single"] > 0)
            printf "  KV request           %s in %d descriptors: %.2f GB/s, %.2f x one descriptor (%.2f GB/s)\n", size(kvbytes), kvdescs, kv["kv-random"], kv["kv-random"] / kv["kv-single"], kv["kv-single"]
        if (("posix-buffered", "WRITE") in best)
            printf "  POSIX buffered       peak %s, %s\n", peak("posix-buffered", "WRITE"), peak("posix-buffered", "READ")
        if (("posix-direct", "WRITE") in best)
            printf "  POSIX O_DIRECT       peak %s, %s\n", peak("posix-direct", "WRITE"), peak("posix-direct", "READ")
        if (rows == 0) s = "no rows measured"
        else if (checks["pass"] == rows) s = sprintf("all %d rows passed (every byte checked)", rows)
        else s = sprintf("%d rows: %d passed, %d FAILED, %d unchecked", rows, checks["pass"], checks["FAIL"], checks["off"])
        printf "  data checks          %s\n", s
        exit (checks["FAIL"] > 0 || rows == 0)
    }'
}

failed=""
[ "$rc" -eq 0 ] || failed="$failed NET initiator (exit $rc),"
[ "$trc" -eq 0 ] || failed="$failed NET target (exit $trc),"
[ "$src" -eq 0 ] || failed="$failed POSIX buffered (exit $src),"
[ "$drc" -eq 0 ] || failed="$failed POSIX O_DIRECT (exit $drc),"
echo
sum=$(summary)
checks_ok=$?
[ "$checks_ok" -eq 0 ] || failed="$failed data checks,"
if [ -z "$failed" ]; then
    echo "make run: PASSED in $(($(date +%s) - start)) s"
else
    echo "make run: FAILED:${failed%,} ($(($(date +%s) - start)) s)"
fi
echo "$sum"
[ -s "$out/net.png" ] && echo "  plot of the sweep    $out/net.png"
echo "  full tables          $log"
if [ -n "$failed" ]; then
    # ixlbench's messages (they start with its name) and failed checks, else the log's end.
    echo
    echo "from $log:"
    grep -E '^ixlbench( target)?: |FAIL' "$log" | tail -n 12 | grep . || tail -n 12 "$log"
    exit 1
fi
exit 0

#!/bin/sh
# Long stress runs under AddressSanitizer (+UBSan) and ThreadSanitizer (issue 16): not part of
# `make test`, which runs the same tests for a few seconds.
#
#   bench/stress.sh [DIR] [SECONDS]
#
# Configures and builds DIR/build-asan (-DIXL_SANITIZE=address,undefined) and DIR/build-tsan
# (-DIXL_SANITIZE=thread) itself (DIR default: build-stress in the source tree; SECONDS default
# 60), then runs in each, for SECONDS each:
#   net_reconnect  tests/unit/test_net_reconnect: 8 threads post WRITEs with a notification each
#                  over NET tcp while one thread invalidates and reloads the peer (the
#                  notification/reconnect use-after-free of issue 16, finding 2)
#   stress_mt      tests/unit/test_stress_mt: posts, re-posts, releases in flight, READs back,
#                  prepared lists, registrations and deregistrations, metadata loads and
#                  invalidations, agent restarts, notifications and standalone sends, fd polling
#                  and progress, from 8 threads
# and prints per run its counts (the test's own summary line), its exit status and the number of
# sanitizer reports in its output ("ERROR: AddressSanitizer", "WARNING: ThreadSanitizer",
# "runtime error"). Logs: DIR/logs/<sanitizer>-<test>.log. Exit status: 0 when every run passed
# with no report, 1 otherwise (2: a build failed). JOBS (default 2) sets the build's jobs.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build-stress}
secs=${2:-60}
jobs=${JOBS:-2}
case $dir in /*) ;; *) dir=$(pwd)/$dir ;; esac
mkdir -p "$dir/logs" || exit 2

status=0
summary=""
for san in asan tsan; do
    b=$dir/build-$san
    case $san in
    asan) flags=address,undefined ;;
    tsan) flags=thread ;;
    esac
    echo "== $san: building $b (-DIXL_SANITIZE=$flags)"
    if ! cmake -S "$root" -B "$b" -DIXL_SANITIZE=$flags >"$dir/logs/$san-configure.log" 2>&1 ||
        ! nice cmake --build "$b" -j"$jobs" --target test_net_reconnect test_stress_mt \
            ixl_test_plugins >"$dir/logs/$san-build.log" 2>&1; then
        echo "build failed: see $dir/logs/$san-configure.log and $dir/logs/$san-build.log"
        exit 2
    fi
    for t in net_reconnect stress_mt; do
        log=$dir/logs/$san-$t.log
        echo "== $san $t: $secs s"
        start=$(date +%s)
        # what ctest gives the tests (tests/CMakeLists.txt, ixl_test)
        IXL_PLUGIN_DIR=$b/tests/plugins IXL_TEST_PLUGIN_DIR=$b/tests/plugins IXL_BUILD_DIR=$b \
            ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
            UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
            TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1} \
            nice "$b/tests/test_$t" "$secs" >"$log" 2>&1
        rc=$?
        took=$(($(date +%s) - start))
        reports=$(grep -c -e "ERROR: AddressSanitizer" -e "WARNING: ThreadSanitizer" \
            -e "runtime error" -e "ERROR: LeakSanitizer" "$log")
        case $t in
        net_reconnect) counts=$(grep -E "WRITEs completed" "$log" | tail -1) ;;
        stress_mt) counts=$(grep -E "^writes " "$log" | tail -1) ;;
        esac
        line="$san $t: exit $rc, $reports sanitizer reports, ${took} s; ${counts:-no counts (see $log)}"
        echo "$line"
        summary="$summary$line
"
        if [ "$rc" -ne 0 ] || [ "$reports" -ne 0 ]; then
            status=1
            grep -m 5 -e "ERROR: AddressSanitizer" -e "WARNING: ThreadSanitizer" \
                -e "runtime error" -e "check failed" "$log"
        fi
    done
done
echo "== summary ($secs s each)"
printf "%s" "$summary"
[ $status -eq 0 ] && echo "stress: ok" || echo "stress: FAILED (logs in $dir/logs)"
exit $status

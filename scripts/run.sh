#!/bin/sh
# The main job (make run): ixlbench between two processes on this machine over the NET
# backend. A target process serves memory; an initiator process runs the default sweep (4 KiB
# to 64 MiB, READ and WRITE, a data check on every iteration) and then the KV-cache scenario,
# and prints both tables. No service, no configuration: the target's metadata travels through
# a file in a temporary directory. Then the POSIX backend's round trip DRAM -> FILE -> DRAM:
# ixlbench in storage mode (one process), WRITE then READ rows of 4 KiB to 64 MiB with every
# byte checked, once buffered (a file in the temporary directory) and once with O_DIRECT (a
# temporary file in /var/tmp, skipped with a note where that is tmpfs); ixlbench removes the
# files. See docs/ixlbench.md.
#
# Usage: scripts/run.sh [BUILD_DIR]   (default build). IXLBENCH_ARGS adds initiator options
# (e.g. IXLBENCH_ARGS="--path tcp"). Exit status: 0 when every process succeeded and every
# data check passed, else non-zero.
set -u
build=${1:-build}
bench=$build/tools/ixlbench
if [ ! -x "$bench" ]; then
    echo "run.sh: $bench is missing: build first (make build)" >&2
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ixl-run.XXXXXX") || exit 1
tpid=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
    if [ -n "$tpid" ] && kill -0 "$tpid" 2>/dev/null; then
        kill "$tpid" 2>/dev/null
        wait "$tpid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
# The target exits when the initiator says "done", or after 5 idle minutes if it never does.
"$bench" --role target --md-file "$tmp/md" --idle-timeout 300 --quiet &
tpid=$!
# shellcheck disable=SC2086 # IXLBENCH_ARGS is a list of words
"$bench" --role initiator --md-file "$tmp/md" --scenario all ${IXLBENCH_ARGS:-}
rc=$?
wait "$tpid"
trc=$?
tpid=""

# POSIX: DRAM -> FILE -> DRAM in one process (the agent's own file; WRITE rows, then READ).
storage="--block 4K --block-max 64M --op both"
echo
# shellcheck disable=SC2086 # a list of options
"$bench" --backend POSIX --target-mem FILE --file "$tmp/posix.dat" $storage --iters 200 \
    --max-bytes 128M
src=$?
drc=0
fs=$(stat -f -c %T /var/tmp 2>/dev/null)
echo
if [ "$fs" = tmpfs ] || [ "$fs" = ramfs ]; then
    echo "note: /var/tmp is $fs (no O_DIRECT): the direct-I/O round trip is skipped"
else
    # shellcheck disable=SC2086
    "$bench" --backend POSIX --target-mem FILE --direct $storage --iters 100 --max-bytes 64M
    drc=$?
fi
echo
echo "make run: $(($(date +%s) - start)) s; NET: initiator exit status $rc, target exit status" \
    "$trc; POSIX: buffered exit status $src, direct exit status $drc"
for s in "$rc" "$trc" "$src" "$drc"; do
    if [ "$s" -ne 0 ]; then
        echo "make run: FAILED (see the messages above)" >&2
        exit "$s"
    fi
done
exit 0

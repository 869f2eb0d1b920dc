#!/bin/sh
# ixl-info lists the test plugin with its options, each broken plugin as refused with its
# reason, the CUDA section (with the simulated driver given as the third argument: its devices;
# without a driver: why there is none), the configuration, and names status codes.
set -u
info=$1
dir=$2
sim=${3:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(IXL_PLUGIN_DIR="$dir" "$info") || fail "ixl-info exited $?"
echo "$out"
echo "$out" | grep -q "^  TEST " || fail "TEST plugin not listed"
echo "$out" | grep -q "option delay_us" || fail "TEST options not listed"
# Each option with its type, range or choices, and default.
has() { echo "$out" | grep -Eq "$1" || fail "no line matching: $1"; }
has 'option delay_us +duration 0\.\.600000000 us, default "0"$'
has 'option fail_post +int -2147483648\.\.0 status, default "0"$'
has 'option release_busy +int 0\.\.1000000 times, default "0"$'
has 'option no_progress +bool, default "0"$'
has 'option mems +string, default "DRAM,VRAM,FILE"$'
has '^ +memory types the engine supports, comma separated$'
# The built-in NET and POSIX show the other types.
has 'option path +enum auto\|shm\|cma\|tcp, default "auto"$'
has 'option chunk +size 4K\.\.1G bytes, default "1M"$'
has 'option timeout_ms +duration 10\.\.3600000 ms, default "2000"$'
has 'option conns +int 1\.\.16 connections, default "4"$'
has 'option engine +enum auto\|io_uring\|threads, default "auto"$'
echo "$out" | grep -q "capabilities: local,remote,notif,progress" || fail "capabilities"
# What an engine offers here: NET either has VRAM (a GPU) or says why not on the next line.
here=$(echo "$out" | grep -A3 "^  NET " | grep -A1 "memory here: ") || fail "NET: no 'memory here' line"
echo "$here" | head -1 | grep -q "memory here: DRAM" || fail "NET's memory here: $here"
echo "$here" | head -1 | grep -q "VRAM" || echo "$here" | grep -q "not here: VRAM: ." ||
    fail "NET has no VRAM and does not say why: $here"
# GDS and GDS_MT (built in) are listed; without cuFile each says why it is unavailable here.
for p in GDS GDS_MT; do
    echo "$out" | grep -q "^  $p " || fail "$p not listed"
    if ! ldconfig -p 2>/dev/null | grep -q "libcufile\.so\.0"; then
        echo "$out" | grep -A2 "^  $p " | grep -q "unavailable here: .*cuFile not found (libcufile.so.0: " ||
            fail "$p not shown as unavailable with the reason"
    fi
done
for f in BROKEN_NOSYM BROKEN_ABI BROKEN_SMALL BROKEN_NONOTIF BROKEN_OPTS TESTDUP; do
    echo "$out" | grep -A1 "libixl_plugin_$f.so" | grep -q "refused: " ||
        fail "$f not listed as refused with a reason"
done
echo "$out" | grep -q "IXL_PLUGIN_DIR *= \"$dir\"" || fail "configuration not printed"
echo "$out" | grep -q "^cuda:$" || fail "no cuda section"
# The CUDA section without a driver, with the simulated one, and with it saying no device.
cuda=$(IXL_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$info" --cuda) || fail "ixl-info --cuda exited $?"
echo "$cuda"
echo "$cuda" | grep -q "^  devices     none: no GPU driver (/nonexistent/libcuda.so.1: not found" ||
    fail "no driver not shown as such"
if [ -n "$sim" ]; then
    cuda=$(IXL_CUDA_LIBRARY="$sim" IXL_CUDASIM_DEVICES=2 "$info" --cuda) || fail "ixl-info --cuda exited $?"
    echo "$cuda"
    echo "$cuda" | grep -Eq "^  driver      CUDA [0-9]+\.[0-9]+ \([0-9]+\)$" || fail "no driver version"
    echo "$cuda" | grep -q "^  devices     2$" || fail "not 2 devices"
    echo "$cuda" | grep -Eq "^  device 1    .+, [0-9]+ MiB, compute capability [0-9]+\.[0-9]+, PCI bus" ||
        fail "device 1 not described"
    cuda=$(IXL_CUDA_LIBRARY="$sim" IXL_CUDASIM_NO_DEVICE=1 "$info" --cuda) || fail "exited $?"
    echo "$cuda" | grep -q "^  devices     none: no CUDA device" || fail "no device not shown as such"
fi
[ "$("$info" --strerror -500)" = "-500 IXL_ERR_NOT_FOUND" ] || fail "--strerror -500"
"$info" --strerror 12345 >/dev/null && fail "--strerror of an unknown status must fail"
"$info" --bogus 2>/dev/null && fail "an unknown option must fail"
echo ok

#!/bin/sh
# The real-GPU suite (tests/gpu/README.md): builds ixl (Release, in IXL_BUILD_DIR, default
# build-gpu) and runs the GPU tests on the first GPU. Needs CMake, a C compiler and the NVIDIA
# driver (libcuda.so.1); no CUDA toolkit. PyTorch and CuPy parts run when python3 has them.
#
#   tests/gpu/run.sh [REPORT.md]
#
# The report (Markdown, pasteable into docs/benchmarks.md: the GPU and driver, a table of the
# tests, the registration figures and the bandwidth table against cuMemcpy) goes to stdout and,
# when given, to REPORT.md; progress and build output go to stderr and to IXL_BUILD_DIR/gpu-logs.
# Exit status: 0 every test passed (optional parts that could not run are listed as SKIP),
# 1 a test failed or the build failed, 77 no GPU.
#
# Environment: IXL_BUILD_DIR (build directory), IXL_GPU_JOBS (build jobs, default nproc),
# IXL_GPU_PYTHON (interpreter of the PyTorch/CuPy part, default python3), IXL_GPU_QUICK=1 (the
# bandwidth table from 3 rounds instead of 5, and ixlbench's KV scenario at 16 MiB per side
# instead of 1 GiB, for a smoke run).
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
BUILD=${IXL_BUILD_DIR:-$ROOT/build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
REPORT=${1:-}
JOBS=${IXL_GPU_JOBS:-$(nproc 2>/dev/null || echo 4)}
PY=${IXL_GPU_PYTHON:-python3}
LOGS=$BUILD/gpu-logs
START=$(date +%s)

say() { echo "run.sh: $*" >&2; }

mkdir -p "$LOGS" || exit 1
OUTMD=$LOGS/report.md
: >"$OUTMD"
emit() { printf '%s\n' "$*" >>"$OUTMD"; }
finish() {
    emit ""
    emit "Wall time of tests/gpu/run.sh: $(($(date +%s) - START)) s (build included)."
    cat "$OUTMD"
    [ -n "$REPORT" ] && cp "$OUTMD" "$REPORT"
    exit "$1"
}

# --- configure: every optional feature whose library is missing here is turned off ---------
# Required: CMake >= 3.18, a C11 compiler, pthreads, OpenSSL's libcrypto >= 3.0 (headers:
# libssl-dev). Optional (IXL_WITH_*): etcd (libcurl, jansson), io_uring (liburing), UCX.
opts="-DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DIXL_SANITIZE= -DCMAKE_C_COMPILER_LAUNCHER="
off=""
i=0
while :; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    if cmake -S "$ROOT" -B "$BUILD" $opts $off >"$LOGS/configure.log" 2>&1; then
        break
    fi
    sw=$(sed -n 's/.*IXL_WITH_\([A-Z0-9_]*\) is ON.*/\1/p' "$LOGS/configure.log" | head -n 1)
    if [ -z "$sw" ] || [ $i -gt 10 ]; then
        say "configure failed (log: $LOGS/configure.log):"
        tail -n 30 "$LOGS/configure.log" >&2
        if grep -q "OpenSSL" "$LOGS/configure.log"; then
            say "ixl needs OpenSSL's libcrypto >= 3.0 with its headers (Debian/Ubuntu: libssl-dev)"
        fi
        emit "tests/gpu/run.sh: FAILED to configure ixl: see $LOGS/configure.log"
        finish 1
    fi
    say "optional feature IXL_WITH_$sw: its library is missing here, building without it"
    off="$off -DIXL_WITH_$sw=OFF"
done
# What is off (this run's switches, or a reused build directory's).
off=$(sed -n 's/^\(IXL_WITH_[A-Z0-9_]*\):BOOL=OFF$/ -D\1=OFF/p' "$BUILD/CMakeCache.txt" | tr -d '\n')
say "configured $BUILD (Release${off:+;$off})"

targets="ixl ixl-info ixlbench test_device_batch bench_copy_kernel test_gpu_reg test_gpu_xfer test_gpu_ipc test_gpu_stage test_gpu_storage test_gpu_gds"
build() {
    # shellcheck disable=SC2086
    cmake --build "$BUILD" -j "$JOBS" --target $targets >"$LOGS/build.log" 2>&1
}
werror_note=""
built=0
if build; then
    built=1
elif grep -q -- '-Werror' "$LOGS/build.log"; then
    # A compiler newer than the project's (GCC 12 in CI) may warn where it did not, and the
    # build is -Werror: build again with warnings left as warnings (a launcher appends
    # -Wno-error after the project's flags), and say so in the report with the warnings.
    warns=$(grep -E 'error: .*\[-Werror' "$LOGS/build.log" | sort -u | head -n 10)
    say "the build failed on warnings of this compiler; building again without -Werror"
    printf '#!/bin/sh\nexec "$@" -Wno-error\n' >"$LOGS/no-werror.sh"
    chmod +x "$LOGS/no-werror.sh"
    cp "$LOGS/build.log" "$LOGS/build-werror.log"
    if cmake "$BUILD" -DCMAKE_C_COMPILER_LAUNCHER="$LOGS/no-werror.sh" \
        >>"$LOGS/configure.log" 2>&1 && build; then
        built=1
        werror_note="built only without -Werror; $(${CC:-cc} --version | head -n 1) warns:
\`\`\`
$warns
\`\`\`"
    fi
fi
if [ $built -eq 0 ]; then
    say "build failed (log: $LOGS/build.log):"
    grep -E "error|Error" "$LOGS/build.log" | head -n 30 >&2
    emit "tests/gpu/run.sh: FAILED to build ixl: see $LOGS/build.log"
    finish 1
fi
say "built in $(($(date +%s) - START)) s"

# --- the machine ------------------------------------------------------------------------------
gpu=""
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id \
        --format=csv,noheader 2>/dev/null | head -n 1)
fi
[ -n "$gpu" ] || gpu=$(sed -n 's/^NVRM version: *//p' /proc/driver/nvidia/version 2>/dev/null)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | head -n 1)
[ -n "$dirty" ] && commit="$commit (with uncommitted changes)"

emit "## Real GPU: tests/gpu/run.sh, $(date -u +%Y-%m-%d)"
emit ""
emit "- **GPU**: ${gpu:-unknown (no nvidia-smi)} (name, driver, memory, PCI bus)"
emit "- **Host**: $(nproc 2>/dev/null) CPUs ($cpu), Linux $(uname -r)"
emit "- **Source**: commit $commit; build Release${off:+ with$off}"
[ -n "$werror_note" ] && emit "- **Warnings**: $werror_note"
emit "- **Command**: \`tests/gpu/run.sh\`"
emit ""

# --- the tests --------------------------------------------------------------------------------
results=$LOGS/results
: >"$results"
failed=0
# run NAME TIMEOUT WHAT COMMAND...: stdout (Markdown) into the report, stderr to the log.
run() {
    name=$1 limit=$2 what=$3
    shift 3
    say "$name: $what"
    t0=$(date +%s.%N)
    timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.md" 2>"$LOGS/$name.log"
    rc=$?
    t=$(echo "$t0 $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
    case $rc in
    0) res=PASS ;;
    77) res=SKIP ;;
    124 | 137) res="FAIL (timeout ${limit} s)" failed=1 ;;
    *) res="FAIL (exit $rc)" failed=1 ;;
    esac
    why=""
    [ $rc -eq 77 ] && why=": $(grep -m 1 '^SKIP' "$LOGS/$name.log" | sed 's/^SKIP:* *//')"
    echo "| $name | $res | $t s | $what$why |" >>"$results"
    say "$name: $res ($t s)"
    if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
        tail -n 20 "$LOGS/$name.log" >&2
    fi
}

unset IXL_CUDA_LIBRARY # the real driver, never the simulated one
# cuFile (issue 21: GDS and GDS_MT): the system's libcufile.so.0, else the one of the
# nvidia-cufile wheel (site-packages/nvidia/cu13/lib or nvidia/cufile/lib) of $PY or of
# /opt/torch/.venv. Its directory goes first in LD_LIBRARY_PATH, so that every GDS/GDS_MT
# backend of this run (ixl-info, bench/gds.sh's ixlbench, the storage tests) finds it under its
# default name; test_gpu_gds also passes the path through the backends' `library` option.
cufile=""
if ldconfig -p 2>/dev/null | grep -q 'libcufile\.so\.0 '; then
    cufile=libcufile.so.0
else
    sp=$("$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
    for d in $sp /opt/torch/.venv/lib/python3*/site-packages; do
        [ -d "$d/nvidia" ] || continue
        cufile=$(find "$d/nvidia" -name 'libcufile.so.0' 2>/dev/null | head -n 1)
        [ -n "$cufile" ] && break
    done
    [ -n "$cufile" ] && export LD_LIBRARY_PATH="$(dirname "$cufile")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
say "cuFile: ${cufile:-not found}"

# ixl-info: its cuda section and the memory types each plugin offers here, into the report.
# shellcheck disable=SC2016 # $0 is sh -c's, expanded there
run ixl-info 60 "ixl-info: the driver and devices as ixl's device layer sees them" \
    sh -c '"$0" >&2' "$BUILD/tools/ixl-info"
"$BUILD/tools/ixl-info" --cuda >"$LOGS/ixl-info-cuda.txt" 2>&1
memlines=$(awk '/^  [A-Z][A-Z0-9_]* +version/ { p = $1 }
    /memory here|not here|unavailable here/ { sub(/^ +/, ""); print p ": " $0 }' "$LOGS/ixl-info.log")
{
    echo "ixl-info --cuda, and the memory types each plugin offers here (ixl-info):"
    echo ""
    echo '```'
    cat "$LOGS/ixl-info-cuda.txt"
    echo "$memlines"
    echo '```'
} >"$LOGS/ixl-info.md"
run test_gpu_reg 120 "registration: cuMemAlloc and VMM (POSIX fd) memory, tensors in one allocation, refusals" \
    "$BUILD/tests/gpu/test_gpu_reg"
nogpu=0
[ $rc -eq 77 ] && nogpu=1
run test_device_batch 120 "batched device copies (copy_batch): the copy kernel (odd sizes and offsets, 70,000 entries, tables reused), cuMemcpyBatchAsync host<->device, one copy each, data checked" \
    "$BUILD/tests/test_device_batch"
# The copy kernel alone: tables read mapped or from device memory, one launch or NET's batches,
# against the copy engines (bench/bench_copy_kernel.c; docs/device.md, "Batched copies").
# shellcheck disable=SC2016 # $0 is sh -c's, expanded there
run bench_copy_kernel 120 "the copy kernel alone: 4/16/32 KiB entries, mapped or device-resident tables, one launch or NET's batches, against cuMemcpyAsync 1 GiB" \
    sh -c 'echo "The copy kernel alone (bench/bench_copy_kernel.c):"; echo; echo "\`\`\`"; "$0"; rc=$?; echo "\`\`\`"; exit $rc' "$BUILD/bench/bench_copy_kernel"
run test_gpu_xfer 180 "NET within one agent: VRAM<->VRAM, VRAM->DRAM, DRAM->VRAM, data checked" \
    "$BUILD/tests/gpu/test_gpu_xfer"
run bench_gpu 300 "bandwidth: ixl (NET, one agent) against cuMemcpy, interleaved, medians" \
    "$BUILD/tests/gpu/test_gpu_xfer" bench
run test_gpu_ipc 120 "NET between two processes through CUDA IPC: cuMemAlloc and VMM (POSIX fd) targets, DRAM -> remote VRAM, data checked, path cuda-ipc" \
    "$BUILD/tests/gpu/test_gpu_ipc"
run bench_gpu_ipc 200 "bandwidth: CUDA IPC between two processes against cuMemcpyDtoD inside one process (issue 20: >= 0.9x at 64 MiB and up)" \
    "$BUILD/tests/gpu/test_gpu_ipc" bench

run test_gpu_stage 180 "staged VRAM->VRAM between two processes over loopback TCP (local_paths=0), data checked; bandwidth against DtoH pinned and raw TCP" \
    "$BUILD/tests/gpu/test_gpu_stage"
# Issue 20: ixlbench's KV scenario between two processes, VRAM <-> VRAM on the first GPU (NET
# takes CUDA IPC on one node): 64 regions x 512 blocks x 32 KiB = 1 GiB per side, a READ of
# 32,768 descriptors per request, every variant's data checked through ixl_device_copy, the
# path in the table; the devcopy rows are ixl_device_copy (cuMemcpyDtoD) within one process.
# IXL_GPU_QUICK=1: 16 MiB per side and 2 iterations (a smoke run; the simulated device copies
# slowly per descriptor).
kvargs=""
[ "${IXL_GPU_QUICK:-0}" = 1 ] && kvargs="--kv-regions 8 --kv-blocks 64 --kv-req-blocks 64 --kv-iters 2"
# shellcheck disable=SC2016 # $0.. are sh -c's
run ixlbench_kv 300 "ixlbench --scenario kv between two processes, VRAM<->VRAM (${kvargs:-1 GiB per side, 32,768 descriptors per READ}), data checked, path reported" \
    sh -c '[ "$3" = 1 ] && { echo "SKIP: no GPU" >&2; exit 77; }
        md=$2/kv-md.$$; rm -f "$md"
        "$0" --role target --target-mem VRAM --md-file "$md" --idle-timeout 60 >&2 &
        t=$!
        "$0" --role initiator --initiator-mem VRAM --target-mem VRAM --md-file "$md" \
            --scenario kv --no-progress $1 >"$2/ixlbench_kv.txt"
        rc=$?
        [ $rc -eq 0 ] || kill $t 2>/dev/null
        wait $t || [ $rc -ne 0 ] || rc=1
        path=$(awk "/^variant/ { h = 1; next } h && \$1 == \"single\" { print \$3; exit }" "$2/ixlbench_kv.txt")
        echo "KV cache between two processes (ixlbench --scenario kv, VRAM<->VRAM on GPU 0; NET path: ${path:-none}):"
        echo; echo "\`\`\`"; cat "$2/ixlbench_kv.txt"; echo "\`\`\`"
        exit $rc' "$BUILD/tools/ixlbench" "$kvargs" "$LOGS" "$nogpu"

# cuFile learns a file's volume from udev's database (/run/udev/data); a machine that runs no
# udev daemon (a microVM) has none, and cuFile then serves no file, even in compatibility mode
# (the H200 VM of 2026-11-26). Where the database is empty and the machine has systemd's udevd,
# run it once (it fills the database from the kernel's devices) before the storage tests.
if [ -n "$cufile" ] && [ -z "$(ls -A /run/udev/data 2>/dev/null)" ]; then
    {
        echo "/run/udev/data was empty"
        udevd=""
        for u in /lib/systemd/systemd-udevd /usr/lib/systemd/systemd-udevd /sbin/udevd; do
            [ -x "$u" ] && udevd=$u && break
        done
        if [ -n "$udevd" ] && command -v udevadm >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
            echo "started $udevd --daemon; udevadm trigger --action=add; udevadm settle"
            "$udevd" --daemon && udevadm trigger --action=add && udevadm settle --timeout=20
            echo "/run/udev/data now: $(find /run/udev/data -type f 2>/dev/null | wc -l) entries"
        elif [ "$(id -u)" = 0 ]; then
            # No udevd: record, for the volumes under the build and storage directories,
            # what udevd's blkid builtin would (the E: properties blkid reads from the
            # volume, else the file system's type and UUID as mounted, and the I:
            # initialization time), removed again at the end of the run.
            echo "no udevd here: udev database entries written from blkid -o udev (or findmnt)"
            for dir in "$BUILD" "${IXL_GPU_STORAGE_DIR:-/var/tmp}"; do
                dn=$(stat -c %d "$dir") || continue
                maj=$((dn >> 8 & 0xfff)) min=$(((dn & 0xff) | (dn >> 12 & 0xfff00)))
                entry=/run/udev/data/b$maj:$min
                [ -e "$entry" ] && continue
                dev=$(readlink -f "/sys/dev/block/$maj:$min" 2>/dev/null)
                [ -n "$dev" ] && [ -b "/dev/${dev##*/}" ] || {
                    echo "$dir: no block device $maj:$min"
                    continue
                }
                mkdir -p /run/udev/data
                props=$(blkid -p -o udev "/dev/${dev##*/}" 2>/dev/null)
                if [ -z "$props" ]; then
                    fs=$(findmnt -no FSTYPE -T "$dir" 2>/dev/null)
                    uuid=$(findmnt -no UUID -T "$dir" 2>/dev/null)
                    props="ID_FS_USAGE=filesystem
ID_FS_TYPE=${fs:-unknown}${uuid:+
ID_FS_UUID=$uuid}"
                fi
                {
                    echo "I:$(($(date +%s) * 1000000))"
                    echo "$props" | sed 's/^/E:/'
                } >"$entry"
                echo "$entry (/dev/${dev##*/}, under $dir):"
                sed 's/^/  /' "$entry"
                UDEV_WRITTEN="${UDEV_WRITTEN:-} $entry"
            done
            echo "UDEV_WRITTEN=${UDEV_WRITTEN:-}"
        else
            echo "no udevd, or no blkid, or not root: the database stays empty"
        fi
    } >"$LOGS/cufile-env.log" 2>&1
    say "udev for cuFile: $(tail -n 1 "$LOGS/cufile-env.log")"
    udev_written=$(sed -n 's/^UDEV_WRITTEN=//p' "$LOGS/cufile-env.log")
    # shellcheck disable=SC2086 # a list of paths without spaces
    [ -n "$udev_written" ] && trap 'rm -f $udev_written' EXIT
fi

# Issue 21: VRAM <-> FILE: POSIX's staged path (the thread-pool engine here: no liburing), GDS
# and GDS_MT when their plugins load, and the core's automatic choice, against the raw baseline
# (cuMemcpy + pwrite/pread, O_DIRECT) in the same run. The file lives in IXL_GPU_STORAGE_DIR
# (default /var/tmp).
# The cost table first (bench/gds.sh measures each backend with ixlbench), so that the automatic
# choice below follows this machine's figures; the table goes into the report.
export IXL_GPU_COST_TABLE=$LOGS/cost_table
rm -f "$IXL_GPU_COST_TABLE"
# shellcheck disable=SC2016 # $0 and $1 are sh -c's, expanded there
run calibrate 240 "bench/gds.sh: the cost table (VRAM<->FILE per backend, 1..64 MiB, O_DIRECT, ixlbench)" \
    sh -c '"$0" --out "$1" --ixlbench "$2" --dir "$3" >&2 && { echo "Cost table (bench/gds.sh):"; echo; echo "\`\`\`"; cat "$1"; echo "\`\`\`"; }' \
    "$ROOT/bench/gds.sh" "$IXL_GPU_COST_TABLE" "$BUILD/tools/ixlbench" "${IXL_GPU_STORAGE_DIR:-/var/tmp}"
[ -s "$IXL_GPU_COST_TABLE" ] || unset IXL_GPU_COST_TABLE
run test_gpu_storage 180 "storage: VRAM<->FILE on each backend and the automatic choice, 1/16/64 MiB, data checked" \
    "$BUILD/tests/gpu/test_gpu_storage"
run bench_storage 300 "storage bandwidth: POSIX staged, GDS, GDS_MT, auto and raw (cuMemcpy + O_DIRECT), medians" \
    "$BUILD/tests/gpu/test_gpu_storage" bench
# GDS and GDS_MT on that cuFile; the file lies in a temporary directory of the build directory
# (the machine's disk, not a tmpfs); cuFile writes its cufile.log there (the test runs in it),
# kept in the logs.
gdsdir=$(mktemp -d "$BUILD/gds-XXXXXX")
# shellcheck disable=SC2016 # $0.. are sh -c's
run test_gpu_gds 300 "GDS, GDS_MT and the automatic choice: VRAM<->FILE 1/16/64 MiB, data checked, against cuMemcpy + pwrite/pread (cuFile: ${cufile:-none})" \
    sh -c 'cd "$1" && exec "$0" "$2" "$1"' "$BUILD/tests/gpu/test_gpu_gds" "$gdsdir" "$cufile"
[ -f "$gdsdir/cufile.log" ] && cp "$gdsdir/cufile.log" "$LOGS/cufile.log"
# Where cuFile still served no file, its forced compatibility mode (CUFILE_FORCE_COMPAT_MODE)
# is tried once more; what was tried goes into the report.
if [ $rc -eq 77 ] && [ -n "$cufile" ]; then
    rm -f "$gdsdir/cufile.log"
    # shellcheck disable=SC2016
    run test_gpu_gds_compat 300 "test_gpu_gds again with CUFILE_FORCE_COMPAT_MODE=true" \
        env CUFILE_FORCE_COMPAT_MODE=true sh -c 'cd "$1" && exec "$0" "$2" "$1"' \
        "$BUILD/tests/gpu/test_gpu_gds" "$gdsdir" "$cufile"
    [ -f "$gdsdir/cufile.log" ] && cp "$gdsdir/cufile.log" "$LOGS/cufile-compat.log"
fi
if [ -f "$LOGS/cufile-env.log" ] || [ -f "$LOGS/cufile-compat.log" ]; then
    {
        echo "cuFile (tests/gpu/run.sh):"
        echo ""
        echo '```'
        cat "$LOGS/cufile-env.log" 2>/dev/null
        for f in cufile.log cufile-compat.log; do
            [ -f "$LOGS/$f" ] || continue
            echo "--- $f (errors):"
            grep -i -m 12 'error\|fail\|udev\|not supported\|compat' "$LOGS/$f"
        done
        echo '```'
    } >"$LOGS/cufile-env.md"
fi
rm -rf "$gdsdir"

# Python: PyTorch tensors through the nixl package (ixl.compat when it is not there), CuPy.
nixl_dir=$(find "$ROOT/bindings" -path '*/nixl/_api.py' 2>/dev/null | head -n 1)
pypath=$ROOT/bindings/python
[ -n "$nixl_dir" ] && pypath="$(dirname "$(dirname "$nixl_dir")"):$pypath"
if command -v "$PY" >/dev/null 2>&1; then
    export PYTHONPATH="$pypath${PYTHONPATH:+:$PYTHONPATH}" IXL_LIBRARY="$BUILD/lib/libixl.so"
    export PYTHONDONTWRITEBYTECODE=1
    run python_gpu 180 "Python: PyTorch CUDA tensors (nixl package) and CuPy arrays, NET within one agent" \
        "$PY" "$ROOT/tests/gpu/python_gpu.py"
    run python_gpu_2p 240 "Python: PyTorch CUDA tensors between two processes through the nixl package (CUDA IPC), data checked" \
        "$PY" "$ROOT/tests/gpu/python_gpu_2p.py"
else
    echo "| python_gpu | SKIP | 0 s | Python: no $PY on PATH |" >>"$results"
fi

emit "| test | result | time | what |"
emit "|---|---|---|---|"
cat "$results" >>"$OUTMD"
for name in ixl-info test_gpu_reg bench_copy_kernel test_gpu_xfer bench_gpu test_gpu_ipc bench_gpu_ipc test_gpu_stage ixlbench_kv calibrate test_gpu_storage bench_storage test_gpu_gds cufile-env test_gpu_gds_compat python_gpu python_gpu_2p; do
    [ -s "$LOGS/$name.md" ] || continue
    emit ""
    cat "$LOGS/$name.md" >>"$OUTMD"
done
emit ""
emit "Logs of each test: \`$LOGS\`."

if [ $failed -ne 0 ]; then
    say "FAILED (logs: $LOGS)"
    finish 1
fi
if [ $nogpu -ne 0 ]; then
    say "no GPU: every test skipped"
    finish 77
fi
say "all passed"
finish 0

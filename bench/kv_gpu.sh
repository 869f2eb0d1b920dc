#!/bin/sh
# ixlbench's KV scenario between two processes, VRAM <-> VRAM on GPU 0 (NET takes CUDA IPC),
# once per device-layer copy mode (IXL_DEV_COPY: loop = one cuMemcpyAsync per descriptor,
# batch = cuMemcpyBatchAsync, auto = the copy kernel for device-to-device batches), the modes
# interleaved, ROUNDS rounds; then the median GB/s of each variant and of the ratio of the
# 32,768-descriptor READ to one 1 GiB descriptor (ixlbench's target: >= 0.8), per mode.
# docs/device.md, "Batched copies". Needs a GPU (exit 77 without).
#
# Environment: BUILD_DIR (default build), ROUNDS (3), MODES ("loop batch auto"), KV_ARGS (more
# ixlbench options; default "--kv-variants random,sequential,merged --kv-iters 8"),
# IXL_CUDA_LIBRARY (left as set: the simulated device, tests/sim, gives a smoke run).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
rounds=${ROUNDS:-3}
modes=${MODES:-loop batch auto}
kv_args=${KV_ARGS:---kv-variants random,sequential,merged --kv-iters 8}
bench=$build/tools/ixlbench
[ -x "$bench" ] || { echo "kv_gpu.sh: no $bench (build ixlbench first)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
r=1
while [ "$r" -le "$rounds" ]; do
    for m in $modes; do
        md=$out/md.$m.$r
        IXL_DEV_COPY=$m "$bench" --role target --target-mem VRAM --md-file "$md" \
            --idle-timeout 60 >"$out/target.$m.$r" 2>&1 &
        t=$!
        # shellcheck disable=SC2086 # kv_args is a list of options
        if ! IXL_DEV_COPY=$m "$bench" --role initiator --initiator-mem VRAM --target-mem VRAM \
            --md-file "$md" --scenario kv --no-progress $kv_args >"$out/run.$m.$r" 2>&1; then
            if grep -q "no GPU\|no CUDA device\|no GPU driver" "$out/run.$m.$r"; then
                kill $t 2>/dev/null
                echo "SKIP: no GPU"
                exit 77
            fi
            echo "kv_gpu.sh: round $r, mode $m failed:" >&2
            tail -n 20 "$out/run.$m.$r" >&2
            kill $t 2>/dev/null
            status=1
        fi
        wait $t 2>/dev/null
        echo "round $r, IXL_DEV_COPY=$m:"
        awk '/^variant/ { h = 1 } h && NF > 3 { print "    " $0 } /^ratio/ { print "    " $0 }' \
            "$out/run.$m.$r" | grep -v "^    ratio.*devcopy" | sort -u -k1,1 | head -n 12
    done
    r=$((r + 1))
done
echo ""
echo "median over $rounds rounds (GB/s; ratio = variant / single, target >= 0.8):"
printf '%-6s %10s %10s %10s %10s %12s %12s\n' mode random sequential merged single \
    random/single seq/single
for m in $modes; do
    cat "$out"/run."$m".* 2>/dev/null | awk -v m="$m" '
        function med(a, n,   i, j, t) {
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n == 0 ? 0 : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
        }
        /^variant/ { h = 1; next }
        h && ($1 == "random" || $1 == "sequential" || $1 == "merged" || $1 == "single") {
            for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/ && $(i + 1) !~ /^(ms|us|s)$/ && i > 4) { v = $i; break }
            n[$1]++; g[$1, n[$1]] = v
        }
        /^ratio random \/ single/ && match($0, /= [0-9.]+/) { rr[++nr] = substr($0, RSTART + 2, RLENGTH - 2) }
        /^ratio sequential \/ single/ && match($0, /= [0-9.]+/) { rs[++ns] = substr($0, RSTART + 2, RLENGTH - 2) }
        END {
            split("random sequential merged single", vs, " ")
            for (k = 1; k <= 4; k++) { c = n[vs[k]]; for (i = 1; i <= c; i++) a[i] = g[vs[k], i]; x[k] = med(a, c); delete a }
            printf "%-6s %10.2f %10.2f %10.2f %10.2f %12.2f %12.2f\n", m, x[1], x[2], x[3], x[4], med(rr, nr), med(rs, ns)
        }'
done
exit $status

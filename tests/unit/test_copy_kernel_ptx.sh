#!/bin/sh
# src/device/copy_kernel_ptx.h (the device layer's copy kernel, committed as PTX text) is what
# scripts/gen_copy_kernel.sh makes from src/device/copy_kernel.cu today: the kernel source and
# the PTX the layer loads cannot drift apart, and ptxas accepts the PTX for sm_75 and sm_90
# (the script checks). Skips (77) without a CUDA toolkit: CUDA is not something this project
# installs.
#
#   test_copy_kernel_ptx.sh SOURCE_DIR
set -eu
src=$1
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ] || [ ! -x "$cuda/bin/ptxas" ]; then
    echo "SKIP: no $cuda/bin/nvcc and ptxas (CUDA is not something this project installs)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh "$src/scripts/gen_copy_kernel.sh" "$tmp/ptx.h" >/dev/null
if ! diff "$src/src/device/copy_kernel_ptx.h" "$tmp/ptx.h"; then
    echo "FAIL: src/device/copy_kernel_ptx.h is not what scripts/gen_copy_kernel.sh makes from" \
        "copy_kernel.cu (< committed, > fresh): run the script and commit its output"
    exit 1
fi
echo "test_copy_kernel_ptx: ok (the committed PTX is copy_kernel.cu's; ptxas accepts it)"

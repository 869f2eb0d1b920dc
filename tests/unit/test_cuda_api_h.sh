#!/bin/sh
# src/device/cuda_api.h (ixl's own declarations of the CUDA driver API) against the toolkit's
# cuda.h, when one is installed: every constant it declares has cuda.h's value, the structs have
# cuda.h's sizes and offsets, and every entry point's function type is the type cuda.h declares
# for that symbol (redeclaring the symbol with it would not compile otherwise). Skips (77)
# without a toolkit: CUDA is not something this project installs.
#
#   test_cuda_api_h.sh CC SOURCE_DIR [CUDA_INCLUDE_DIR]
set -eu
cc=$1
src=$2
inc=${3:-/usr/local/cuda/include}
hdr=$src/src/device/cuda_api.h
if [ ! -f "$inc/cuda.h" ]; then
    echo "SKIP: no $inc/cuda.h (CUDA is not something this project installs)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Constants: enum members and #defines named CU*/CUDA_*, printed by one program built against
# each header.
{
    grep -oE '^ +(CU[A-Z0-9_]+|CUDA_[A-Z0-9_]+) =' "$hdr" | tr -d ' ='
    grep -oE '^#define CU[A-Z0-9_]+ ' "$hdr" | awk '{print $2}'
} | sort -u >"$tmp/names"
[ -s "$tmp/names" ] || {
    echo "FAIL: found no constants in $hdr"
    exit 1
}
{
    printf '%s\n' '#include <stddef.h>' '#include <stdio.h>' '#include HDR' 'int main(void) {'
    while read -r n; do
        printf '    printf("%%s %%lld\\n", "%s", (long long)(%s));\n' "$n" "$n"
    done <"$tmp/names"
    for t in CUmemAllocationProp CUmemAccessDesc CUmemLocation CUipcMemHandle CUresult CUdeviceptr \
        CUmemGenericAllocationHandle; do
        printf '    printf("sizeof %%s %%zu\\n", "%s", sizeof(%s));\n' "$t" "$t"
    done
    printf '%s\n' '    printf("CUmemAllocationProp %zu %zu %zu\n", offsetof(CUmemAllocationProp, location),' \
        '           offsetof(CUmemAllocationProp, win32HandleMetaData),' \
        '           offsetof(CUmemAllocationProp, allocFlags));' '    return 0;' '}'
} >"$tmp/values.c"
"$cc" -std=c11 -DHDR='<cuda.h>' -I"$inc" "$tmp/values.c" -o "$tmp/theirs"
"$cc" -std=c11 -DHDR="\"$hdr\"" "$tmp/values.c" -o "$tmp/ours"
"$tmp/theirs" >"$tmp/theirs.out"
"$tmp/ours" >"$tmp/ours.out"
if ! diff "$tmp/theirs.out" "$tmp/ours.out"; then
    echo "FAIL: cuda_api.h differs from $inc/cuda.h (< cuda.h, > cuda_api.h)"
    exit 1
fi

# Entry points: cuda_api.h's function types, compiled against cuda.h, then every symbol of the
# X-macro lists redeclared with its type: a type that differs from cuda.h's is an error.
{
    echo '#include <cuda.h>'
    awk '/^typedef CUresult ixl_/ {on = 1} on {print} on && /;/ {on = 0}' "$hdr"
    grep -oE '^ +X\(cu[A-Za-z0-9_]+\)' "$hdr" | sed -E 's/ *X\((.*)\)/ixl_\1_fn \1;/'
} >"$tmp/sigs.c"
n=$(grep -c '_fn cu' "$tmp/sigs.c")
"$cc" -std=c11 -Wall -Werror -I"$inc" -c "$tmp/sigs.c" -o "$tmp/sigs.o" || {
    echo "FAIL: an entry point's type in cuda_api.h is not cuda.h's (above)"
    exit 1
}
v=$(grep -m1 '#define CUDA_VERSION' "$inc/cuda.h" | awk '{print $3}')
echo "cuda_api.h agrees with $inc/cuda.h (CUDA_VERSION $v): $(wc -l <"$tmp/names") constants," \
    "struct layouts, $n entry point types"

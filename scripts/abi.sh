#!/bin/sh
# libixl's ABI against the committed baseline abi/libixl.abi (docs/abi.md).
#
#   scripts/abi.sh update [BUILD]     writes abi/libixl.abi from BUILD/lib/libixl.so (default
#                                     build); commit it in a commit that says the ABI changes
#   scripts/abi.sh check [BUILD|LIB]  the exported symbols are those the headers declare, and
#                                     abidiff finds no removed or changed symbol and no changed
#                                     public type (added symbols pass)
#   scripts/abi.sh diff LIB [HEADERS] abidiff alone, for LIB whose public headers are in
#                                     HEADERS (default include/ixl); the self-tests use it
#
# BUILD needs debug info (RelWithDebInfo, the default build type, or Debug). Exit status: 0
# compatible, 1 a break or an error, 77 abigail-tools missing (a failure under CI=true, since
# scripts/deps.sh test installs it).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
baseline=$root/abi/libixl.abi
suppr=$root/abi/growable.suppr
headers=$root/include/ixl

die() {
    echo "abi: $*" >&2
    exit 1
}

need_tools() {
    for t in abidw abidiff; do
        if ! command -v $t >/dev/null 2>&1; then
            if [ "${CI:-}" = true ]; then
                die "FAIL (CI=true, and scripts/deps.sh test installs it): $t not found (apt-get install abigail-tools)"
            fi
            echo "SKIP: $t not found (apt-get install abigail-tools)" >&2
            exit 77
        fi
    done
}

# lib_of BUILD|LIB: the library file.
lib_of() {
    if [ -f "$1" ]; then
        echo "$1"
    elif [ -f "$1/lib/libixl.so" ]; then
        echo "$1/lib/libixl.so"
    else
        die "no libixl.so at $1 (give a build directory or the library)"
    fi
}

has_debug_info() {
    readelf -S "$1" 2>/dev/null | grep -q '\.debug_info'
}

# lib_abi LIB HEADERS OUT: LIB's ABI as abidw writes it: only what LIB exports, and of the
# types only those defined in HEADERS (the public ones). The baseline is written the same way,
# and abidiff compares the two files: given a library and --headers-dir instead, abidiff 2.2
# filters out changes to public types when the other side is XML without locations.
# Source paths are written relative to the tree, so the baseline does not depend on where the
# tree was checked out.
lib_abi() {
    abidw --drop-private-types --exported-interfaces-only --headers-dir "$2" --no-show-locs \
        --no-comp-dir-path --no-corpus-path --no-elf-needed --out-file "$3" "$1" &&
        sed -i "s|path='$root/|path='|g" "$3"
}

# diff LIB HEADERS: abidiff's verdict on LIB against the baseline.
do_diff() {
    lib=$1
    hdrs=$2
    [ -f "$baseline" ] || die "no baseline $baseline (scripts/abi.sh update writes it)"
    has_debug_info "$lib" || die "$lib has no debug info (build with CMAKE_BUILD_TYPE RelWithDebInfo or Debug)"
    out=$(mktemp)
    lib_abi "$lib" "$hdrs" "$out" || {
        rm -f "$out"
        die "abidw failed on $lib"
    }
    set +e
    abidiff --no-added-syms --suppressions "$suppr" "$baseline" "$out"
    rc=$?
    set -e
    rm -f "$out"
    # abidiff's status is a bit mask: 1 error, 2 usage error, 4 ABI change, 8 incompatible.
    if [ $rc -eq 0 ]; then
        echo "abi: $lib is compatible with $baseline"
        return 0
    fi
    if [ $((rc & 3)) -ne 0 ]; then
        echo "abi: abidiff failed (status $rc) on $baseline and $lib" >&2
        return 1
    fi
    echo "abi: $lib breaks the ABI of $baseline (abidiff status $rc, above);" \
        "if that is intended, see docs/abi.md" >&2
    return 2
}

# The functions the public headers declare (IXL_API ... name(...)), one a line, sorted.
declared() {
    cat "$headers"/*.h | tr '\n' ' ' | sed 's/;/;\n/g' |
        sed -n 's/.*IXL_API[^(;]*[^a-z0-9_(]\(ixl_[a-z0-9_]*\) *(.*/\1/p' | sort -u
}

# The functions LIB exports (defined, global, versioned), one a line, sorted.
exported() {
    nm -D --defined-only "$1" | awk '$2 == "T" || $2 == "W" { sub(/@.*/, "", $3); print $3 }' |
        sort -u
}

do_check() {
    lib=$(lib_of "$1")
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    declared >"$tmp/declared"
    exported "$lib" >"$tmp/exported"
    [ -s "$tmp/declared" ] || die "found no IXL_API declarations in $headers"
    if ! cmp -s "$tmp/declared" "$tmp/exported"; then
        echo "abi: the functions the headers declare and those $lib exports differ" \
            "(< declared only: add it to src/ixl.map under a new version node;" \
            "> exported only: declare it or keep it out of the map):" >&2
        diff "$tmp/declared" "$tmp/exported" | grep '^[<>]' >&2
        exit 1
    fi
    echo "abi: $(wc -l <"$tmp/exported") functions, each declared and exported"
    do_diff "$lib" "$headers" || exit 1
}

do_update() {
    lib=$(lib_of "${1:-$root/build}")
    has_debug_info "$lib" || die "$lib has no debug info (build with CMAKE_BUILD_TYPE RelWithDebInfo or Debug)"
    mkdir -p "$(dirname "$baseline")"
    lib_abi "$lib" "$headers" "$baseline"
    echo "abi: wrote $baseline from $lib; commit it saying that (and why) the ABI changes"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
need_tools
case "$cmd" in
update) do_update "$@" ;;
check) do_check "${1:-$root/build}" ;;
diff)
    [ $# -ge 1 ] || die "usage: scripts/abi.sh diff LIB [HEADERS]"
    do_diff "$1" "${2:-$headers}"
    ;;
*)
    echo "usage: scripts/abi.sh update [BUILD] | check [BUILD|LIB] | diff LIB [HEADERS]" >&2
    exit 2
    ;;
esac

#!/bin/sh
# The ABI check can fail: scripts/abi.sh diff on the scratch copies of libixl that
# tests/abi/CMakeLists.txt builds (DIR/<name>/libixl.so, headers in DIR/<name>/include/ixl):
# nosym and layout must be refused as breaks, grown (additions only) must pass.
set -u
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
abi="sh $here/../../scripts/abi.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

# expect NAME WANT_STATUS TEXT...: abi.sh diff on DIR/NAME exits WANT_STATUS (2: an ABI break,
# as opposed to 1, abidiff failing to run) and its output has every TEXT.
expect() {
    name=$1
    want=$2
    shift 2
    hdrs=$dir/$name/include/ixl
    [ -d "$hdrs" ] || hdrs=
    $abi diff "$dir/$name/libixl.so" ${hdrs:+"$hdrs"} >"$tmp/$name.out" 2>&1
    rc=$?
    [ $rc -eq 77 ] && { cat "$tmp/$name.out" >&2; exit 77; }
    if [ $rc -ne "$want" ]; then
        fail "$name: scripts/abi.sh diff exited $rc, want $want; its output:"
        cat "$tmp/$name.out" >&2
        return
    fi
    for text in "$@"; do
        grep -qF -- "$text" "$tmp/$name.out" || {
            fail "$name: the output lacks '$text':"
            cat "$tmp/$name.out" >&2
        }
    done
    echo "ok: $name (status $rc)"
}

# The scratch changes are really in the scratch libraries' ABI (else a pass proves nothing).
has_in_abi() {
    abidw --drop-private-types --exported-interfaces-only --headers-dir "$dir/$1/include/ixl" \
        "$dir/$1/libixl.so" 2>/dev/null | grep -q "$2" || fail "$1: '$2' is not in its ABI"
}
has_in_abi layout "abi_selftest_inserted"
has_in_abi grown "abi_selftest_appended"
has_in_abi grown "ixl_abi_selftest_added"
nm -D --defined-only "$dir/nosym/libixl.so" | grep -q " ixl_dlist_count@" &&
    fail "nosym: libixl still exports ixl_dlist_count"

expect nosym 2 "1 Removed function" "ixl_dlist_count"
expect layout 2 "struct ixl_desc" "abi_selftest_inserted" "ixl_dlist_add"
expect grown 0 "is compatible"

[ $fails -eq 0 ] || exit 1
echo "ok: the ABI check refuses a removed symbol and a changed layout, and passes additions"

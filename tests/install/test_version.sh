#!/bin/sh
# One version: every place that carries ixl's version agrees with the file VERSION.
#   test_version.sh <source dir> <build dir> <ixl-info> <ixlbench>
# The header's IXL_VERSION_* (also a static assertion in src/util/status.c), CHANGELOG.md's
# section, the build's libixl.so.<VERSION>, ixl.pc, man pages, `ixl-info --version` and its
# first line, `ixlbench --version`, the Python packages' pyproject.toml (where the version is
# written there rather than read from VERSION) and debian/changelog's upstream version (where
# there is one).
set -eu
src=$1
build=$2
info=$3
bench=$4

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

[ "$(wc -l <"$src/VERSION")" -eq 1 ] || fail "VERSION is not one line"
v=$(cat "$src/VERSION")
echo "$v" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+$' || fail "VERSION '$v' is not major.minor.patch"
echo "VERSION: $v"

h=$(for f in MAJOR MINOR PATCH; do
    sed -n "s/^#define IXL_VERSION_$f \([0-9]*\)$/\1/p" "$src/include/ixl/ixl.h"
done | paste -sd.)
[ "$h" = "$v" ] || fail "include/ixl/ixl.h's IXL_VERSION_* say $h"
grep -q "^## \[$v\]" "$src/CHANGELOG.md" || fail "CHANGELOG.md has no section '## [$v]'"

[ -f "$build/lib/libixl.so.$v" ] || fail "the build has no lib/libixl.so.$v"
grep -qx "Version: $v" "$build/ixl.pc" || fail "ixl.pc's Version is not $v"
for page in ixl-info.1 ixlbench.1 ixl.3; do
    grep -q "^\.TH .* \"ixl $v\"" "$build/man/$page" || fail "man page $page is not for ixl $v"
done

out=$(IXL_PLUGIN_DIR='' "$info" --version) || fail "ixl-info --version exited $?"
[ "$out" = "ixl $v" ] || fail "ixl-info --version printed '$out'"
out=$(IXL_PLUGIN_DIR='' "$info" | head -n 1)
[ "$out" = "ixl $v" ] || fail "ixl-info's first line is '$out'"
out=$("$bench" --version) || fail "ixlbench --version exited $?"
[ "$out" = "ixlbench (ixl $v)" ] || fail "ixlbench --version printed '$out'"

for p in "$src"/bindings/*/pyproject.toml; do
    [ -f "$p" ] || continue
    pv=$(sed -n 's/^version *= *"\(.*\)"$/\1/p' "$p")
    if [ -n "$pv" ]; then
        [ "$pv" = "$v" ] || fail "${p#"$src"/} says version $pv"
        echo "${p#"$src"/}: $pv"
    fi
done
if [ -f "$src/debian/changelog" ]; then
    dv=$(sed -n '1s/^[^ ]* (\(.*\)).*/\1/p' "$src/debian/changelog")
    up=${dv#*:}
    up=${up%-*}
    [ "$up" = "$v" ] || fail "debian/changelog's version $dv is not $v"
    echo "debian/changelog: $dv"
fi
echo "PASS: every version is $v"

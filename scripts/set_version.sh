#!/bin/sh
# Sets ixl's version: scripts/set_version.sh MAJOR.MINOR.PATCH
# The file VERSION is the one source (CMake reads it: the library's file name and
# ixl_version(), ixl.pc, the CMake package, the man pages, the tests). This writes it, and the
# copies that cannot read it: include/ixl/ixl.h's IXL_VERSION_* (an installed header carries its
# version; the build stops when they differ) and a version written in bindings/*/pyproject.toml.
# tests/install/test_version.sh checks that they all agree. What stays for a person: the
# CHANGELOG.md section, and for a new minor the version script's new node (docs/abi.md).
set -eu
v=${1:-}
if ! echo "$v" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+$'; then
    now=$(cat "$(dirname "$0")/../VERSION")
    echo "usage: scripts/set_version.sh MAJOR.MINOR.PATCH (now: $now)" >&2
    exit 2
fi
cd "$(dirname "$0")/.."
major=${v%%.*}
rest=${v#*.}
minor=${rest%%.*}
patch=${rest#*.}

echo "$v" >VERSION
sed -i -e "s/^#define IXL_VERSION_MAJOR [0-9]*$/#define IXL_VERSION_MAJOR $major/" \
    -e "s/^#define IXL_VERSION_MINOR [0-9]*$/#define IXL_VERSION_MINOR $minor/" \
    -e "s/^#define IXL_VERSION_PATCH [0-9]*$/#define IXL_VERSION_PATCH $patch/" include/ixl/ixl.h
for p in bindings/*/pyproject.toml; do
    [ -f "$p" ] || continue
    if grep -q '^version *= *"' "$p"; then
        sed -i "s/^version *= *\".*\"$/version = \"$v\"/" "$p"
    fi
done
echo "version $v: VERSION, include/ixl/ixl.h, bindings/*/pyproject.toml"
grep -q "^## \[$v\]" CHANGELOG.md || echo "still to do: a '## [$v] - DATE' section in CHANGELOG.md"
if [ -f debian/changelog ] && ! head -n 1 debian/changelog | grep -q "($v-"; then
    echo "still to do: a debian/changelog entry for $v (dch -v $v-1)"
fi

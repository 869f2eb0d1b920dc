#!/bin/sh
# Builds ixl's Debian packages from the source tree: scripts/deb.sh OUT_DIR [JOBS]
#
# dpkg-buildpackage (debhelper, debian/) runs on a copy of the tree in OUT_DIR/src (it writes
# its results next to the tree it builds, and the parent of this checkout is not ours), with
# DEB_BUILD_OPTIONS=nocheck (the suite runs in `make test`). The .deb files, the .changes and
# the .buildinfo end up in OUT_DIR; the build log in OUT_DIR/build.log (printed on failure).
# The version comes from the file VERSION: when the upstream version of debian/changelog's top
# entry is another one, the copy gets a new top entry VERSION-1. LINTIAN=1 (the default) runs
# lintian on the .changes and fails on errors.
set -eu
out=${1:?usage: scripts/deb.sh OUT_DIR [JOBS]}
jobs=${2:-$(nproc)}
repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(tr -d ' \n' <"$repo/VERSION")

for tool in dpkg-buildpackage dh dh_python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "scripts/deb.sh: $tool is missing (sh scripts/deps.sh deb installs it)" >&2
        exit 2
    fi
done

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/src" "$out"/*.deb "$out"/*.ddeb "$out"/*.changes "$out"/*.buildinfo
src="$out/src/ixl-$version"
mkdir -p "$src"

# The tree as git sees it (tracked and untracked files, not the ignored build trees); without
# git, everything but build*/ directories.
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
else
    (cd "$repo" && tar --exclude='./build*' --exclude=./out -cf - .) | tar -xf - -C "$src"
fi

top=$(cd "$src" && dpkg-parsechangelog -S Version)
if [ "${top%-*}" != "$version" ]; then
    # One place for the version: VERSION. A release adds its own entry to debian/changelog;
    # until then the packages say they come from VERSION.
    maint=$(sed -n 's/^Maintainer: //p' "$src/debian/control")
    {
        printf 'ixl (%s-1) unstable; urgency=medium\n\n' "$version"
        printf '  * Built from the source tree at version %s (file VERSION).\n\n' "$version"
        printf ' -- %s  %s\n\n' "$maint" "$(date -R)"
        cat "$src/debian/changelog"
    } >"$src/debian/changelog.new"
    mv "$src/debian/changelog.new" "$src/debian/changelog"
fi

# The copy is fresh: nothing to clean before the build (--no-pre-clean).
log="$out/build.log"
start=$(date +%s)
if ! (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$jobs${DEB_BUILD_OPTIONS_EXTRA:+ $DEB_BUILD_OPTIONS_EXTRA}" \
    dpkg-buildpackage -b -us -uc --no-pre-clean) >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "scripts/deb.sh: dpkg-buildpackage failed; the whole log: $log" >&2
    exit 1
fi
end=$(date +%s)
for f in "$out"/src/*.deb "$out"/src/*.ddeb "$out"/src/*.changes "$out"/src/*.buildinfo; do
    [ -e "$f" ] && mv "$f" "$out/"
done
rm -rf "$out/src"
echo "packages in $out (dpkg-buildpackage: $((end - start)) s, log $log):"
for f in "$out"/*.deb; do
    printf '  %-44s %8s bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"
done

if [ "${LINTIAN:-1}" = 1 ]; then
    if ! command -v lintian >/dev/null 2>&1; then
        echo "scripts/deb.sh: lintian is missing (sh scripts/deps.sh deb installs it)" >&2
        exit 2
    fi
    changes=$(ls "$out"/*.changes)
    echo "lintian $(basename "$changes"):"
    # Errors fail (lintian's default --fail-on error); warnings and notes are printed (with
    # their explanations in lintian.txt).
    lintian --info --display-info "$changes" >"$out/lintian.txt" 2>&1 || {
        cat "$out/lintian.txt" >&2
        echo "scripts/deb.sh: lintian found errors" >&2
        exit 1
    }
    if grep -q '^[EWI]:' "$out/lintian.txt"; then
        grep '^[EWI]:' "$out/lintian.txt" | sed 's/^/  /'
        echo "  (explanations: $out/lintian.txt)"
    else
        echo "  clean"
    fi
fi

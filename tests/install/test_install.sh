#!/bin/sh
# `make install` into a scratch DESTDIR, and what a user of the installed tree meets:
#   test_install.sh <build dir> <source dir> <C compiler> <cmake> <prefix> <full libdir>
#                   <full bindir> <full includedir> <full mandir>
# (the build's CMAKE_INSTALL_PREFIX and CMAKE_INSTALL_FULL_*DIR: the paths the tree is staged
# under). It checks the files and symlinks, libixl's SONAME and that it exports exactly the
# versioned functions of src/ixl.map, that no installed ELF file points into the build tree,
# that ixl-info from the tree prints VERSION and lists the tree's own plugins, builds
# examples/copy.c and tests/install/plugins.c against the tree with pkg-config and with
# find_package(ixl) and runs them with a clean environment (no IXL_PLUGIN_DIR, nothing of the
# build tree), and renders the man pages (groff -ww: no warnings; man -l). Exit 77 (a failure
# under CI=true) when pkg-config, cmake, readelf, nm or groff is missing: scripts/deps.sh
# installs them.
set -eu
build=$1
src=$2
cc=$3
cmake=$4
prefix=$5
libdir=$6
bindir=$7
includedir=$8
mandir=$9

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
for tool in pkg-config "$cmake" readelf nm groff; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        [ "${CI:-}" = true ] && fail "no $tool (CI=true, and scripts/deps.sh test installs it)"
        echo "SKIP: no $tool (scripts/deps.sh test installs it)" >&2
        exit 77
    fi
done

version=$(cat "$src/VERSION")
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
tmp=$(mktemp -d /tmp/ixl_install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
lib=$root$libdir
plugindir=$libdir/ixl/plugins

# --- the install itself: what `make install DESTDIR=...` runs last -----------------------------
DESTDIR=$root "$cmake" --install "$build" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "cmake --install exited $?"; }
(cd "$root" && find . -type f -o -type l | sort) >"$tmp/files"
echo "installed under $root:"
cat "$tmp/files"
for f in "$bindir/ixl-info" "$bindir/ixlbench" "$includedir/ixl/ixl.h" \
    "$includedir/ixl/ixl_plugin.h" "$includedir/ixl/ixl_types.h" \
    "$libdir/libixl.so.$version" "$libdir/pkgconfig/ixl.pc" "$libdir/cmake/ixl/ixlConfig.cmake" \
    "$libdir/cmake/ixl/ixlConfigVersion.cmake" "$libdir/cmake/ixl/ixlTargets.cmake" \
    "$mandir/man1/ixl-info.1" "$mandir/man1/ixlbench.1" "$mandir/man3/ixl.3"; do
    [ -f "$root$f" ] || fail "$f not installed"
done
# The dynamic plugins the build made, each in the plugin directory.
for p in "$build"/lib/plugins/libixl_plugin_*.so; do
    [ -e "$p" ] || continue
    [ -f "$root$plugindir/${p##*/}" ] || fail "${p##*/} not installed into $plugindir"
done
# Nothing of the tests (their plugins, the simulated CUDA driver) is installed.
if grep -Eq 'TEST|BROKEN|CONF|COSTFAKE|OLDENGINE|cudasim' "$tmp/files"; then
    fail "a test file was installed"
fi

# --- the library: SONAME, symlinks, exported symbols -------------------------------------------
[ "$(readlink "$lib/libixl.so.$major")" = "libixl.so.$version" ] ||
    fail "libixl.so.$major does not point to libixl.so.$version"
[ "$(readlink "$lib/libixl.so")" = "libixl.so.$major" ] ||
    fail "libixl.so does not point to libixl.so.$major"
readelf -d "$lib/libixl.so.$version" | grep -q "(SONAME) *Library soname: \[libixl.so.$major\]" ||
    fail "SONAME of libixl.so.$version is not libixl.so.$major"
# Every defined dynamic symbol is a function of src/ixl.map with its version node, or a node.
nm -D --defined-only "$lib/libixl.so.$version" >"$tmp/nm"
if grep -Ev ' ixl_[a-z0-9_]+@@IXL_[0-9]+\.[0-9]+$| A IXL_[0-9]+\.[0-9]+$' "$tmp/nm"; then
    fail "libixl exports the symbols above, outside its version script"
fi
sed -n 's/.* \(ixl_[a-z0-9_]*\)@@IXL_.*/\1/p' "$tmp/nm" | sort >"$tmp/exported"
sed -n 's/^ *\(ixl_[a-z0-9_]*\);$/\1/p' "$src/src/ixl.map" | sort >"$tmp/map"
cmp -s "$tmp/exported" "$tmp/map" || {
    diff "$tmp/map" "$tmp/exported" || true
    fail "the exported functions differ from src/ixl.map (< map, > exported)"
}
echo "libixl.so.$version: SONAME libixl.so.$major, $(wc -l <"$tmp/exported") functions, versioned"

# No installed ELF file has an RPATH/RUNPATH into the build or source tree; one it has is
# $ORIGIN-relative.
for f in $(cd "$root" && find . -type f | sort); do
    head -c 4 "$root/$f" | grep -q 'ELF' || continue
    rp=$(readelf -d "$root/$f" | sed -n 's/.*(R[UN]*PATH) *Library r[un]*path: \[\(.*\)\]/\1/p')
    [ -z "$rp" ] && continue
    case "$rp" in
    *"$build"* | *"$src"*) fail "$f: RPATH/RUNPATH $rp points into the build tree" ;;
    \$ORIGIN*) echo "$f: RUNPATH $rp" ;;
    *) fail "$f: RPATH/RUNPATH $rp is not \$ORIGIN-relative" ;;
    esac
done

# --- the installed tools, with nothing of the build tree in the environment ------------------
# LD_LIBRARY_PATH: the tree's libdir (with a system libdir the tools have no RUNPATH, and an
# ixl installed on this machine must not stand in).
clean() { env -i PATH=/usr/bin:/bin HOME="$tmp" LD_LIBRARY_PATH="$lib" "$@"; }
out=$(cd "$tmp" && clean "$root$bindir/ixl-info" --version) || fail "ixl-info --version exited $?"
[ "$out" = "ixl $version" ] || fail "ixl-info --version printed '$out', not 'ixl $version'"
out=$(cd "$tmp" && clean "$root$bindir/ixl-info") || fail "ixl-info exited $?"
[ "$(echo "$out" | head -n 1)" = "ixl $version" ] || fail "ixl-info's first line: not ixl $version"
out=$(cd "$tmp" && clean "$root$bindir/ixlbench" --version) || fail "ixlbench --version exited $?"
echo "$out" | grep -q "(ixl $version)" || fail "ixlbench --version printed '$out'"
out=$(cd "$tmp" && clean "$root$bindir/ixl-info" --plugins) || fail "ixl-info --plugins exited $?"
echo "$out" | grep -E '^  [A-Z]' || true
for p in "$root$plugindir"/libixl_plugin_*.so; do
    [ -e "$p" ] || continue
    echo "$out" | grep -q "ABI [0-9.]*, $p\$" || fail "ixl-info from the tree does not list $p"
done
echo "$out" | grep -q "$build" && fail "ixl-info from the tree lists a plugin of the build tree"
# (A plugin of an ixl installed on this machine, in the compiled-in directory searched last, is
# refused as a duplicate name: fine. One of the tree's own must not be.)
echo "$out" | sed -n '/^refused/,$p' | grep -qF "  $root/" && fail "a tree's plugin refused"

# --- programs built against the tree ------------------------------------------------------------
# check_run <program>: copy runs; plugins loads the tree's libixl and lists its plugins.
check_run() {
    (cd "$tmp" && clean IXL_BACKENDS=NET "$1/copy") || fail "$1/copy exited $?"
    out=$(cd "$tmp" && clean "$1/plugins") || fail "$1/plugins exited $?"
    echo "$out"
    echo "$out" | grep -q "^libixl $version $lib/libixl.so.$major\$" ||
        fail "$1/plugins did not load $lib/libixl.so.$major"
    for p in "$root$plugindir"/libixl_plugin_*.so; do
        [ -e "$p" ] || continue
        echo "$out" | grep -q "^plugin [A-Z_]* $p\$" || fail "$1/plugins does not list $p"
    done
    echo "$out" | grep -qF "refused $root/" && fail "$1/plugins: a plugin of the tree was refused"
    return 0
}
# pkg-config: the .pc's paths under the staging root (PKG_CONFIG_SYSROOT_DIR, as for any
# DESTDIR or sysroot tree).
pc() { PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$lib/pkgconfig pkg-config "$@"; }
[ "$(pc --modversion ixl)" = "$version" ] || fail "pkg-config --modversion ixl is not $version"
[ "$(pc --variable=plugindir ixl)" = "$plugindir" ] ||
    [ "$(pc --variable=plugindir ixl)" = "$root$plugindir" ] ||
    fail "pkg-config --variable=plugindir ixl is $(pc --variable=plugindir ixl), not $plugindir"
flags="$(pc --cflags ixl) $(pc --libs ixl)"
echo "pkg-config --cflags --libs ixl: $flags"
mkdir "$tmp/pc"
for prog in copy plugins; do
    s=$src/examples/copy.c
    [ $prog = plugins ] && s=$src/tests/install/plugins.c
    # shellcheck disable=SC2086 # $flags: several words
    "$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/pc/$prog" "$s" $flags -Wl,-rpath,"$lib" ||
        fail "$prog does not build with pkg-config"
done
check_run "$tmp/pc"
echo "pkg-config: built and ran copy and plugins"

# CMake: find_package(ixl) through CMAKE_PREFIX_PATH, the imported target ixl::ixl.
"$cmake" -S "$src/tests/install/consumer" -B "$tmp/cm" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$root$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DIXL_WANT="$major.$minor" -DCOPY_C="$src/examples/copy.c" \
    -DPLUGINS_C="$src/tests/install/plugins.c" >"$tmp/cm.log" 2>&1 ||
    { cat "$tmp/cm.log"; fail "the consumer project does not configure"; }
grep "ixl $version from $root$libdir/cmake/ixl, plugins in $root$plugindir" "$tmp/cm.log" ||
    { cat "$tmp/cm.log"; fail "find_package(ixl) did not find the staged tree's $version"; }
"$cmake" --build "$tmp/cm" >"$tmp/cmb.log" 2>&1 ||
    { cat "$tmp/cmb.log"; fail "the consumer project does not build"; }
check_run "$tmp/cm"
echo "CMake: find_package(ixl) built and ran copy and plugins"

# --- man pages -------------------------------------------------------------------------------
for page in man1/ixl-info.1 man1/ixlbench.1 man3/ixl.3; do
    f=$root$mandir/$page
    w=$(groff -man -Tutf8 -ww -z "$f" 2>&1) || fail "groff failed on $page"
    [ -z "$w" ] || fail "groff warns on $page: $w"
    grep -q '@[A-Z_]*@' "$f" && fail "$page has an unfilled @VARIABLE@"
    out=$(MANWIDTH=80 groff -man -Tutf8 -P-cbou "$f" 2>/dev/null)
    echo "$out" | grep -q "^NAME" || fail "$page renders without NAME"
    echo "$out" | grep -q "ixl $version" || fail "$page does not carry version $version"
    if command -v man >/dev/null 2>&1; then
        MANWIDTH=80 man -P cat -l "$f" >/dev/null 2>"$tmp/man.err" || fail "man -l $page failed"
        [ -s "$tmp/man.err" ] && fail "man -l $page: $(cat "$tmp/man.err")"
    fi
done
# Every long option of the tools' --help is in their man page.
for tool in ixl-info ixlbench; do
    page=$(groff -man -Tutf8 -P-cbou "$root$mandir/man1/$tool.1" 2>/dev/null)
    for opt in $(clean "$root$bindir/$tool" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
        echo "$page" | grep -q -- "$opt" || fail "$tool's man page lacks $opt"
    done
done
echo "man pages: ixl-info(1), ixlbench(1), ixl(3) render without warnings"

# --- the tree moved elsewhere: the tools (RUNPATH $ORIGIN/...) and libixl (ixl/plugins next to
# itself) follow it ------------------------------------------------------------------------------
mv "$root" "$tmp/moved"
lib=$tmp/moved$libdir
out=$(cd "$tmp" && clean "$tmp/moved$bindir/ixl-info" --plugins) || fail "moved ixl-info exited $?"
for p in "$tmp/moved$plugindir"/libixl_plugin_*.so; do
    [ -e "$p" ] || continue
    echo "$out" | grep -q "ABI [0-9.]*, $p\$" || fail "ixl-info of the moved tree does not list $p"
done
echo "$out" | sed -n '/^refused/,$p' | grep -qF "  $tmp/moved/" && fail "a moved plugin refused"
echo "the tree moved to $tmp/moved: ixl-info lists its plugins from there"
echo "PASS"

#!/bin/sh
# ixl's Debian packages (debian/, scripts/deb.sh), built from this tree and used without
# installing them: each .deb is unpacked with `dpkg-deb -x` into a scratch root, then from
# that root
#   - ixl-info (ixl-tools) runs on libixl.so.0 (libixl0) and lists the UCX and OBJ plugins
#     (ixl-plugin-ucx, ixl-plugin-obj) from the root's plugin directory;
#   - examples/copy.c is built out of tree against the root's headers and libixl.so link
#     (libixl-dev), once with pkg-config (ixl.pc) and once with CMake (find_package(ixl)),
#     and both programs run;
#   - the Python package (python3-ixl) imports and loads the root's libixl.so.0;
#   - the packages' metadata: one version (VERSION) everywhere, the plugins' dependencies on
#     libucx and libcurl (shlibs), python3-ixl's on libixl0.
#
#   sh test_deb.sh <source dir> [JOBS]
#
# The packages are built here (scripts/deb.sh: dpkg-buildpackage, nocheck, noddebs, no lintian;
# JOBS jobs, 2 by default) unless IXL_DEB_DIR names a directory with packages built by
# `make deb` from the same tree.
# Exits 77 (skip) without dpkg-buildpackage/debhelper; under CI=true that is a failure
# (scripts/deps.sh test installs them).
set -eu
src=${1:?usage: test_deb.sh <source dir> [JOBS]}
jobs=${2:-2}
src=$(cd "$src" && pwd)

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
skip_unless_ci() {
    [ "${CI:-}" = true ] && fail "$* (a failure under CI=true)"
    echo "SKIP: $*" >&2
    exit 77
}

for tool in dpkg-deb dpkg-buildpackage dh dh_python3 pkg-config cmake cc /usr/bin/python3; do
    command -v "$tool" >/dev/null 2>&1 ||
        skip_unless_ci "$tool is missing (sh scripts/deps.sh test installs it)"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
version=$(tr -d ' \n' <"$src/VERSION")
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

t0=$(date +%s)
if [ -n "${IXL_DEB_DIR:-}" ]; then
    debs=$(cd "$IXL_DEB_DIR" && pwd)
    echo "packages from $debs (IXL_DEB_DIR)"
else
    debs=$tmp/debs
    # No -dbgsym packages (nothing here looks at them) and no lintian (make deb runs it). The
    # build gets 100 s of ctest's 120, so that a slow one fails here and leaves no scratch dir.
    rc=0
    DEB_BUILD_OPTIONS_EXTRA=noddebs LINTIAN=0 timeout -k 5 "${IXL_DEB_BUILD_S:-100}" \
        sh "$src/scripts/deb.sh" "$debs" "$jobs" || rc=$?
    [ "$rc" -ne 124 ] || fail "the package build took over ${IXL_DEB_BUILD_S:-100} s"
    [ "$rc" -eq 0 ] || fail "scripts/deb.sh failed"
fi
t1=$(date +%s)

deb_of() {
    set -- "$debs/${1}_${version}"-*_*.deb
    [ -f "$1" ] || fail "no package $(basename "$1") in $debs"
    echo "$1"
}
root=$tmp/root
for p in libixl0 libixl-dev ixl-tools python3-ixl ixl-plugin-ucx ixl-plugin-obj; do
    deb=$(deb_of "$p")
    v=$(dpkg-deb -f "$deb" Version)
    [ "${v%-*}" = "$version" ] || fail "$p: version $v, VERSION says $version"
    dpkg-deb -x "$deb" "$root"
done

# Where each file went: the plugins in their own packages only, the library in libixl0 only.
dpkg-deb -c "$(deb_of libixl0)" | grep -q "usr/lib/$arch/libixl.so.0 -> " ||
    fail "libixl0 has no libixl.so.0 link"
if dpkg-deb -c "$(deb_of libixl0)" | grep -q 'libixl_plugin_'; then
    fail "libixl0 carries a dynamic plugin: $(dpkg-deb -c "$(deb_of libixl0)" | grep plugin_)"
fi
dpkg-deb -c "$(deb_of libixl-dev)" | grep -q "usr/lib/$arch/libixl.so -> " ||
    fail "libixl-dev has no libixl.so link"
dep_ucx=$(dpkg-deb -f "$(deb_of ixl-plugin-ucx)" Depends)
dep_obj=$(dpkg-deb -f "$(deb_of ixl-plugin-obj)" Depends)
dep_py=$(dpkg-deb -f "$(deb_of python3-ixl)" Depends)
echo "$dep_ucx" | grep -q 'libucx0' || fail "ixl-plugin-ucx does not depend on libucx0: $dep_ucx"
echo "$dep_obj" | grep -q 'libcurl4' || fail "ixl-plugin-obj does not depend on libcurl4: $dep_obj"
echo "$dep_py" | grep -q 'libixl0' || fail "python3-ixl does not depend on libixl0: $dep_py"
# UCX stays optional: only its plugin's package brings it.
if dpkg-deb -f "$(deb_of libixl0)" Depends | grep -q 'libucx'; then
    fail "libixl0 depends on libucx"
fi

lib=$root/usr/lib/$arch
plugins=$lib/ixl/plugins
[ -f "$plugins/libixl_plugin_UCX.so" ] || fail "no $plugins/libixl_plugin_UCX.so"
[ -f "$plugins/libixl_plugin_OBJ.so" ] || fail "no $plugins/libixl_plugin_OBJ.so"

# ixl-info from the root: the root's libixl (LD_LIBRARY_PATH), which finds the plugins in
# ixl/plugins next to itself (no IXL_PLUGIN_DIR).
info=$(env -u IXL_PLUGIN_DIR LD_LIBRARY_PATH="$lib" "$root/usr/bin/ixl-info" 2>&1) ||
    fail "ixl-info from the root failed: $info"
echo "$info" | grep -q "^ixl $version" || fail "ixl-info does not print 'ixl $version': $info"
for p in UCX OBJ; do
    echo "$info" | grep -E "^  $p +version .*$plugins/libixl_plugin_$p.so" >/dev/null ||
        fail "ixl-info does not list $p from $plugins: $info"
done
# A plugin of an ixl installed on this machine (the compiled-in directory, searched last) may be
# refused as a duplicate; none of the root's may.
if echo "$info" | sed -n '/^refused (/,/^[a-z]/p' | grep -q "^  $root/"; then
    fail "ixl-info refused plugins of the root: $info"
fi
echo "ixl-info from the root lists UCX and OBJ from $plugins"

# The example, out of tree: pkg-config against the root (PKG_CONFIG_SYSROOT_DIR prefixes the
# .pc's absolute paths), then CMake with the root as the prefix to search.
cp "$src/examples/copy.c" "$tmp/copy.c"
pc_flags=$(env PKG_CONFIG_LIBDIR="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root" \
    pkg-config --cflags --libs ixl) || fail "pkg-config finds no ixl in $lib/pkgconfig"
case $pc_flags in *"$root/usr/include"*) ;; *) fail "pkg-config's flags miss the root: $pc_flags" ;; esac
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror -o "$tmp/copy_pc" "$tmp/copy.c" $pc_flags ||
    fail "the example does not build with pkg-config ($pc_flags)"
cat >"$tmp/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(ixl_example C)
find_package(ixl REQUIRED)
add_executable(copy_cmake copy.c)
target_link_libraries(copy_cmake PRIVATE ixl::ixl)
EOF
cmake -S "$tmp" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_FIND_ROOT_PATH="$root" \
    >"$tmp/cmake.log" 2>&1 || fail "find_package(ixl) in the root: $(cat "$tmp/cmake.log")"
cmake --build "$tmp/b" >>"$tmp/cmake.log" 2>&1 ||
    fail "the example does not build with CMake: $(cat "$tmp/cmake.log")"
for exe in "$tmp/copy_pc" "$tmp/b/copy_cmake"; do
    # The library the example was linked against and runs with is the root's.
    ldd_out=$(LD_LIBRARY_PATH="$lib" ldd "$exe")
    echo "$ldd_out" | grep -q "libixl.so.0 => $lib/libixl.so.0" ||
        fail "$exe does not load $lib/libixl.so.0: $ldd_out"
    out=$(env -u IXL_PLUGIN_DIR LD_LIBRARY_PATH="$lib" IXL_BACKENDS=NET "$exe" 2>&1) ||
        fail "$exe failed: $out"
done
echo "the example builds against the root with pkg-config and with CMake, and runs"

# Python: python3-ixl finds libixl.so.0 through the loader (here LD_LIBRARY_PATH, installed:
# ld.so.cache); the version is the library's.
py=$(env -u PYTHONPATH -u IXL_LIBRARY -u IXL_BUILD_DIR -u IXL_PLUGIN_DIR \
    PYTHONPATH="$root/usr/lib/python3/dist-packages" LD_LIBRARY_PATH="$lib" \
    /usr/bin/python3 -c '
import importlib.metadata, ixl
maps = [l.split()[-1] for l in open("/proc/self/maps") if "/libixl.so" in l]
print(ixl.__file__, maps[0], ixl.version(), importlib.metadata.version("ixl"),
      ",".join(sorted(ixl.plugin_list())))
' 2>&1) || fail "python3-ixl from the root: $py"
# shellcheck disable=SC2086
set -- $py
[ "$1" = "$root/usr/lib/python3/dist-packages/ixl/__init__.py" ] || fail "ixl imported from $1"
[ "$(realpath "$2")" = "$(realpath "$lib/libixl.so.0")" ] || fail "python loaded $2"
if [ "$3" != "$version" ] || [ "$4" != "$version" ]; then
    fail "python: library $3, package $4, VERSION $version"
fi
for p in OBJ UCX; do
    case ",$5," in *",$p,"*) ;; *) fail "python's plugin_list() lacks $p: $5" ;; esac
done
echo "python3-ixl imports from the root and loads its libixl.so.0 ($3; plugins $5)"

t2=$(date +%s)
echo "PASS: package build $((t1 - t0)) s, checks $((t2 - t1)) s"

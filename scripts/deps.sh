#!/bin/sh
# Installs the Debian packages ixl needs for a goal ("build", "test", "run", "deb") when missing.
# As root it runs apt-get; otherwise it says what to install and fails.
#   deps.sh GOAL [--log FILE]   --log: one line of output (make run); apt-get's output goes
#                               to FILE, and only its tail is shown, when it fails
set -eu
goal=${1:-build}
log=""
[ "${2:-}" = --log ] && log=${3:?deps.sh: --log needs a file}

pkgs="cmake make gcc libc6-dev pkg-config liburing-dev libucx-dev ucx-utils libcurl4-openssl-dev zlib1g-dev libjansson-dev libssl-dev"
case "$goal" in
test) pkgs="$pkgs g++ clang clang-format libclang-rt-14-dev iproute2 gnuplot-nox e2fsprogs util-linux etcd-server curl abigail-tools python3-botocore openssl" ;;
run | plot) pkgs="$pkgs gnuplot-nox" ;; # ixlbench --plot (make run draws the sweep)
esac
# The Python binding's tests (tests/python): pytest, numpy, torch; venv + offline pip install
# (python3-pip builds the wheels of bindings/python and bindings/python-nixl for an isolated venv).
case "$goal" in
test) pkgs="$pkgs python3 python3-numpy python3-pytest python3-torch python3-venv python3-setuptools python3-wheel python3-pip" ;;
wheel) pkgs="$pkgs python3 python3-setuptools python3-wheel python3-pip" ;; # make wheel
esac
# tests/install (make install into a scratch root): the man pages rendered (groff -ww, man -l).
case "$goal" in
test) pkgs="$pkgs groff-base man-db" ;;
esac

# Debian packages (make deb; the package test tests/deb in make test): debhelper, lintian.
case "$goal" in
# build-essential: dpkg-buildpackage checks it as an implicit build dependency.
test) pkgs="$pkgs build-essential debhelper dpkg-dev fakeroot dh-python python3-setuptools python3-wheel" ;;
deb) pkgs="$pkgs build-essential debhelper dpkg-dev fakeroot dh-python python3 python3-setuptools python3-wheel lintian" ;;
esac

missing=""
# The OBJ tests' S3 server (s3rver, tests/s3/setup.sh) runs on Node: Debian's nodejs and npm,
# unless node and npm are already there (NodeSource's nodejs provides npm and conflicts with
# Debian's npm package).
if [ "$goal" = test ]; then
    command -v node >/dev/null 2>&1 || missing="$missing nodejs"
    command -v npm >/dev/null 2>&1 || missing="$missing npm"
fi
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
# After the packages (below): s3rver from the committed lockfile (offline once installed).
s3rver() {
    [ "$goal" = test ] || return 0
    sh "$(dirname "$0")/../tests/s3/setup.sh" || echo "warning: s3rver not installed: the OBJ tests will skip (fail under CI=true)" >&2
}
if [ -z "$missing" ]; then
    [ -z "$log" ] || echo "packages: the $(echo "$pkgs" | wc -w) Debian packages ixl needs are installed"
    s3rver
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "ixl needs these Debian packages:$missing" >&2
    echo "install them with: sudo apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [ -n "$log" ]; then
    printf 'packages: installing %s Debian packages (apt-get; log: %s) ... ' \
        "$(echo "$missing" | wc -w)" "$log"
    t0=$(date +%s)
    echo "installing:$missing" >"$log"
    # shellcheck disable=SC2086
    if { apt-get update -q && apt-get install -y -q --no-install-recommends $missing; } >>"$log" 2>&1; then
        echo "done, $(($(date +%s) - t0)) s"
        s3rver
        exit 0
    fi
    echo "FAILED"
    tail -n 20 "$log" >&2
    echo "packages: apt-get failed (the whole log: $log)" >&2
    exit 1
fi
echo "installing:$missing"
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
s3rver

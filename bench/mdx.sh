#!/bin/sh
# Time to publish and to fetch an agent's metadata with REGIONS registered regions (10^4 by
# default), through the peer listener and through etcd: a private etcd on 127.0.0.1 started
# here (temporary directory, free ports), and bench_mdx (bench/bench_mdx.c) with two agents.
# Absolute times (CPU and loopback costs, no baseline needed): median and min of ROUNDS.
#
#   sh bench/mdx.sh            knobs: BUILD_DIR (default build), REGIONS (10000), ROUNDS (5)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
regions=${REGIONS:-10000}
rounds=${ROUNDS:-5}
[ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target bench_mdx >/dev/null
etcd=$(command -v etcd || true)
[ -n "$etcd" ] || { echo "mdx.sh: etcd is not installed (apt-get install etcd-server)" >&2; exit 1; }
dir=$(mktemp -d /tmp/ixl-mdx.XXXXXX)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
cport=$(port)
pport=$(port)
"$etcd" --data-dir "$dir/data" --listen-client-urls "http://127.0.0.1:$cport" \
    --advertise-client-urls "http://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "default=http://127.0.0.1:$pport" >"$dir/etcd.log" 2>&1 &
epid=$!
trap 'kill $epid 2>/dev/null; wait $epid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 200); do
    curl -sf "http://127.0.0.1:$cport/health" >/dev/null 2>&1 && break
    sleep 0.1
done
echo "metadata exchange: $regions regions, $rounds rounds, etcd $("$etcd" --version | head -1)"
"$build/bench/bench_mdx" "$regions" "$rounds" "http://127.0.0.1:$cport"

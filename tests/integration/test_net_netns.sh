#!/bin/sh
# NET over a real link: two network namespaces joined by a veth pair, a target agent in one
# and an initiator in the other (net_ns_peer), each bound to its namespace's veth address, the
# initiator forced onto path=tcp. The initiator READs and WRITEs 16 MiB with data checks and
# sends notifications; metadata goes through a file in a temporary directory.
#
#   sh test_net_netns.sh <net_ns_peer binary>
#
# Needs root and iproute2 (`ip`). Exits 77 (skip) without them or when the kernel refuses
# namespaces or veth; under CI=true as root, a missing `ip` or a refused namespace is a
# failure, since CI is set up to have both.
set -u
peer=${1:?usage: test_net_netns.sh <net_ns_peer binary>}

. "$(dirname "$0")/netns_pair.sh"
tpid=
vpid=
netns_pair "N" 77
echo "namespaces $ns_a ($addr_a, target) and $ns_b ($addr_b, initiator)"

ip netns exec "$ns_a" "$peer" target "$dir" "$addr_a" >"$dir/target.log" 2>&1 &
tpid=$!
ip netns exec "$ns_b" "$peer" initiator "$dir" "$addr_b" >"$dir/initiator.log" 2>&1
irc=$?
# A side that fails leaves $dir/failed, and the other stops waiting for it.
[ "$irc" -eq 0 ] || touch "$dir/failed"
wait "$tpid"
trc=$?
tpid=
echo "--- target (exit $trc)"
cat "$dir/target.log"
echo "--- initiator (exit $irc)"
cat "$dir/initiator.log"
[ "$irc" -eq 0 ] || fail "the initiator failed"
[ "$trc" -eq 0 ] || fail "the target failed"
echo ok

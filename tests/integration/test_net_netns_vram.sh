#!/bin/sh
# NET's staged VRAM (tcp-staged, issue 20) between two network namespaces on the simulated
# device: two namespaces joined by a veth pair; in one, the target agent "nsv-t" (its device
# copies slowed to 5 ms each) and the victim "nsv-v" (30 ms each); in the other, the initiator
# (net_ns_vram.c says what each checks). Every process has its own simulated device memory.
# The agents keep path=auto and local_paths=1: across namespaces NET's same-node channel has no
# answer, so the path must be tcp-staged, never CUDA IPC or shm. The initiator kills the
# victim mid-transfer.
#
#   sh test_net_netns_vram.sh <net_ns_vram binary>
#
# IXL_CUDA_LIBRARY must name the simulated driver (ctest sets it). Needs root and iproute2
# (`ip`). Exits 77 (skip) without them or when the kernel refuses namespaces or veth; under
# CI=true as root, a missing `ip`, a refused namespace or a missing simulated driver is a
# failure, since CI is set up to have them.
set -u
peer=${1:?usage: test_net_netns_vram.sh <net_ns_vram binary>}

. "$(dirname "$0")/netns_pair.sh"
tpid=
vpid=
netns_pair "V" 78
[ -r "${IXL_CUDA_LIBRARY:-}" ] ||
    skip_unless_ci "IXL_CUDA_LIBRARY does not name the simulated device (ctest sets it)"
echo "namespaces $ns_a ($addr_a: nsv-t, nsv-v) and $ns_b ($addr_b: the initiator)"

IXL_CUDASIM_DELAY_US=5000 ip netns exec "$ns_a" "$peer" target "$dir" "$addr_a" nsv-t \
    >"$dir/target.log" 2>&1 &
tpid=$!
IXL_CUDASIM_DELAY_US=30000 ip netns exec "$ns_a" "$peer" target "$dir" "$addr_a" nsv-v \
    >"$dir/victim.log" 2>&1 &
vpid=$!
t0=$(date +%s)
ip netns exec "$ns_b" "$peer" initiator "$dir" "$addr_b" >"$dir/initiator.log" 2>&1
irc=$?
# A side that fails leaves $dir/failed, and the others stop waiting for it.
[ "$irc" -eq 0 ] || touch "$dir/failed"
wait "$tpid"
trc=$?
tpid=
# The victim dies of the initiator's SIGKILL (ip netns exec execs it: $vpid is its pid); after
# a failure it may still wait for an initiator.
[ "$irc" -eq 0 ] || kill -9 "$vpid" 2>/dev/null
wait "$vpid"
vrc=$?
vpid=
echo "--- target nsv-t (exit $trc)"
cat "$dir/target.log"
echo "--- victim nsv-v (exit $vrc; 137: killed by the initiator, as it should be)"
cat "$dir/victim.log"
echo "--- initiator (exit $irc, $(($(date +%s) - t0)) s)"
cat "$dir/initiator.log"
[ "$irc" -eq 0 ] || fail "the initiator failed"
[ "$trc" -eq 0 ] || fail "the target failed"
[ "$vrc" -eq 137 ] || fail "the victim ended with $vrc, not by the initiator's SIGKILL (137)"
echo ok

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

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
skip() {
    echo "SKIP: $*" >&2
    exit 77
}
skip_unless_ci() {
    if [ "${CI:-}" = true ] && [ "$(id -u)" -eq 0 ]; then
        fail "$* (CI=true and root: this must work there)"
    fi
    skip "$*"
}

[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null 2>&1 || skip_unless_ci "ip (iproute2) is not installed"
[ -x "$peer" ] || fail "$peer is not an executable"

id=$$
ns_a=ixlA$id
ns_b=ixlB$id
veth_a=ixva$id
veth_b=ixvb$id
x=$((id % 250 + 1))
addr_a=10.77.$x.1
addr_b=10.77.$x.2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ixl_netns.XXXXXX") || fail "mktemp"
tpid=

cleanup() {
    [ -n "$tpid" ] && kill "$tpid" 2>/dev/null
    ip netns del "$ns_a" 2>/dev/null
    ip netns del "$ns_b" 2>/dev/null
    ip link del "$veth_a" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ip netns add "$ns_a" 2>"$dir/err" || skip_unless_ci "ip netns add failed: $(cat "$dir/err")"
ip netns add "$ns_b" 2>"$dir/err" || skip_unless_ci "ip netns add failed: $(cat "$dir/err")"
ip link add "$veth_a" type veth peer name "$veth_b" 2>"$dir/err" ||
    skip_unless_ci "cannot create a veth pair: $(cat "$dir/err")"
ip link set "$veth_a" netns "$ns_a" || fail "moving $veth_a into $ns_a"
ip link set "$veth_b" netns "$ns_b" || fail "moving $veth_b into $ns_b"
ip -n "$ns_a" addr add "$addr_a/24" dev "$veth_a" || fail "address of $veth_a"
ip -n "$ns_b" addr add "$addr_b/24" dev "$veth_b" || fail "address of $veth_b"
up() {
    ip -n "$1" link set "$2" up || fail "cannot bring $2 up in $1"
}
up "$ns_a" lo
up "$ns_a" "$veth_a"
up "$ns_b" lo
up "$ns_b" "$veth_b"
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

# Sourced by the tests that run agents in two network namespaces (test_net_netns.sh,
# test_net_netns_vram.sh): fail, skip and skip_unless_ci, and netns_pair, which makes the pair.
#
#   netns_pair TAG SUBNET   (after setting $peer; e.g. netns_pair V 78)
#
# makes namespaces $ns_a and $ns_b (ixl<TAG>A<pid>, ixl<TAG>B<pid>) joined by a veth pair
# ($veth_a in $ns_a at $addr_a, $veth_b in $ns_b at $addr_b: 10.SUBNET.x.1 and .2 with x from
# the pid, so suites side by side do not collide), a scratch directory $dir, and an EXIT trap
# that kills $tpid and $vpid (when set), deletes both namespaces and the veth pair and removes
# $dir. It skips (exit 77) when not root, without `ip` or when the kernel refuses namespaces or
# veth; under CI=true as root the last two are failures, since CI is set up to have them.

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

netns_cleanup() {
    [ -n "${tpid:-}" ] && kill "$tpid" 2>/dev/null
    [ -n "${vpid:-}" ] && kill -9 "$vpid" 2>/dev/null
    ip netns del "$ns_a" 2>/dev/null
    ip netns del "$ns_b" 2>/dev/null
    ip link del "$veth_a" 2>/dev/null
    rm -rf "$dir"
}

netns_up() {
    ip -n "$1" link set "$2" up || fail "cannot bring $2 up in $1"
}

netns_pair() {
    [ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
    command -v ip >/dev/null 2>&1 || skip_unless_ci "ip (iproute2) is not installed"
    [ -x "$peer" ] || fail "$peer is not an executable"
    id=$$
    ns_a=ixl${1}A$id
    ns_b=ixl${1}B$id
    veth_a=ix${1}a$id
    veth_b=ix${1}b$id
    x=$((id % 250 + 1))
    addr_a=10.$2.$x.1
    addr_b=10.$2.$x.2
    dir=$(mktemp -d "${TMPDIR:-/tmp}/ixl_netns.XXXXXX") || fail "mktemp"
    trap netns_cleanup EXIT
    trap 'exit 1' INT TERM HUP

    ip netns add "$ns_a" 2>"$dir/err" || skip_unless_ci "ip netns add failed: $(cat "$dir/err")"
    ip netns add "$ns_b" 2>"$dir/err" || skip_unless_ci "ip netns add failed: $(cat "$dir/err")"
    ip link add "$veth_a" type veth peer name "$veth_b" 2>"$dir/err" ||
        skip_unless_ci "cannot create a veth pair: $(cat "$dir/err")"
    ip link set "$veth_a" netns "$ns_a" || fail "moving $veth_a into $ns_a"
    ip link set "$veth_b" netns "$ns_b" || fail "moving $veth_b into $ns_b"
    ip -n "$ns_a" addr add "$addr_a/24" dev "$veth_a" || fail "address of $veth_a"
    ip -n "$ns_b" addr add "$addr_b/24" dev "$veth_b" || fail "address of $veth_b"
    netns_up "$ns_a" lo
    netns_up "$ns_a" "$veth_a"
    netns_up "$ns_b" lo
    netns_up "$ns_b" "$veth_b"
}

#!/bin/sh
# ixlbench's device mode on the simulated device (IXL_CUDA_LIBRARY, set by ctest): VRAM to VRAM
# and the mixed pairs in one agent, data checked through ixl_device_copy (the sim's device
# memory faults if touched); two GPUs (--initiator-dev/--target-dev); the corrupt flag failing
# the checks; no device (exit 77 with the reason); usage refused; two processes (--role) through
# CUDA IPC, the sweep and the KV scenario (and the KV scenario staged over TCP). Exit 0 pass,
# 1 fail, 77 skip.
set -u
bench=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_ixlbench_vram.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
[ -r "${IXL_CUDA_LIBRARY:-}" ] || {
    echo "SKIP: IXL_CUDA_LIBRARY does not name the simulated device (ctest sets it)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
}
small="--block 4K --block-max 16K --iters 4 --warmup 1 --no-progress --csv"

run() { # name, expected exit status, [VAR=VALUE...] ixlbench's arguments...
    name=$1 want=$2
    shift 2
    env "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    cat "$tmp/$name.out"
    [ $rc -eq "$want" ] || fail "$name: exit $rc, want $want: $(cat "$tmp/$name.err")"
}

# shellcheck disable=SC2086
run vv 0 "$bench" --initiator-mem VRAM --target-mem VRAM $small
grep -q '^sweep,READ,plain,local-cuda,4096,.*,pass$' "$tmp/vv.out" || fail "VRAM->VRAM READ row"
grep -q '^sweep,WRITE,plain,local-cuda,16384,.*,pass$' "$tmp/vv.out" || fail "VRAM->VRAM WRITE row"
# shellcheck disable=SC2086
run dv 0 "$bench" --initiator-mem DRAM --target-mem VRAM --api prep --threads 2 --depth 2 --batch 3 $small
# shellcheck disable=SC2086
run vd 0 "$bench" --initiator-mem VRAM --target-mem DRAM --depth 4 --reuse $small
for f in dv vd; do
    [ "$(grep -c ',local-cuda,.*,pass$' "$tmp/$f.out")" -eq 6 ] || fail "$f: want 6 passing rows"
done
# Two simulated GPUs: initiator on GPU 1, target on GPU 0.
# shellcheck disable=SC2086
run two 0 IXL_CUDASIM_DEVICES=2 "$bench" --initiator-mem VRAM --initiator-dev 1 --target-mem VRAM $small
run nogpu1 1 IXL_CUDASIM_DEVICES=1 "$bench" --initiator-mem VRAM --initiator-dev 1
grep -q "there is 1 GPU" "$tmp/nogpu1.err" || fail "--initiator-dev 1 of 1 GPU: $(cat "$tmp/nogpu1.err")"
# Checks that must fail: a byte flipped in the source (WRITE) and the destination (READ).
# shellcheck disable=SC2086
run bad 1 "$bench" --initiator-mem VRAM --target-mem VRAM --corrupt-for-test $small
grep -q "READ.*FAIL" "$tmp/bad.out" || fail "corrupt READ not detected"
grep -q "WRITE.*FAIL" "$tmp/bad.out" || fail "corrupt WRITE not detected"
grep -q "byte .* of the target's VRAM" "$tmp/bad.err" || fail "no check message: $(cat "$tmp/bad.err")"
# No device: exit 77 with the driver's reason.
run nodev 77 IXL_CUDASIM_NO_DEVICE=1 "$bench" --initiator-mem VRAM --target-mem VRAM
grep -q "VRAM needs a GPU, and there is none: .*CUDA_ERROR_NO_DEVICE" "$tmp/nodev.err" ||
    fail "no device: $(cat "$tmp/nodev.err")"
# Usage.
# Two processes (--role): VRAM <-> VRAM and DRAM -> VRAM through CUDA IPC (issue 20), path
# cuda-ipc, data checked by the target through ixl_device_copy.
for pair in "VRAM VRAM" "DRAM VRAM"; do
    # shellcheck disable=SC2086
    set -- $pair
    rm -f "$tmp/md"
    "$bench" --role target --target-mem "$2" --md-file "$tmp/md" >"$tmp/tgt.out" 2>"$tmp/tgt.err" &
    tpid=$!
    # shellcheck disable=SC2086
    run "ipc$1" 0 "$bench" --role initiator --initiator-mem "$1" --target-mem "$2" \
        --md-file "$tmp/md" $small
    wait $tpid || fail "the target of $1 -> $2 exited $?: $(cat "$tmp/tgt.err")"
    [ "$(grep -c ',cuda-ipc,.*,pass$' "$tmp/ipc$1.out")" -eq 6 ] ||
        fail "$1 -> $2 between two processes: want 6 passing cuda-ipc rows"
done
# The KV scenario between two processes (issue 20), small: VRAM <-> VRAM and DRAM <- VRAM
# through CUDA IPC, VRAM <-> VRAM staged over loopback TCP with same-node paths off (both
# agents), and a flipped byte failing the checks. Every variant's data checked (the target
# fills through ixl_device_copy, the initiator poisons and reads back through it), the path
# reported; the memcpy references become device copies (ixl_device_copy).
kvs="--scenario kv --kv-regions 4 --kv-blocks 16 --kv-block-size 4K --kv-req-blocks 8"
kvs="$kvs --kv-iters 2 --no-progress --csv"
for c in "VRAM VRAM cuda-ipc" "DRAM VRAM cuda-ipc" "VRAM VRAM tcp-staged" "VRAM VRAM corrupt"; do
    # shellcheck disable=SC2086
    set -- $c
    topt="" iopt="" want=0 path=$3
    [ "$3" = tcp-staged ] && topt="--opt local_paths=0" iopt="--opt local_paths=0"
    [ "$3" = corrupt ] && iopt="--corrupt-for-test" want=1 path=cuda-ipc
    rm -f "$tmp/md"
    # shellcheck disable=SC2086
    "$bench" --role target --target-mem "$2" --md-file "$tmp/md" $topt >"$tmp/tgt.out" 2>"$tmp/tgt.err" &
    tpid=$!
    # shellcheck disable=SC2086
    run "kv$1$3" $want "$bench" --role initiator --initiator-mem "$1" --target-mem "$2" \
        --md-file "$tmp/md" $kvs $iopt
    wait $tpid || fail "the KV target of $c exited $?: $(cat "$tmp/tgt.err")"
    out=$tmp/kv$1$3.out
    if [ "$3" = corrupt ]; then
        [ "$(grep -c "^kv-[a-z]*,READ,[a-z]*,$path,.*,FAIL$" "$out")" -eq 4 ] ||
            fail "KV: the flipped byte failed $(grep -c ',FAIL$' "$out") of 4 rows"
        continue
    fi
    for v in random sequential merged single; do
        grep -q "^kv-$v,READ,[a-z]*,$path,.*,pass$" "$out" || fail "KV $c: no passing $v row"
    done
    for v in random single; do
        grep -q "^kv-devcopy-$v,READ,[a-z]*,device-copy," "$out" || fail "KV $c: no devcopy-$v row"
    done
done
run kvdev 2 "$bench" --target-mem VRAM --scenario kv
grep -q "KV scenario with VRAM runs between two processes" "$tmp/kvdev.err" ||
    fail "KV in device mode: $(cat "$tmp/kvdev.err")"
run file 2 "$bench" --initiator-mem VRAM --target-mem FILE --target-dev 1
# Issue 21: VRAM <-> FILE (storage mode, POSIX's staged path): buffered and direct I/O, forced
# and chosen by the core (--backend auto: the path column names the backend), checks that fail.
sf="--file $tmp/vf --block 64K --block-max 256K --iters 3 --warmup 1 --no-progress --csv"
# shellcheck disable=SC2086
run vf 0 "$bench" --initiator-mem VRAM --target-mem FILE $sf
[ "$(grep -c '^sweep,.*,staged,.*,pass$' "$tmp/vf.out")" -eq 6 ] || fail "VRAM<->FILE: want 6 rows"
# Direct I/O where the temporary directory's filesystem has it (tmpfs may refuse O_DIRECT).
# shellcheck disable=SC2086
if "$bench" --initiator-mem VRAM --target-mem FILE --direct $sf >"$tmp/vfd.out" 2>"$tmp/vfd.err"; then
    [ "$(grep -c '^sweep,.*,staged,.*,pass$' "$tmp/vfd.out")" -eq 6 ] || fail "direct: want 6 rows"
elif grep -q "direct I/O" "$tmp/vfd.err"; then
    echo "direct I/O not tested: $(head -n 1 "$tmp/vfd.err")"
else
    fail "VRAM<->FILE direct: $(cat "$tmp/vfd.err")"
fi
# shellcheck disable=SC2086
run vfa 0 "$bench" --initiator-mem VRAM --target-mem FILE --backend auto $sf
[ "$(grep -c '^sweep,.*,POSIX:staged,.*,pass$' "$tmp/vfa.out")" -eq 6 ] || fail "auto: want 6 rows"
# shellcheck disable=SC2086
run vfbad 1 "$bench" --initiator-mem VRAM --target-mem FILE --corrupt-for-test $sf
grep -q "READ.*FAIL" "$tmp/vfbad.out" || fail "VRAM<->FILE: corrupt READ not detected"
grep -q "WRITE.*FAIL" "$tmp/vfbad.out" || fail "VRAM<->FILE: corrupt WRITE not detected"
run devonly 2 "$bench" --target-dev 1
echo ok

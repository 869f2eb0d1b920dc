#!/bin/sh
# ixl-info lists the test plugin with its options, each broken plugin as refused with its
# reason, the configuration, and names status codes.
set -u
info=$1
dir=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(IXL_PLUGIN_DIR="$dir" "$info") || fail "ixl-info exited $?"
echo "$out"
echo "$out" | grep -q "^  TEST " || fail "TEST plugin not listed"
echo "$out" | grep -q "option delay_us" || fail "TEST options not listed"
echo "$out" | grep -q "capabilities: local,remote,notif,progress" || fail "capabilities"
for f in BROKEN_NOSYM BROKEN_ABI BROKEN_SMALL BROKEN_NONOTIF BROKEN_OPTS TESTDUP; do
    echo "$out" | grep -A1 "libixl_plugin_$f.so" | grep -q "refused: " ||
        fail "$f not listed as refused with a reason"
done
echo "$out" | grep -q "IXL_PLUGIN_DIR *= \"$dir\"" || fail "configuration not printed"
[ "$("$info" --strerror -500)" = "-500 IXL_ERR_NOT_FOUND" ] || fail "--strerror -500"
"$info" --strerror 12345 >/dev/null && fail "--strerror of an unknown status must fail"
"$info" --bogus 2>/dev/null && fail "an unknown option must fail"
echo ok

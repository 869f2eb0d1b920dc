#!/bin/sh
# Checks (check) or applies (fix) the checked-in .clang-format on every C file of the tree.
set -eu
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
[ -n "$files" ] || exit 0
if [ "${1:-check}" = fix ]; then
    # shellcheck disable=SC2086
    clang-format -i $files
    exit 0
fi
bad=""
for f in $files; do
    [ -f "$f" ] || continue
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
done
if [ -n "$bad" ]; then
    echo "clang-format disagrees with:$bad" >&2
    echo "run: make format" >&2
    exit 1
fi
echo "format: ok"

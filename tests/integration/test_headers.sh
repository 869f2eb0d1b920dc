#!/bin/sh
# The public headers compile as their top comments claim.
#   test_headers.sh c   <include dir> <C compiler>    C99 and C11, -pedantic -Wall -Wextra -Werror
#   test_headers.sh c++ <include dir> <C++ compiler>  C++11 and C++17, the same flags
# Each header alone and all three together, plus a small plugin that uses the macros
# (IXL_PLUGIN_EXPORT, IXL_ENGINE_OPS_MIN_SIZE, IXL_MEM_BIT) and a program that uses ixl.h's
# types; in C++ the plugin's entry must keep its C name. Exits 77 when the compiler is missing.
set -eu
mode=$1
inc=$2
cc=$3

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

if ! command -v "$cc" >/dev/null 2>&1; then
    # The project installs g++ (scripts/deps.sh test): under CI a missing one is a failure.
    [ "${CI:-}" = true ] && fail "no $cc (CI=true, and scripts/deps.sh test installs g++)"
    echo "SKIP: no $cc (scripts/deps.sh test installs g++)" >&2
    exit 77
fi

tmp=$(mktemp -d /tmp/ixl_headers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The plugin and the program are the same text in C and C++ (no designated initializers:
# C++ has them from C++20 only).
cat >"$tmp/plugin.inc" <<'EOF'
#include <ixl/ixl_plugin.h>

static int hp_check(struct ixl_engine *e, struct ixl_req *req)
{
    (void)e;
    (void)req;
    return IXL_OK;
}

static struct ixl_engine_ops hp_ops;
static struct ixl_plugin_desc hp_desc;

static const struct ixl_plugin_desc *hp_entry(void)
{
    hp_ops.size = (uint32_t)IXL_ENGINE_OPS_MIN_SIZE;
    hp_ops.check_xfer = hp_check;
    hp_desc.abi_major = IXL_PLUGIN_ABI_MAJOR;
    hp_desc.abi_minor = IXL_PLUGIN_ABI_MINOR;
    hp_desc.size = (uint32_t)sizeof(hp_desc);
    hp_desc.name = "HEADERS";
    hp_desc.caps = IXL_CAP_LOCAL;
    hp_desc.mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM);
    hp_desc.ops = &hp_ops;
    return &hp_desc;
}

IXL_PLUGIN_EXPORT(hp_entry)
EOF
cat >"$tmp/program.inc" <<'EOF'
#include <ixl/ixl.h>

int main(void)
{
    struct ixl_notif_batch *b = NULL;
    struct ixl_reg_desc d = {0, 0, 0, NULL, 0};
    (void)d;
    return b == NULL && IXL_OK == 0 ? 0 : (int)sizeof(b->items[0]);
}
EOF

case "$mode" in
c)
    stds="c99 c11"
    ext=c
    extra="-Wstrict-prototypes -Wmissing-prototypes"
    ;;
c++)
    stds="c++11 c++17"
    ext=cc
    extra=""
    ;;
*) fail "mode must be c or c++, not $mode" ;;
esac

n=0
for std in $stds; do
    flags="-std=$std -pedantic -Wall -Wextra -Werror $extra -I$inc"
    for h in ixl_types.h ixl_plugin.h ixl.h all; do
        if [ "$h" = all ]; then
            printf '#include <ixl/ixl.h>\n#include <ixl/ixl_plugin.h>\n#include <ixl/ixl_types.h>\n' >"$tmp/h.$ext"
        else
            printf '#include <ixl/%s>\n' "$h" >"$tmp/h.$ext"
        fi
        # shellcheck disable=SC2086
        "$cc" $flags -fsyntax-only "$tmp/h.$ext" || fail "$h does not compile with $cc -std=$std"
        n=$((n + 1))
    done
    cp "$tmp/plugin.inc" "$tmp/plugin.$ext"
    # shellcheck disable=SC2086
    "$cc" $flags -fPIC -fvisibility=hidden -c "$tmp/plugin.$ext" -o "$tmp/plugin.o" ||
        fail "a plugin using ixl_plugin.h's macros does not compile with $cc -std=$std"
    if command -v nm >/dev/null 2>&1; then
        nm -g --defined-only "$tmp/plugin.o" | grep -q ' T ixl_plugin_entry$' ||
            fail "$cc -std=$std: the plugin does not export ixl_plugin_entry under its C name"
    fi
    cp "$tmp/program.inc" "$tmp/program.$ext"
    # shellcheck disable=SC2086
    "$cc" $flags -c "$tmp/program.$ext" -o "$tmp/program.o" ||
        fail "a program using ixl.h does not compile with $cc -std=$std"
    n=$((n + 2))
done
echo "ok: $n compilations with $cc ($stds)"

#!/bin/sh
# Installs the s3rver S3 server the OBJ tests start (tests/s3/package-lock.json, committed) into
# DIR with `npm ci`: $1, else $IXL_S3RVER_DIR, else ~/.cache/ixl/s3rver (the default the tests
# look in; tests/s3/s3rver_ctl.h). Does nothing when DIR already holds this lockfile's install,
# so later runs are offline. scripts/deps.sh test runs it; needs node and npm (Debian nodejs,
# npm), about 30 s on a fresh machine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${IXL_S3RVER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ixl/s3rver}}
sum=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$sum" ] &&
    [ -f "$dir/node_modules/s3rver/bin/s3rver.js" ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "tests/s3/setup.sh: node and npm are needed to install s3rver (apt-get install nodejs npm)" >&2
    exit 1
fi
mkdir -p "$dir"
rm -f "$dir/.stamp"
cp "$here/package.json" "$here/package-lock.json" "$dir/"
echo "installing s3rver for the OBJ tests into $dir (npm ci)"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
node -e 'require(process.argv[1])' "$dir/node_modules/s3rver" ||
    { echo "tests/s3/setup.sh: s3rver does not load with $(node --version)" >&2; exit 1; }
echo "$sum" >"$dir/.stamp"

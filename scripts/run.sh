#!/bin/sh
# The main job. Until a network backend exists it shows what ixl has: ixl-info.
set -eu
build=${1:-build}
"$build/tools/ixl-info"

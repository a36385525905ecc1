#!/bin/sh
# Every test: build (debug, -Werror) and run the whole ctest suite.
# Usage: scripts/test.sh [PRESET]   (debug, asan-ubsan, tsan; default debug)
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
preset=${1:-debug}
cmake --preset "$preset" >/dev/null
cmake --build "build/$preset"
ctest --preset "$preset" -j2

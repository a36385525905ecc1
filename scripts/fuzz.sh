#!/bin/sh
# Build the libFuzzer target of the format layer with clang and run it.
# Usage: scripts/fuzz.sh [SECONDS]   (default 60; the seed corpus is made from
# the known-answer vectors, new finds go to build/fuzz/corpus)
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
secs=${1:-60}
CC=clang cmake -S . -B build/fuzz -G Ninja -DAUDITLOG_FUZZ=ON -DAUDITLOG_WERROR=ON \
	-DAUDITLOG_BUILD_TESTS=OFF -DAUDITLOG_BUILD_BENCH=OFF -DAUDITLOG_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/fuzz --target fuzz_line
mkdir -p build/fuzz/corpus
python3 - <<'PY'
import json
d = json.load(open("tests/vectors/vectors.json"))
for i, v in enumerate(d["vectors"]):
    open("build/fuzz/corpus/vector-%03d" % i, "wb").write(bytes.fromhex(v["line_hex"])[:-1])
PY
build/fuzz/tests/fuzz/fuzz_line -max_total_time="$secs" -print_final_stats=1 build/fuzz/corpus

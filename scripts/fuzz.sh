#!/bin/sh
# Build the libFuzzer targets with clang and run each: fuzz_line (the format
# layer's parser and emitter) and fuzz_stream (the verifier's engine fed a
# stream in pieces). Usage: scripts/fuzz.sh [SECONDS]   (each target; default
# 60; the seed corpora are made from the known-answer vectors, new finds go
# to build/fuzz/corpus and build/fuzz/corpus-stream)
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
secs=${1:-60}
CC=clang cmake -S . -B build/fuzz -G Ninja -DAUDITLOG_FUZZ=ON -DAUDITLOG_WERROR=ON \
	-DAUDITLOG_BUILD_TESTS=OFF -DAUDITLOG_BUILD_BENCH=OFF -DAUDITLOG_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/fuzz --target fuzz_line fuzz_stream
mkdir -p build/fuzz/corpus build/fuzz/corpus-stream
python3 - <<'PY'
import json
d = json.load(open("tests/vectors/vectors.json"))
lines = [bytes.fromhex(v["line_hex"]) for v in d["vectors"]]
for i, l in enumerate(lines):
    open("build/fuzz/corpus/vector-%03d" % i, "wb").write(l[:-1])
# streams: all the vectors in order, and each with its neighbour
open("build/fuzz/corpus-stream/all", "wb").write(b"".join(lines))
for i in range(len(lines) - 1):
    open("build/fuzz/corpus-stream/pair-%03d" % i, "wb").write(lines[i] + lines[i + 1])
PY
build/fuzz/tests/fuzz/fuzz_line -max_total_time="$secs" -print_final_stats=1 build/fuzz/corpus
build/fuzz/tests/fuzz/fuzz_stream -max_total_time="$secs" -max_len=65536 -print_final_stats=1 \
	build/fuzz/corpus-stream

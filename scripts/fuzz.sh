#!/bin/sh
# Build the libFuzzer targets with clang and run each: fuzz_line (the format
# layer's parser and emitter), fuzz_stream (the verifier's engine fed a
# stream in pieces) and fuzz_v2 (the v2 readers: notes, key files, proofs,
# caller fields). Usage: scripts/fuzz.sh [SECONDS]   (each target; default
# 60; the seed corpora are made from the known-answer vectors, new finds go
# to build/fuzz/corpus, build/fuzz/corpus-stream and build/fuzz/corpus-v2)
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
secs=${1:-60}
CC=clang cmake -S . -B build/fuzz -G Ninja -DAUDITLOG_FUZZ=ON -DAUDITLOG_WERROR=ON \
	-DAUDITLOG_BUILD_TESTS=OFF -DAUDITLOG_BUILD_BENCH=OFF -DAUDITLOG_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/fuzz --target fuzz_line fuzz_stream fuzz_v2
mkdir -p build/fuzz/corpus build/fuzz/corpus-stream build/fuzz/corpus-v2
python3 - <<'PY'
import json
d = json.load(open("tests/vectors/vectors.json"))
lines = [bytes.fromhex(v["line_hex"]) for v in d["vectors"]]
for i, l in enumerate(lines):
    open("build/fuzz/corpus/vector-%03d" % i, "wb").write(l[:-1])
# the v2 lines: every record type, caller fields
v2lines = [bytes.fromhex(r["line_hex"]) for r in json.load(open("tests/vectors/v2_vectors.json"))["records"]]
for i, l in enumerate(v2lines):
    open("build/fuzz/corpus/v2-%03d" % i, "wb").write(l[:-1])
# streams: all the vectors in order, and each with its neighbour
open("build/fuzz/corpus-stream/all", "wb").write(b"".join(lines))
for i in range(len(lines) - 1):
    open("build/fuzz/corpus-stream/pair-%03d" % i, "wb").write(lines[i] + lines[i + 1])
# v2: the first byte picks the reader (tests/fuzz/fuzz_v2.c)
v2 = json.load(open("tests/vectors/v2_vectors.json"))
f = v2["files"]
seeds = [b"\x01" + f["verification_key"].encode(), b"\x02" + f["sealing_state"].encode(),
         b"\x03" + f["checkpoint_key"].encode(), b"\x09" + f["signing_key"].encode()]
seeds += [b"\x00" + bytes.fromhex(r["checkpoint"]["note_hex"]) for r in v2["records"]
          if "checkpoint" in r]
for i, s in enumerate(seeds):
    open("build/fuzz/corpus-v2/seed-%03d" % i, "wb").write(s)
PY
build/fuzz/tests/fuzz/fuzz_line -max_total_time="$secs" -print_final_stats=1 build/fuzz/corpus
build/fuzz/tests/fuzz/fuzz_stream -max_total_time="$secs" -max_len=65536 -print_final_stats=1 \
	build/fuzz/corpus-stream
build/fuzz/tests/fuzz/fuzz_v2 -max_total_time="$secs" -print_final_stats=1 build/fuzz/corpus-v2

#!/bin/sh
# Build the libFuzzer targets with clang and run each: fuzz_line (the format
# layer's parser and emitter), fuzz_stream (the verifier's engine fed a
# stream in pieces) and fuzz_v2 (the v2 readers: notes, key files, proofs,
# caller fields). Usage: scripts/fuzz.sh [SECONDS]   (each target, as many
# at once as there are CPUs; default 60; the seed corpora are made from the known-answer vectors, new finds go
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
# As many targets at once as there are CPUs (each is one process, one
# thread): the same time each, in less time in all. Each writes its own log,
# printed whole when it ends; any target's failure fails the script.
jobs=$(nproc 2>/dev/null || echo 1)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
status=0
running=0
jobs_left="" # pid:target of each target still running, oldest first
finish() { # wait for the oldest target still running, print its log
	set -- $jobs_left
	pid=${1%%:*}
	t=${1#*:}
	shift
	jobs_left="$*"
	if ! wait "$pid"; then
		status=1
	fi
	cat "$logs/$t"
	running=$((running - 1))
}
fuzz() { # TARGET ARGS...
	if [ "$running" -ge "$jobs" ]; then
		finish
	fi
	t=$1
	shift
	"build/fuzz/tests/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 "$@" \
		>"$logs/$t" 2>&1 &
	jobs_left="$jobs_left $!:$t"
	running=$((running + 1))
}
fuzz fuzz_line build/fuzz/corpus
fuzz fuzz_stream -max_len=65536 build/fuzz/corpus-stream
fuzz fuzz_v2 build/fuzz/corpus-v2
while [ "$running" -gt 0 ]; do
	finish
done
exit "$status"

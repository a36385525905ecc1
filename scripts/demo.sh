#!/bin/sh
# The main job on built-in defaults: build (release), then record events from
# several threads (async and sync) into a fresh log and print throughput, the
# backend in use and the chain head.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build build/release --target auditlog-demo >/dev/null
exec build/release/examples/auditlog-demo "$@"

#!/bin/sh
# The main job on built-in defaults: build (release), record events from
# several threads (async and sync) into a fresh log, print throughput, the
# backend in use and the chain head, then verify the log with auditlog-verify.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build build/release --target auditlog-demo auditlog-verify >/dev/null
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-demo.XXXXXX")
build/release/examples/auditlog-demo -p "$dir/audit.log" "$@"
echo
echo "verifying $dir with auditlog-verify:"
build/release/verifier/auditlog-verify "$dir"

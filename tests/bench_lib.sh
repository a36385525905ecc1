# SPDX-License-Identifier: MIT
# Sourced by the shell tests that run the benchmarks (targets.sh, bench_ab.sh).
#
# bench_scratch NAME WHAT: a scratch directory under $TMPDIR (default
# /var/tmp) into $tmp, removed on exit, and fail(); exit 77 (skip) when it is
# in memory, which WHAT (the benches, p11-bench) refuses.
bench_scratch() {
	tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/$1.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	if [ "$(stat -f -c %T "$tmp")" = tmpfs ]; then
		echo "SKIP: $tmp is on tmpfs ($2 refuses it)"
		exit 77
	fi
}
fail() { echo "FAIL: $*" >&2; exit 1; }

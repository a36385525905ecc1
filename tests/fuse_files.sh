#!/bin/sh
# SPDX-License-Identifier: MIT
# test_writer's file tests (test_unlinked, test_truncated: a log's file deleted,
# its directory removed, the file truncated, on both backends) on a real FUSE
# file system, bindfs, in v1 and v2: the link count and the byte before a
# batch are read through FUSE's kernel client and a user-space daemon.
#   fuse_files.sh TEST_WRITER VECTORS_JSON
# Exit 77 (skip) without root (mount), /dev/fuse or bindfs
# (scripts/install-deps.sh installs it).
set -u
TW=$1
VEC=$2
[ "$(id -u)" = 0 ] || { echo "SKIP: mounting a FUSE file system needs root"; exit 77; }
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }
command -v bindfs >/dev/null 2>&1 || { echo "SKIP: bindfs is not installed"; exit 77; }
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-fuse.XXXXXX")
mnt=
cleanup() {
	[ -n "$mnt" ] && umount "$mnt"
	rm -rf "$d"
}
trap cleanup EXIT
fail() { echo "fuse_files: $*" >&2; exit 1; }
mkdir "$d/src" "$d/mnt"
bindfs "$d/src" "$d/mnt" || fail "bindfs could not mount $d/mnt"
mnt=$d/mnt
[ "$(stat -f -c %t "$mnt")" = 65735546 ] || fail "$mnt is not a FUSE mount: $(stat -f -c %T "$mnt")"
for v in 1 2; do
	out=$(TMPDIR=$mnt TEST_FILTER='test_*ed' AUDITLOG_TEST_V2=$((v - 1)) AUDITLOG_VECTORS=$VEC "$TW" 2>&1)
	rc=$?
	echo "$out"
	[ "$rc" = 0 ] || fail "v$v: test_writer failed on FUSE"
	echo "$out" | grep -q "PASSED  \] 2 test" || fail "v$v: not both tests ran"
done
# each test removed what it made: nothing left behind the daemon
[ -z "$(ls -A "$d/src")" ] || fail "left in the FUSE directory: $(ls -A "$d/src")"
echo "fuse_files: passed"

#!/bin/sh
# Every command answers --version with the project version (CMake's
# project(VERSION), passed here as $1), and a bad option with exactly one line
# on stderr that names the problem and says "try 'PROG --help'", exit 2,
# nothing on stdout.
# Usage: cli_version.sh VERSION PROGRAM:VALUED-OPTION...
#   VALUED-OPTION: a long option of PROGRAM that needs a value
set -u
[ $# -ge 2 ] || { echo "usage: $0 VERSION PROGRAM:VALUED-OPTION..." >&2; exit 2; }
version=$1
shift
d=$(mktemp -d "${TMPDIR:-/tmp}/cli_version.XXXXXX") || exit 1
trap 'rm -rf "$d"' EXIT
fails=0
fail() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}

# expect_usage_error PROG NAME WANT ARGS...: exit 2, stdout empty, stderr one
# line "NAME: ...WANT...; try 'NAME --help'"
expect_usage_error() {
	prog=$1 name=$2 want=$3
	shift 3
	"$prog" "$@" >"$d/out" 2>"$d/err" </dev/null
	rc=$?
	[ "$rc" = 2 ] || fail "$name $*: exit $rc, not 2"
	[ -s "$d/out" ] && fail "$name $*: wrote to stdout: $(head -c 200 "$d/out")"
	n=$(wc -l <"$d/err")
	[ "$n" = 1 ] || fail "$name $*: $n lines on stderr, not 1: $(head -c 300 "$d/err")"
	line=$(cat "$d/err")
	case $line in
	"$name: "*"$want"*"; try '$name --help'") ;;
	*) fail "$name $*: stderr is '$line', wants '$name: ...$want...; try '$name --help''" ;;
	esac
}

for arg; do
	prog=${arg%%:*} valued=${arg#*:}
	name=$(basename "$prog")
	out=$("$prog" --version </dev/null 2>"$d/err")
	rc=$?
	[ "$rc" = 0 ] || fail "$name --version: exit $rc"
	[ "$out" = "$name (auditlog) $version" ] ||
		fail "$name --version: '$out', wants '$name (auditlog) $version'"
	[ -s "$d/err" ] && fail "$name --version: wrote to stderr: $(cat "$d/err")"

	expect_usage_error "$prog" "$name" "unknown option '--no-such-option'" --no-such-option
	expect_usage_error "$prog" "$name" "unknown option '-Z'" -Z
	expect_usage_error "$prog" "$name" "option '--version' takes no value" --version=1
	expect_usage_error "$prog" "$name" "option '$valued' needs a value" "$valued"
	echo "ok: $name"
done
[ "$fails" = 0 ] || { echo "$fails failure(s)" >&2; exit 1; }

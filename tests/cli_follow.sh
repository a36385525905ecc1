#!/bin/sh
# auditlog-verify --follow --emit on a live log that grows and rotates while it
# is followed: what it emits is exactly the lines written, in chain order; it
# reports nothing; a partial last line is waited for; SIGTERM ends it with the
# summary and exit 0. Args: follow_writer auditlog-verify
set -u
WRITER=$1
VERIFY=$2
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-follow.XXXXXX")
vpid=
wpid=
cleanup() {
	[ -n "$vpid" ] && kill "$vpid" 2>/dev/null
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null
	rm -rf "$d"
}
trap cleanup EXIT
fail() { echo "cli_follow: $*" >&2; [ -f "$d/err" ] && cat "$d/err" >&2; exit 1; }
# wait until FILE holds BYTES bytes (30 s at most)
wait_bytes() {
	i=0
	while [ "$(wc -c <"$1")" -lt "$2" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
}
# the follower's exit status, once it ended (by SIGTERM when still running)
end_tail() {
	kill -TERM "$vpid" 2>/dev/null
	wait "$vpid"
	rc=$?
	vpid=
}

mkdir "$d/log"
"$WRITER" "$d/log/audit.log" 12000 65536 &
wpid=$!
i=0
while [ ! -s "$d/log/audit.log" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
[ -s "$d/log/audit.log" ] || fail "the writer wrote nothing"
"$VERIFY" --follow --emit "$d/log" >"$d/out" 2>"$d/err" &
vpid=$!
wait "$wpid" || { wpid=; fail "the writer failed"; }
wpid=

# what was written, in chain order: rotated files by the first seq in their
# name (<name>.<time>-<first seq>), then the active file
for f in "$d"/log/audit.log.*; do echo "${f##*-} $f"; done | sort -n | cut -d' ' -f2- >"$d/order"
echo "$d/log/audit.log" >>"$d/order"
[ "$(wc -l <"$d/order")" -ge 10 ] || fail "too few rotations: $(wc -l <"$d/order") files"
xargs cat <"$d/order" >"$d/want"

# a partial line at the end of the active file: waited for, never reported
printf '{"@timestamp":"2026-11-30T10:4' >>"$d/log/audit.log"

want=$(wc -c <"$d/want")
wait_bytes "$d/out" "$want"
sleep 0.3
end_tail
[ "$rc" = 0 ] || fail "exit $rc after SIGTERM"
cmp -s "$d/out" "$d/want" || fail "--emit output ($(wc -l <"$d/out") lines) differs from the log ($(wc -l <"$d/want") lines)"
grep -q '^intact: ' "$d/err" || fail "no summary on stderr"
if grep -q ': offset ' "$d/err"; then fail "a finding was reported"; fi

# a hostile directory while it is followed: FIFOs and symlink loops named
# like the successor (for every seq the chain may go on at), and FIFOs under
# the writer's exact rotated name, must neither block the follower nor end
# it; it follows the real rotations and emits exactly what was written
mkdir "$d/h"
"$WRITER" "$d/h/audit.log" 10 0 || fail "writer"
"$VERIFY" --follow --emit "$d/h" >"$d/hout" 2>"$d/herr" &
vpid=$!
sleep 0.3
for n in $(seq 11 700); do
	mkfifo "$d/h/decoy-$n" "$d/h/audit.log.20990101T000000.000000000Z-$n"
	ln -s "loop-$n" "$d/h/loop-$n"
done
"$WRITER" "$d/h/audit.log" 600 4096 || fail "writer (rotating)"
for f in "$d"/h/audit.log.*; do [ -f "$f" ] && echo "${f##*-} $f"; done | sort -n | cut -d' ' -f2- >"$d/horder"
echo "$d/h/audit.log" >>"$d/horder"
[ "$(wc -l <"$d/horder")" -ge 5 ] || fail "too few rotations in the hostile directory"
xargs cat <"$d/horder" >"$d/hwant"
want=$(wc -c <"$d/hwant")
wait_bytes "$d/hout" "$want"
end_tail
[ "$rc" = 0 ] || { cat "$d/herr" >&2; fail "exit $rc in a hostile directory"; }
cmp -s "$d/hout" "$d/hwant" || { cat "$d/herr" >&2; fail "--emit in a hostile directory differs from the log"; }

# started before the writer wrote its header (an empty file): it waits,
# then follows the log once its first record is complete
mkdir "$d/early"
: >"$d/early/audit.log"
"$VERIFY" --follow --emit "$d/early" >"$d/eout" 2>"$d/eerr" &
vpid=$!
sleep 0.5
kill -0 "$vpid" 2>/dev/null || { cat "$d/eerr" >&2; fail "--follow on an empty file did not wait"; }
mkdir "$d/made"
"$WRITER" "$d/made/audit.log" 10 0 || fail "writer"
cat "$d/made/audit.log" >>"$d/early/audit.log"
want=$(wc -c <"$d/early/audit.log")
wait_bytes "$d/eout" "$want"
end_tail
[ "$rc" = 0 ] || { cat "$d/eerr" >&2; fail "exit $rc after waiting for the first record"; }
cmp -s "$d/eout" "$d/early/audit.log" || { cat "$d/eerr" >&2; fail "--emit after waiting differs from the log"; }

# --follow on two chains, each under a writer's active name: a usage
# error at once (not tried again as if a rotation were in progress), which
# names both chains
mkdir "$d/two"
"$WRITER" "$d/two/a.log" 10 0 && "$WRITER" "$d/two/b.log" 10 0 || fail "writer"
"$VERIFY" --follow "$d/two" >/dev/null 2>"$d/twoerr"
[ $? = 2 ] || fail "--follow on two chains is not a usage error"
[ "$(wc -l <"$d/twoerr")" = 1 ] && grep -q 'tails one chain' "$d/twoerr" &&
	[ "$(grep -o ' [0-9a-f]\{32\}' "$d/twoerr" | wc -l)" = 2 ] ||
	{ cat "$d/twoerr" >&2; fail "--follow on two chains: not the one message naming both"; }

# another log copied beside one not yet rotated, as audit.log.bak: the
# names say which is the writer's (audit.log, which the copy's name
# extends): the tail starts, tells the copy once, passes on audit.log only
mkdir "$d/bak"
"$WRITER" "$d/bak/audit.log" 10 0 || fail "writer"
cp "$d/two/b.log" "$d/bak/audit.log.bak"
"$VERIFY" --follow --emit "$d/bak" >"$d/bout" 2>"$d/berr" &
vpid=$!
wait_bytes "$d/bout" "$(wc -c <"$d/bak/audit.log")"
end_tail
[ "$rc" = 1 ] || { cat "$d/berr" >&2; fail "exit $rc with audit.log.bak beside the log (want 1)"; }
cmp -s "$d/bout" "$d/bak/audit.log" || { cat "$d/berr" >&2; fail "--emit with audit.log.bak beside differs from the log"; }
[ "$(grep -c 'audit.log.bak:0: offset 0: extra-chain: ' "$d/berr")" = 1 ] ||
	{ cat "$d/berr" >&2; fail "audit.log.bak not told once"; }

# a tail of DIR/audit.log* whose glob was expanded before the writer
# rotated (a restart at the wrong moment): the files renamed since are
# taken in through the headers that name them, nothing is missing, every
# line is passed on in chain order
mkdir "$d/glob"
"$WRITER" "$d/glob/audit.log" 300 8192 || fail "writer"
set -- "$d"/glob/audit.log*
"$WRITER" "$d/glob/audit.log" 100 8192 || fail "writer"
for f in "$d"/glob/audit.log.*; do echo "${f##*-} $f"; done | sort -n | cut -d' ' -f2- >"$d/gorder"
echo "$d/glob/audit.log" >>"$d/gorder"
xargs cat <"$d/gorder" >"$d/gwant"
[ "$(wc -l <"$d/gorder")" -gt $(($# + 1)) ] || fail "the second writer did not rotate twice"
"$VERIFY" --follow --emit "$@" >"$d/gout" 2>"$d/gerr" &
vpid=$!
wait_bytes "$d/gout" "$(wc -c <"$d/gwant")"
end_tail
[ "$rc" = 0 ] || { cat "$d/gerr" >&2; fail "exit $rc on a glob expanded before a rotation (want 0)"; }
cmp -s "$d/gout" "$d/gwant" || { cat "$d/gerr" >&2; fail "--emit on a glob expanded before a rotation differs from the log"; }
# ...or in the instant the writer's active file was renamed and the new
# one not yet created: the named file is missing for a moment, waited for
set -- "$d"/glob/audit.log*
mv "$d/glob/audit.log" "$d/glob/.aside"
"$VERIFY" --follow --emit "$@" >"$d/gout" 2>"$d/gerr" &
vpid=$!
sleep 0.2
mv "$d/glob/.aside" "$d/glob/audit.log"
wait_bytes "$d/gout" "$(wc -c <"$d/gwant")"
end_tail
[ "$rc" = 0 ] || { cat "$d/gerr" >&2; fail "exit $rc with the named active file missing for a moment (want 0)"; }
cmp -s "$d/gout" "$d/gwant" || { cat "$d/gerr" >&2; fail "--emit after the named active file came back differs from the log"; }
if grep -q 'No such file' "$d/gerr"; then cat "$d/gerr" >&2; fail "the moment the named file was missing was reported"; fi

# another chain's file under a rotated name beside the log (a copy, or the
# old chain a writer left when it began a new one): the tail starts, tells
# it once (extra-chain), and passes on the followed chain's lines only
mv "$d/two/b.log" "$d/two/a.log.20990101T000000.000000000Z-5"
"$VERIFY" --follow --emit "$d/two" >"$d/xout" 2>"$d/xerr" &
vpid=$!
want=$(wc -c <"$d/two/a.log")
wait_bytes "$d/xout" "$want"
end_tail
[ "$rc" = 1 ] || { cat "$d/xerr" >&2; fail "exit $rc with another chain beside the log (want 1)"; }
cmp -s "$d/xout" "$d/two/a.log" || { cat "$d/xerr" >&2; fail "--emit with another chain beside differs from the log"; }
[ "$(grep -c ': extra-chain: ' "$d/xerr")" = 1 ] || { cat "$d/xerr" >&2; fail "the other chain not told once"; }

# the writer begins a new chain at its active name while it is followed
# (its active file deleted): the tail reports it and exits by itself, 1
mkdir "$d/nc"
"$WRITER" "$d/nc/audit.log" 300 8192 || fail "writer"
"$VERIFY" --follow --emit "$d/nc" >"$d/ncout" 2>"$d/ncerr" &
vpid=$!
want=$(cat "$d"/nc/audit.log* | wc -c)
wait_bytes "$d/ncout" "$want"
rm "$d/nc/audit.log"
"$WRITER" "$d/nc/audit.log" 20 0 || fail "writer"
i=0
while kill -0 "$vpid" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
kill -0 "$vpid" 2>/dev/null && { cat "$d/ncerr" >&2; fail "a new chain at the active name: the tail went on waiting"; }
end_tail
[ "$rc" = 1 ] && grep -q ': extra-chain: a file that does not continue' "$d/ncerr" &&
	grep -q ': missing-file: the file tailed was deleted' "$d/ncerr" ||
	{ cat "$d/ncerr" >&2; fail "a new chain at the active name: exit $rc"; }
[ "$(wc -c <"$d/ncout")" = "$want" ] || fail "a new chain at the active name: its lines were passed on"
echo "cli_follow: all passed"

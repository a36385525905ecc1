#!/bin/sh
# auditlog-verify as a user runs it: exit codes, --json, --expect-head (with
# and without a chain id), strict numbers in options and AUDITLOG_VERIFY_*,
# the progress bar, --jobs, standard input, and terminal escaping of what
# comes from the log. Args: auditlog-demo auditlog-verify
set -u
DEMO=$1
VERIFY=$2
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-cli.XXXXXX")
trap 'rm -rf "$d"' EXIT
fail() { echo "cli_verify: $*" >&2; exit 1; }
expect() { # code command...
	want=$1; shift
	"$@" >"$d/out" 2>"$d/err"; got=$?
	[ "$got" = "$want" ] || { cat "$d/out" "$d/err" >&2; fail "exit $got, not $want: $*"; }
}

mkdir -p "$d/log"
"$DEMO" -p "$d/log/audit.log" -t 2 -n 2000 -s 100 >/dev/null || fail "the demo could not write a log"

expect 0 "$VERIFY" "$d/log"
grep -q '^intact: 1 file(s), 1 chain(s), 4001 records' "$d/out" || fail "summary: $(cat "$d/out")"
grep -q 'only a head exported elsewhere' "$d/out" || fail "the threat-model note is missing"

expect 0 "$VERIFY" --json "$d/log"
head=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["chains"][0]; assert c["events"]==4000; print("%d:%s" % (c["last_seq"], c["head_hash"]))' "$d/out") ||
	fail "--json report"
cp "$d/out" "$d/intact.json"
expect 0 "$VERIFY" --expect-head "$head" "$d/log"

# --expect-head [CHAIN_ID:]SEQ:HASH, once per chain; every number the CLI reads
# is decimal digits and nothing else, within its range, or a one-line error
# naming the option and exit 2
chain=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chains"][0]["chain_id"])' "$d/intact.json")
seq=${head%%:*}
hash=${head#*:}
other=$(echo "$hash" | tr 0-9a-f 1-9a-f0)
expect 0 "$VERIFY" --expect-head "$chain:$head" "$d/log"
expect 1 "$VERIFY" --expect-head "$chain:$seq:$other" "$d/log"
expect 0 "$VERIFY" --expect-head "000$head" "$d/log" # leading zeros are digits

# a second chain beside the first: counted in the summary; --one-chain makes
# it a finding; with an anchor for one chain only, the other is unanchored,
# and with one anchor each, both verify
mkdir -p "$d/two"
cp "$d/log/audit.log" "$d/two/audit.log"
"$DEMO" -p "$d/two/other.log" -t 1 -n 10 -s 1 >/dev/null || fail "the demo could not write a second log"
expect 0 "$VERIFY" "$d/two"
grep -q '^intact: 2 file(s), 2 chain(s)' "$d/out" || fail "two chains: $(cat "$d/out")"
expect 1 "$VERIFY" --one-chain "$d/two"
grep -q ': extra-chain: chain ' "$d/out" || fail "--one-chain: $(cat "$d/out")"
expect 1 "$VERIFY" --expect-head "$chain:$head" "$d/two"
grep -q ': unanchored: chain ' "$d/out" || fail "unanchored: $(cat "$d/out")"
expect 0 "$VERIFY" --json "$d/two"
other_head=$(python3 -c 'import json,sys; c=[c for c in json.load(open(sys.argv[1]))["chains"] if c["chain_id"]!=sys.argv[2]][0]; print("%s:%d:%s" % (c["chain_id"], c["last_seq"], c["head_hash"]))' "$d/out" "$chain")
expect 0 "$VERIFY" --expect-head "$chain:$head" --expect-head "$other_head" "$d/two"
expect 1 "$VERIFY" --expect-head "9007199254740991:$hash" "$d/log" # 2^53-1: a seq, not in this log
expect 0 "$VERIFY" --from "$head" "$d/log"
expect 0 "$VERIFY" -j 02 --min-version 0 "$d/log"
expect 0 env AUDITLOG_VERIFY_BLOCK= AUDITLOG_VERIFY_PROGRESS_MIN= "$VERIFY" "$d/log" # empty: unset
refused() { # NAME command...: exit 2, one line on stderr that names NAME
	name=$1
	shift
	expect 2 "$@"
	[ "$(wc -l <"$d/err")" -eq 1 ] && grep -q "^auditlog-verify: $name \"" "$d/err" ||
		fail "$*: not one line naming $name: $(cat "$d/err")"
}
for s in "-$seq" "+$seq" " $seq" "$seq " "" "${seq}x" "0x1" "1e3" "18446744073709551616" \
	"18446744073709551615" "9007199254740992" "-0"; do
	refused --expect-head "$VERIFY" --expect-head "$s:$hash" "$d/log"
	refused --expect-head "$VERIFY" --expect-head "$chain:$s:$hash" "$d/log"
	refused --from "$VERIFY" --from "$s:$hash" "$d/log"
done
for a in "$head:" "$seq:$hash " "$seq:$(echo "$hash" | tr a-f A-F)" "$seq:${hash#?}" "$seq" \
	"$(echo "$chain" | tr a-f A-F):$head" "${chain#?}:$head" "$chain:$chain:$head" ":$head"; do
	refused --expect-head "$VERIFY" --expect-head "$a" "$d/log"
done
refused --from "$VERIFY" --from "$chain:$head" "$d/log"
refused --expect-head "$VERIFY" --expect-head "$head" --expect-head "$head" "$d/log"
refused --expect-head "$VERIFY" --expect-head "$chain:$head" --expect-head "$chain:$seq:$other" "$d/log"
for j in "" " 2" "+2" "-1" "2x" "0x2" "1025" "18446744073709551617"; do
	refused --jobs "$VERIFY" --jobs "$j" "$d/log"
	refused --jobs "$VERIFY" -j "$j" "$d/log"
done
for m in "" " 1" "+1" "-0" "1.0" "256" "99999999999999999999"; do
	refused --min-version "$VERIFY" --min-version "$m" "$d/log"
done
for v in "abc" "-4096" " 4096" "4096k" "+1" "18446744073709551616"; do
	refused AUDITLOG_VERIFY_BLOCK env AUDITLOG_VERIFY_BLOCK="$v" "$VERIFY" "$d/log"
	refused AUDITLOG_VERIFY_PROGRESS_MIN env AUDITLOG_VERIFY_PROGRESS_MIN="$v" "$VERIFY" "$d/log"
done
refused AUDITLOG_VERIFY_BLOCK env AUDITLOG_VERIFY_BLOCK=1073741825 "$VERIFY" "$d/log" # above 1 GiB
refused --jobs "$VERIFY" --jobs "$(printf 'x\033[2J\nz')" "$d/log" # shown escaped, on one line
if grep -q "$(printf '\033')" "$d/err"; then fail "a raw ESC from an argument reached stderr"; fi

# --emit: exactly the records written, in order; the report on stderr
expect 0 "$VERIFY" --emit "$d/log"
cmp -s "$d/out" "$d/log/audit.log" || fail "--emit output differs from the log"
grep -q '^intact' "$d/err" || fail "--emit: the report is not on stderr"
expect 2 "$VERIFY" --emit --json "$d/log"

# "-": the log on standard input, as a stream
expect 0 sh -c "'$VERIFY' - <'$d/log/audit.log'"
grep -q '^intact: 1 file(s), 1 chain(s), 4001 records' "$d/out" || fail "stdin summary: $(cat "$d/out")"
expect 0 sh -c "cat '$d/log/audit.log' | '$VERIFY' --emit -"
cmp -s "$d/out" "$d/log/audit.log" || fail "--emit - output differs from the log"
expect 2 "$VERIFY" - "$d/log"
expect 2 "$VERIFY" --follow -

# the progress bar: on a terminal only (AUDITLOG_VERIFY_PROGRESS_MIN lowers its
# 64 MiB threshold for the test)
expect 0 env AUDITLOG_VERIFY_PROGRESS_MIN=0 "$VERIFY" "$d/log"
[ -s "$d/err" ] && fail "progress output on a stderr that is not a terminal"
if command -v script >/dev/null 2>&1; then
	AUDITLOG_VERIFY_PROGRESS_MIN=0 script -qec "'$VERIFY' '$d/log' >/dev/null" /dev/null >"$d/tty" 2>&1 ||
		fail "verify under script"
	grep -q 'MiB/s' "$d/tty" || fail "no progress bar on a terminal: $(cat -v "$d/tty")"
	AUDITLOG_VERIFY_PROGRESS_MIN=999999999 script -qec "'$VERIFY' '$d/log' >/dev/null" /dev/null >"$d/tty" 2>&1
	if grep -q 'MiB/s' "$d/tty"; then fail "a progress bar for a small input"; fi
fi

# one file under two names is read once: a file given alone and in its
# directory says nothing; a hard link beside it is a same-file notice (exit 0)
for spelt in "$d/log/audit.log" "$d/log//audit.log" "$d/log/./audit.log"; do
	expect 0 "$VERIFY" "$d/log/" "$spelt"
	grep -q '^intact: 1 file(s), 1 chain(s), 4001 records' "$d/out" || fail "the same path twice: $(cat "$d/out")"
	grep -q '^findings' "$d/out" && fail "the same path twice is a finding: $(cat "$d/out")"
	grep -q '//' "$d/out" && fail "a path spelt with //: $(cat "$d/out")"
done
mkdir -p "$d/linked"
cp "$d/log/audit.log" "$d/linked/audit.log"
ln "$d/linked/audit.log" "$d/linked/zz-link"
expect 0 "$VERIFY" "$d/linked"
grep -q "zz-link:0: offset 0: same-file: the same file as $d/linked/audit.log" "$d/out" ||
	fail "a hard link: $(cat "$d/out")"
grep -q '^intact: 1 file(s), 1 chain(s), 4001 records' "$d/out" || fail "a hard link's summary: $(cat "$d/out")"
rm -rf "$d/linked"

# a symlink or a FIFO named on the command line: exit 2, at once, naming it
ln -s "$d/log/audit.log" "$d/sl.log"
expect 2 "$VERIFY" "$d/log" "$d/sl.log"
grep -q "cannot read $d/sl.log: .*a symlink: never followed" "$d/err" || fail "a symlink: $(cat "$d/err")"
mkfifo "$d/ff"
expect 2 "$VERIFY" "$d/ff"
grep -q "cannot read $d/ff: .*not a regular file" "$d/err" || fail "a FIFO: $(cat "$d/err")"
rm -f "$d/sl.log" "$d/ff"

# files that are not logs beside one (a README, a stray line): findings that
# say so, and no chain head made up for them
mkdir -p "$d/junk"
cp "$d/log/audit.log" "$d/junk/audit.log"
echo "see the wiki" >"$d/junk/README"
printf '\n' >"$d/junk/stray"
expect 1 "$VERIFY" "$d/junk"
grep -q "README:1: offset 0: unparseable" "$d/out" || fail "a README: $(cat "$d/out")"
grep -q "stray:1: offset 0: inserted: a second file without a header that no chain links to (the first is $d/junk/README)" "$d/out" ||
	fail "a second headerless file: $(cat "$d/out")"
grep -q '^chain (no header): 2 file(s), no records$' "$d/out" || fail "the headerless files' summary: $(cat "$d/out")"
rm -rf "$d/junk"

# inputs without a record prove nothing: an empty directory, an empty pipe, a
# torn first header alone are 'empty', exit 2; with an exported head, a trail
# deleted whole is a finding (exit 1)
mkdir -p "$d/none"
expect 2 "$VERIFY" "$d/none"
grep -q '^empty: 0 file(s), 0 chain(s), 0 records' "$d/out" || fail "an empty directory: $(cat "$d/out")"
grep -q 'no log record: nothing was verified' "$d/err" || fail "an empty directory's message: $(cat "$d/err")"
expect 2 "$VERIFY" - </dev/null
grep -q '^empty: ' "$d/out" || fail "an empty pipe: $(cat "$d/out")"
expect 2 "$VERIFY" --json "$d/none"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["verdict"] == "empty"' "$d/out" || fail "--json: not empty"
: >"$d/none/audit.log"
expect 2 "$VERIFY" "$d/none"
grep -q 'recovered: a torn first header' "$d/out" || fail "a torn first header alone: $(cat "$d/out")"
expect 1 "$VERIFY" --expect-head "$head" "$d/none"
rm -rf "$d/none"

# --dedup on standard input (a central copy): lines 100..130 replayed after line
# 130, as RELP may after a reconnect, are shipper-duplicate (exit 0, counted);
# without --dedup they are duplicated (exit 1); one byte changed in the replay
# is still a finding
awk 'NR>=100&&NR<=130{a[n++]=$0} {print} NR==130{for(i=0;i<n;i++)print a[i]}' "$d/log/audit.log" >"$d/rep.log"
expect 0 "$VERIFY" --dedup - <"$d/rep.log"
grep -q '^intact: .*4001 records' "$d/out" || fail "--dedup summary: $(cat "$d/out")"
grep -q '^findings: shipper-duplicate 31$' "$d/out" || fail "--dedup count: $(cat "$d/out")"
expect 1 "$VERIFY" - <"$d/rep.log"
grep -q 'duplicated 31' "$d/out" || fail "without --dedup: $(cat "$d/out")"
sed '140s/"action":"\([A-Za-z_]\)/"action":"X/' "$d/rep.log" >"$d/rep1.log"
cmp -s "$d/rep.log" "$d/rep1.log" && fail "the changed replay line is unchanged"
expect 1 "$VERIFY" --dedup - <"$d/rep1.log"
grep -q 'shipper-duplicate 30' "$d/out" || fail "--dedup with one changed: $(cat "$d/out")"

# a hole of NUL bytes (a file truncated and written on past the cut, as a
# writer did before it checked): named as a hole, where it starts in its line
mkdir -p "$d/hole"
head -c 3000 "$d/log/audit.log" >"$d/hole/audit.log"
head -c 1000 /dev/zero >>"$d/hole/audit.log"
tail -c +4001 "$d/log/audit.log" | head -c 2000 >>"$d/hole/audit.log"
expect 1 "$VERIFY" "$d/hole"
grep -q 'unparseable: a hole of 1000 NUL byte(s) at byte [0-9]* of the line' "$d/out" ||
	fail "a hole: $(cat "$d/out")"

# a deleted line: exit 1, with file, line, offset and seq
sed -i '5d' "$d/log/audit.log"
expect 1 "$VERIFY" "$d/log"
grep -q 'audit.log:5: offset [0-9]*, seq 5: deleted: seq jumps from 3 to 5' "$d/out" || fail "finding: $(cat "$d/out")"
expect 1 "$VERIFY" -q "$d/log"
# --emit passes on every verified line and holds back what did not verify
expect 1 "$VERIFY" --emit "$d/log"
[ "$(wc -l <"$d/out")" -eq "$(($(wc -l <"$d/log/audit.log") - 1))" ] || fail "--emit after a deletion"
if grep -q '"seq":5,' "$d/out"; then fail "--emit passed the record after the gap"; fi

# --jobs: the same report from one thread and from workers checking small
# blocks (AUDITLOG_VERIFY_BLOCK: a small log in many blocks)
expect 1 "$VERIFY" --jobs 1 --json "$d/log"
mv "$d/out" "$d/one.json"
expect 1 env AUDITLOG_VERIFY_BLOCK=4096 "$VERIFY" -j 3 --json "$d/log"
cmp -s "$d/out" "$d/one.json" || fail "--jobs 3 reports otherwise than --jobs 1"
grep -q '"class": *"deleted"' "$d/out" || fail "--jobs: no deleted finding: $(cat "$d/out")"
expect 2 "$VERIFY" --jobs x "$d/log"
expect 2 "$VERIFY" --jobs -1 "$d/log"

# usage and I/O errors: exit 2
expect 2 "$VERIFY"
expect 2 "$VERIFY" --bogus "$d/log"
expect 2 "$VERIFY" --expect-head 12:zz "$d/log"
expect 2 "$VERIFY" "$d/no-such-file"

# a non-canonical line is reported with the fields jansson reads in it, and
# what comes from the log (an ESC in its action) is shown escaped
cp "$d/log/audit.log" "$d/nc.log"
sed -i '3s/^{"@timestamp"/{ "@timestamp"/; 3s/"action":"/"action":"\\u001b[2J/' "$d/nc.log"
expect 1 "$VERIFY" "$d/nc.log"
grep -q 'nc.log:3: offset [0-9]*, seq 2: non-canonical: .*(seq 2, type "event", action "\\x1b\[2JC_' "$d/out" ||
	fail "non-canonical line's fields: $(cat "$d/out")"
if grep -q "$(printf '\033')" "$d/out"; then fail "a raw ESC from a record reached the output"; fi

# control characters from the input never reach the terminal raw
esc=$(printf 'evil\033[2Jname')
cp "$d/log/audit.log" "$d/$esc"
expect 1 "$VERIFY" "$d/$esc"
grep -q 'evil\\x1b\[2Jname' "$d/out" || fail "escape not shown as \\x1b"
if grep -q "$(printf '\033')" "$d/out"; then fail "a raw ESC reached the output"; fi
# --emit - from a pipe passes verified lines on as they come, not a stdio
# buffer at a time: the first 20 lines must be out while the rest is held back
mkdir -p "$d/plog"
"$DEMO" -p "$d/plog/audit.log" -t 1 -n 200 >/dev/null || fail "the demo could not write a log"
mkfifo "$d/in"
head -n 20 "$d/plog/audit.log" >"$d/part1"
tail -n +21 "$d/plog/audit.log" >"$d/part2"
# (the output first: opening the FIFO blocks until the writer below opens it,
# and the loop reads the output as soon as that happens)
"$VERIFY" --emit - >"$d/emitted" <"$d/in" 2>/dev/null &
vpid=$!
exec 3>"$d/in"
cat "$d/part1" >&3
i=0
while [ "$(wc -l <"$d/emitted")" -lt 20 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
early=$(wc -l <"$d/emitted")
cat "$d/part2" >&3
exec 3>&-
wait $vpid || fail "--emit - of the intact log: exit $?"
[ "$early" -ge 20 ] || fail "--emit -: only $early of the 20 lines given were passed on while the pipe stayed open"
cmp -s "$d/emitted" "$d/plog/audit.log" || fail "--emit -: the lines passed on are not the log's"
echo "cli_verify: all passed"

#!/bin/sh
# What auditlog-verify prints of what comes from its input (file names, and
# messages quoting a record) cannot rewrite a terminal: C0 controls, C1
# controls (raw 0x9b and U+009B as C2 9B), bidirectional controls and bytes
# that are not UTF-8 are shown escaped; --json keeps every key of every
# finding for such names and for a message the engine cut inside a character
# (U+FFFD, and the name's exact bytes in file_hex). Args: auditlog-demo
# auditlog-verify follow_writer (a writer that rotates)
set -u
DEMO=$1
VERIFY=$2
WRITER=$3
LC_ALL=C
export LC_ALL
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-cli-out.XXXXXX")
trap 'rm -rf "$d"' EXIT
fail() { echo "cli_verify_output: $*" >&2; exit 1; }

"$DEMO" -p "$d/src.log" -t 1 -n 20 -s 10 >/dev/null || fail "the demo could not write a log"
sed -i '5d' "$d/src.log" # a finding in every copy, so that its name is printed
mkdir "$d/n"

# Every byte of the human report is printable ASCII or '\n' (unless $2 = any).
ascii_only() { # file
	python3 -c 'import sys
b = open(sys.argv[1], "rb").read()
bad = sorted({c for c in b if not (32 <= c < 127 or c == 10)})
sys.exit("bytes %s reached the terminal report" % [hex(c) for c in bad] if bad else 0)' "$1"
}

# The --json report: ASCII, every finding with all its keys, "file" the name
# with U+FFFD for what is not UTF-8 (Python's decoder replaces maximal
# subparts too, independently of the C) and file_hex its exact bytes then.
json_check() { # report path
	python3 -c 'import json, os, sys
raw = open(sys.argv[1], "rb").read()
assert all(c < 128 for c in raw), "--json output is not ASCII"
r = json.loads(raw)
path = os.fsencode(sys.argv[2])
want = path.decode("utf-8", "replace")
assert r["findings"], "no findings"
for f in r["findings"]:
    missing = {"class", "file", "line", "offset", "seq", "integrity", "message"} - f.keys()
    assert not missing, "keys missing: %s in %s" % (missing, f)
    assert isinstance(f["message"], str) and f["message"], f
    assert f["file"] == want, (f["file"], want)
    if want.encode() != path:
        assert bytes.fromhex(f["file_hex"]) == path, f
    else:
        assert "file_hex" not in f, f' "$1" "$2"
}

check() { # printf-format-of-the-name  escaped-form  [any]
	name=$(printf "$1")
	cp "$d/src.log" "$d/n/$name"
	"$VERIFY" "$d/n/$name" >"$d/out" 2>"$d/err"
	[ $? = 1 ] || { cat "$d/out" "$d/err" >&2; fail "$2: not exit 1"; }
	grep -qF "/n/$2:5: offset" "$d/out" || fail "$2 not shown so: $(cat -v "$d/out")"
	[ "${3:-}" = any ] || ascii_only "$d/out" || fail "$2: $(cat -v "$d/out")"
	"$VERIFY" --json "$d/n/$name" >"$d/json" 2>"$d/err"
	[ $? = 1 ] || { cat "$d/json" "$d/err" >&2; fail "$2: --json not exit 1"; }
	json_check "$d/json" "$d/n/$name" || fail "$2: --json: $(cat "$d/json")"
	rm "$d/n/$name"
}
check 'evil\033[2Jname' 'evil\x1b[2Jname'
check 'csi\2332Jraw' 'csi\x9b2Jraw'
check 'csi\302\2332Jutf8' 'csi\u009b2Jutf8'
check 'nel\302\205line' 'nel\u0085line'
check 'rlo\342\200\256gol.txt' 'rlo\u202egol.txt'
check 'bad\377\376name' 'bad\xff\xfename'
check 'cut\342\202' 'cut\xe2\x82'
check 'overlong\300\257' 'overlong\xc0\xaf'
check 'surrogate\355\240\200' 'surrogate\xed\xa0\x80'
check 'del\177' 'del\x7f'
check 'back\\x1bslash' 'back\\x1bslash' # a literal backslash cannot pass for an escape
check 'caf\303\251' "$(printf 'caf\303\251')" any # UTF-8 that is text stays as it is

# Messages that quote a record: a non-canonical line (a space after "{") whose
# action holds U+009B and U+202E, and one whose action the engine cuts at 64
# bytes inside a character ("x" then 40 two-byte "é": the cut falls in the 32nd)
python3 -c 'import sys
src, out, action = sys.argv[1], sys.argv[2], sys.argv[3].encode().decode("unicode_escape").encode("latin-1")
lines = open(src, "rb").read().split(b"\n")
lines[2] = lines[2].replace(b"{\"@timestamp\"", b"{ \"@timestamp\"", 1).replace(b"\"action\":\"", b"\"action\":\"" + action, 1)
open(out, "wb").write(b"\n".join(lines))' "$d/src.log" "$d/c1.log" '\xc2\x9bcsi\xe2\x80\xaerlo' || fail "python"
"$VERIFY" "$d/c1.log" >"$d/out" 2>"$d/err"
[ $? = 1 ] || fail "c1.log: not exit 1: $(cat "$d/out" "$d/err")"
grep -qF 'non-canonical: ' "$d/out" || fail "c1.log: no non-canonical finding: $(cat -v "$d/out")"
grep -qF 'action "\u009bcsi\u202erloC_' "$d/out" || fail "c1.log: action not escaped: $(cat -v "$d/out")"
ascii_only "$d/out" || fail "c1.log: $(cat -v "$d/out")"

python3 -c 'import sys
src, out = sys.argv[1], sys.argv[2]
lines = open(src, "rb").read().split(b"\n")
lines[2] = lines[2].replace(b"{\"@timestamp\"", b"{ \"@timestamp\"", 1).replace(b"\"action\":\"", ("\"action\":\"x" + "\u00e9" * 40).encode(), 1)
open(out, "wb").write(b"\n".join(lines))' "$d/src.log" "$d/cut.log" || fail "python"
"$VERIFY" "$d/cut.log" >"$d/out" 2>"$d/err"
[ $? = 1 ] || fail "cut.log: not exit 1: $(cat "$d/out" "$d/err")"
grep -qF "action \"x$(printf '\303\251')" "$d/out" || fail "cut.log: no action in the message: $(cat -v "$d/out")"
grep -qF "$(printf '\303\251')\\xc3\")" "$d/out" || fail "cut.log: the cut byte is not shown as \\xc3: $(cat -v "$d/out")"
"$VERIFY" --json "$d/cut.log" >"$d/json" 2>"$d/err"
[ $? = 1 ] || fail "cut.log: --json not exit 1"
json_check "$d/json" "$d/cut.log" || fail "cut.log: --json: $(cat "$d/json")"
python3 -c 'import json, sys
m = [f["message"] for f in json.load(open(sys.argv[1]))["findings"] if f["class"] == "non-canonical"]
assert m and m[0].endswith("x" + "\u00e9" * 31 + "\ufffd\")"), m' "$d/json" ||
	fail "cut.log: the cut character is not one U+FFFD: $(cat "$d/json")"

# A message the engine cuts at 511 bytes: a forked chain (a copy of the active
# file continues the rotated one too) in a directory whose name is 3-byte
# characters, so the message naming both paths is longer than that; with 0, 1
# and 2 ASCII bytes in front, the cut falls inside a character at least once.
for pad in "" x xx; do
	e=$(python3 -c 'print("\u20ac" * 80)')
	mkdir -p "$d/f$pad/$e/$e"
	fd="$d/f$pad/$e/$e"
	"$WRITER" "$fd/audit.log" 60 4096 >/dev/null || fail "the rotating writer failed"
	cp "$fd/audit.log" "$fd/copy.log"
	"$VERIFY" "$fd" >"$d/out" 2>"$d/err"
	[ $? = 1 ] || fail "forked$pad: not exit 1: $(cat "$d/out" "$d/err")"
	python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$d/out" ||
		fail "forked$pad: the report is not UTF-8: $(cat -v "$d/out")"
	"$VERIFY" --json "$fd" >"$d/json" 2>"$d/err"
	[ $? = 1 ] || fail "forked$pad: --json not exit 1"
	python3 -c 'import json, sys
fs = json.load(open(sys.argv[1]))["findings"]
for f in fs:
    missing = {"class", "file", "line", "offset", "seq", "integrity", "message"} - f.keys()
    assert not missing, "keys missing: %s in %s" % (missing, f)
assert max(len(f["message"].encode()) for f in fs) >= 500, "no message as long as the cut: %s" % fs' "$d/json" ||
		fail "forked$pad: --json: $(cat "$d/json")"
	rm -rf "$d/f$pad"
done
echo "cli_verify_output: all passed"

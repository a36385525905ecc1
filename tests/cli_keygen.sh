#!/bin/sh
# auditlog-keygen as a user runs it: the four files exactly per docs/format.md
# 16-17 (checked by tests/vectors/check_keys.py, written from the spec), their
# modes whatever the umask, never overwriting (and nothing left behind when a
# later file exists or the verification key cannot be written), --verify-key -
# on standard output only, refused values (exit 2, nothing written), the
# default host, and --note-key; the library's readers and epoch schedule
# load what it wrote (keygen_load). Args: auditlog-keygen check_keys.py keygen_load
set -u
KEYGEN=$1
CHECK=$2
LOAD=$3
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-keygen.XXXXXX")
trap 'rm -rf "$d"' EXIT
fail() { echo "cli_keygen: $*" >&2; exit 1; }
expect() { # code command...
	want=$1; shift
	"$@" >"$d/out" 2>"$d/err"; got=$?
	[ "$got" = "$want" ] || { cat "$d/out" "$d/err" >&2; fail "exit $got, not $want: $*"; }
}
now_ns() { python3 -c 'import time; print(time.time_ns())'; }
# check DIR ARGS...: the four files under DIR's fixed names
check() {
	k=$1; shift
	python3 "$CHECK" --state "$k/sealing-state" --signing-key "$k/signing-key" \
		--pubkey "$k/pubkey" --verify-key "$k/verify-key" "$@" || fail "check_keys: $k $*"
}
# empty DIR: nothing was written there
empty() { [ -z "$(ls -A "$1")" ] || fail "$1 is not empty: $(ls -A "$1")"; }

expect 0 "$KEYGEN" --help
grep -q '^usage: auditlog-keygen ' "$d/out" || fail "--help: $(cat "$d/out")"
[ -s "$d/err" ] && fail "--help wrote to stderr"

# --dir with the defaults: Δ 10 s, max-jump the epochs of 366 days, t0 now
mkdir "$d/a"
lo=$(now_ns)
expect 0 "$KEYGEN" --host host-1.example --dir "$d/a"
hi=$(now_ns)
cp "$d/out" "$d/a.summary"
[ -s "$d/err" ] && fail "stderr: $(cat "$d/err")"
check "$d/a" --host host-1.example --delta 10000000000 --max-jump 3162240 --t0-range "$lo" "$hi" \
	--summary "$d/a.summary"
grep -q '^max-jump 3162240 ' "$d/a.summary" || fail "summary: $(cat "$d/a.summary")"
grep -q 'move it off the host' "$d/a.summary" || fail "the summary does not say where the verification key goes"

# one file each, anywhere; Δ 1 s; t0 in the past (this boot); max-jump given
mkdir "$d/b" "$d/b1" "$d/b2"
t0=$(($(now_ns) - 3000000000))
expect 0 "$KEYGEN" --host 1.2.3.4 --delta 1 --max-jump 5 --t0 "$t0" --state "$d/b/sealing-state" \
	--signing-key "$d/b/signing-key" --pubkey "$d/b1/pubkey" --verify-key "$d/b2/verify-key"
cp "$d/b1/pubkey" "$d/b/pubkey" # (cp: 0644 under the default umask of the test)
chmod 0644 "$d/b/pubkey"
cp -p "$d/b2/verify-key" "$d/b/verify-key"
check "$d/b" --host 1.2.3.4 --delta 1000000000 --max-jump 5 --t0 "$t0" --summary "$d/out"
check "$d/b" --host 1.2.3.4 --delta 1000000000 --max-jump 5 --t0 "$t0"
e=$(sed -n 's/^epoch 0 in the state; the epoch now is \([0-9]*\)$/\1/p' "$d/out")
[ "${e:-0}" -ge 3 ] || fail "t0 3 s ago at Δ 1 s: the epoch now is '$e', not >= 3"
[ "$(stat -c %a "$d/b1/pubkey")" = 644 ] || fail "pubkey mode $(stat -c %a "$d/b1/pubkey")"
"$LOAD" "$d/a" || fail "keygen_load $d/a"
"$LOAD" "$d/b" || fail "keygen_load $d/b (t0 3 s ago, Δ 1 s)"

# fractions of a second; a Δ past 366 days still allows a jump of 1
mkdir "$d/c" "$d/c2"
expect 0 "$KEYGEN" --host c --delta 0.5 --dir "$d/c"
check "$d/c" --delta 500000000 --max-jump 63244800
expect 0 "$KEYGEN" --host c --delta 31708800.000000001 --dir "$d/c2"
check "$d/c2" --delta 31708800000000001 --max-jump 1

# the modes are exact whatever the umask
for m in 077 000 022; do
	mkdir "$d/u$m"
	(umask $m && "$KEYGEN" --host u --dir "$d/u$m" >/dev/null) || fail "umask $m: exit $?"
	check "$d/u$m"
done

# --verify-key -: the verification key on standard output and nowhere else;
# the summary on standard error; --dir holds the other three
mkdir "$d/s"
expect 0 "$KEYGEN" --host s --dir "$d/s" --verify-key -
[ -e "$d/s/verify-key" ] && fail "--verify-key - also wrote $d/s/verify-key"
[ "$(ls "$d/s" | tr '\n' ' ')" = "pubkey sealing-state signing-key " ] || fail "--dir with -: $(ls "$d/s")"
head -n 1 "$d/out" | grep -qx 'auditlog-verification-key 2' || fail "stdout: $(cat "$d/out")"
cp "$d/out" "$d/s/verify-key" && chmod 0600 "$d/s/verify-key"
check "$d/s" --host s --summary "$d/err"
grep -q '^verify-key (standard output) ' "$d/err" || fail "the summary does not say where the key went"

# a key file is never overwritten: the first, second or fourth file existing
# stops the run before anything is written, and what this run created is gone
for name in sealing-state signing-key verify-key; do
	mkdir "$d/x-$name"
	echo keep >"$d/x-$name/$name"
	expect 1 "$KEYGEN" --host x --dir "$d/x-$name"
	grep -q "$name exists: a key file is never overwritten" "$d/err" || fail "exists: $(cat "$d/err")"
	[ "$(ls "$d/x-$name")" = "$name" ] || fail "$name existed: left $(ls "$d/x-$name" | tr '\n' ' ')"
	[ "$(cat "$d/x-$name/$name")" = keep ] || fail "$name was changed"
done
# --dir that does not exist: made 0700 and kept; removed again when the run
# fails; a file in its place, or a missing parent, is refused
expect 0 "$KEYGEN" --host n --dir "$d/new"
[ "$(stat -c %a "$d/new")" = 700 ] || fail "--dir made with mode $(stat -c %a "$d/new")"
check "$d/new"
echo keep >"$d/vk-taken"
expect 1 "$KEYGEN" --host n --dir "$d/new2" --verify-key "$d/vk-taken"
[ -e "$d/new2" ] && fail "a --dir made by a failed run is left behind"
expect 1 "$KEYGEN" --host n --dir "$d/vk-taken"
grep -q "vk-taken (--dir) is not a directory" "$d/err" || fail "--dir a file: $(cat "$d/err")"
expect 1 "$KEYGEN" --host n --dir "$d/no/such"
grep -q "cannot make the directory" "$d/err" || fail "--dir without its parent: $(cat "$d/err")"
[ "$(cat "$d/vk-taken")" = keep ] || fail "vk-taken was changed"
# a dangling symlink at a path is not followed
mkdir "$d/l"
ln -s "$d/l-target" "$d/l/pubkey"
expect 1 "$KEYGEN" --host x --dir "$d/l"
[ -e "$d/l-target" ] && fail "a symlink was followed"
[ "$(ls "$d/l")" = pubkey ] || fail "symlink: left $(ls "$d/l" | tr '\n' ' ')"
# the verification key could not be written (a full disk): nothing stays
mkdir "$d/f"
"$KEYGEN" --host f --dir "$d/f" --verify-key - >/dev/full 2>"$d/err"
[ $? = 1 ] || fail "--verify-key - >/dev/full: exit not 1"
empty "$d/f"
# a closed standard output never takes the key (nor hands its descriptor to a file)
"$KEYGEN" --host f --dir "$d/f" --verify-key - 2>"$d/err" >&-
[ $? = 2 ] || fail "--verify-key - >&-: exit not 2"
empty "$d/f"
"$KEYGEN" --host f --dir "$d/f" >&- 2>"$d/err" || fail "--dir with stdout closed: exit $?"
check "$d/f"
# a signal while the key waits on a full pipe (or at any point of the run)
# ends it with exit 1 and removes what it made
mkdir "$d/i"
python3 - "$KEYGEN" "$d/i" <<'PYEOF' || fail "interrupted run"
import os, signal, subprocess, sys, time
keygen, out = sys.argv[1], sys.argv[2]
r, w = os.pipe()
os.set_blocking(w, False)
try:
    while True:
        os.write(w, b"x" * 4096)  # (atomic: all or EAGAIN) until the pipe is full
except BlockingIOError:
    pass
os.set_blocking(w, True)
p = subprocess.Popen([keygen, "--host", "i", "--dir", out, "--verify-key", "-"], stdout=w,
                     stderr=subprocess.PIPE)
os.close(w)
deadline = time.time() + 20  # the three files first, then the key to the full pipe
while len(os.listdir(out)) < 3 and time.time() < deadline:
    time.sleep(0.01)
time.sleep(0.3)
if p.poll() is not None:
    sys.exit("keygen did not wait on the full pipe: exit %s" % p.returncode)
p.send_signal(signal.SIGTERM)
rc = p.wait(20)
err = p.stderr.read().decode()
if rc != 1 or "nothing was left behind" not in err:
    sys.exit("SIGTERM: exit %d, not 1: %s" % (rc, err))
if os.listdir(out):
    sys.exit("SIGTERM: left %s" % os.listdir(out))
os.close(r)
PYEOF
# the summary lost (stdout full) does not undo the files
mkdir "$d/g"
"$KEYGEN" --host g --dir "$d/g" >/dev/full 2>"$d/err" || fail "summary to /dev/full: exit $?"
grep -q 'the files are written' "$d/err" || fail "summary lost: $(cat "$d/err")"
check "$d/g"

# refused values: exit 2, one line naming the option, nothing written
mkdir "$d/r"
refused() { # what-it-says args...
	says=$1; shift
	expect 2 "$KEYGEN" --dir "$d/r" "$@"
	[ "$(wc -l <"$d/err")" = 1 ] || fail "$*: not one line: $(cat "$d/err")"
	grep -q -- "$says" "$d/err" || fail "$*: stderr '$(cat "$d/err")' does not say '$says'"
	[ -s "$d/out" ] && fail "$*: wrote to stdout"
	empty "$d/r"
}
long=$(printf 'a%.0s' $(seq 64))
for h in "" Host .a -a a_b "a b" a+b a/b "$long" "$(printf 'h\303\251')"; do
	refused '--host "' --host "$h"
done
for v in 0 0.0 0.000000000 -1 +1 1e3 .5 1. 1.0000000001 "" " 1" 0x10 18446744074 18446744073.709551616; do
	refused '--delta "' --host h --delta "$v"
done
refused '--max-jump "' --host h --max-jump 0
refused '--max-jump "' --host h --max-jump -1
refused '--max-jump "' --host h --max-jump 4294967296
refused '--max-jump "' --host h --max-jump x
refused '--max-jump "' --host h --max-jump ""
refused '--t0 "' --host h --t0 x
refused '--t0 "' --host h --t0 -5
refused '--t0 "' --host h --t0 18446744073709551616
refused 'is in the future' --host h --t0 $(($(now_ns) + 100000000000))
refused 'is before this boot began' --host h --t0 0
refused 'key is already exhausted' --host h --t0 $(($(now_ns) - 1000000000)) --delta 18446744073
refused 'only --verify-key' --host h --state -
refused 'name the same file' --host h --pubkey "$d/r/k" --verify-key "$d/r/k"
refused "unexpected argument" --host h extra
expect 2 "$KEYGEN" --host h --state "$d/r/s"
grep -q 'give --dir DIR or --signing-key FILE' "$d/err" || fail "a missing file: $(cat "$d/err")"
empty "$d/r"
# accepted edge values
mkdir "$d/e"
expect 0 "$KEYGEN" --host "$(printf 'a%.0s' $(seq 63))" --delta 0.000000001 --max-jump 4294967295 \
	--t0 "0$(now_ns)" --dir "$d/e"
check "$d/e" --delta 1 --max-jump 4294967295

# the default host: the hostname in lower case when it is a host id (16.1)
mkdir "$d/h"
hn=$(python3 -c 'import socket, re; h = socket.gethostname().lower(); print(h if re.match(r"[a-z0-9][a-z0-9.-]{0,62}\Z", h) else "")')
if [ -n "$hn" ]; then
	expect 0 "$KEYGEN" --dir "$d/h"
	check "$d/h" --host "$hn"
else
	expect 2 "$KEYGEN" --dir "$d/h"
	grep -q 'give one with --host' "$d/err" || fail "default host: $(cat "$d/err")"
	empty "$d/h"
fi

# the same in a UTS namespace of our own (root only): a name in capitals is
# lowered, one that is not a host id is refused with exit 2
if unshare --uts true 2>/dev/null; then
	mkdir "$d/h2" "$d/h3"
	unshare --uts sh -c 'echo MyHost.Example >/proc/sys/kernel/hostname && exec "$0" --dir "$1"' "$KEYGEN" "$d/h2" >/dev/null ||
		fail "hostname MyHost.Example: exit $?"
	check "$d/h2" --host myhost.example
	unshare --uts sh -c 'echo Bad_Host >/proc/sys/kernel/hostname && exec "$0" --dir "$1"' "$KEYGEN" "$d/h3" >"$d/out" 2>"$d/err"
	[ $? = 2 ] || fail "hostname Bad_Host: exit not 2"
	grep -q 'the hostname "bad_host" in lower case is not a host id' "$d/err" || fail "Bad_Host: $(cat "$d/err")"
	empty "$d/h3"
else
	echo "cli_keygen: (no UTS namespace here: the hostname cases beyond this machine's are not run)"
fi

# --note-key: a chain's exact C2SP verifier key (docs/format.md 20.2)
chain=0123456789abcdef0123456789abcdef
expect 0 "$KEYGEN" --note-key "$chain" --pubkey "$d/a/pubkey"
python3 "$CHECK" --note-key "$(cat "$d/out")" --chain "$chain" --pubkey "$d/a/pubkey" || fail "--note-key"
[ "$(wc -l <"$d/out")" = 1 ] || fail "--note-key: $(cat "$d/out")"
expect 2 "$KEYGEN" --note-key 0123456789ABCDEF0123456789abcdef --pubkey "$d/a/pubkey"
expect 2 "$KEYGEN" --note-key "$chain"
expect 2 "$KEYGEN" --note-key "$chain" --pubkey "$d/a/pubkey" --host h
expect 1 "$KEYGEN" --note-key "$chain" --pubkey "$d/a/signing-key"
expect 1 "$KEYGEN" --note-key "$chain" --pubkey "$d/nonexistent"
echo "cli_keygen: ok"

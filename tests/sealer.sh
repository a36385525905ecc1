#!/bin/sh
# auditlog-sealer with real writers (docs/sealer.md): keys from auditlog-keygen
# (Δ 1 s); two writer processes seal v2 logs through one sealer and
# auditlog-verify with both keys says intact; the sealer advances the state
# on its own timer with no writer; a peer not on the allow list is refused
# (the test's own uid left off the list; as root also `nobody` via setpriv);
# a sealer killed under a writer fails it closed (record_sync errs, the record
# is not in the log); SIGTERM exits 0 and unlinks the socket.
# Args: auditlog-keygen auditlog-sealer auditlog-verify sealer_writer
set -u
KEYGEN=$1
SEALER=$2
VERIFY=$3
WRITER=$4
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-sealer.XXXXXX")
spid=
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null; rm -rf "$d"; }
trap cleanup EXIT
fail() { echo "sealer.sh: $*" >&2; [ -f "$d/sealer.err" ] && sed 's/^/  sealer: /' "$d/sealer.err" >&2; exit 1; }
epoch_of() { sed -n 's/^epoch \([0-9]*\)$/\1/p' "$1"; }
. "$(dirname "$0")/sealer_lib.sh"
# start_sealer ARGS...: in the background, wait for its socket (sealer.err
# holds this run's messages only)
start_sealer() { : >"$d/sealer.err"; start_sealer_with "$d/k" "$@"; }
stop_sealer() { # SIGTERM: exit 0, socket gone
	kill -TERM "$spid"
	wait "$spid"; rc=$?
	spid=
	[ "$rc" = 0 ] || fail "sealer exit $rc on SIGTERM"
	[ -e "$d/sock" ] && fail "socket left behind after SIGTERM"
	return 0
}
verify_intact() { # LOG
	"$VERIFY" --verify-key "$d/k/verify-key" --pubkey "$d/k/pubkey" "$1" >"$d/v.out" 2>&1 ||
		{ cat "$d/v.out" >&2; fail "$1: not intact"; }
	grep -q intact "$d/v.out" || { cat "$d/v.out" >&2; fail "$1: no verdict"; }
}
chmod 0755 "$d"
mkdir -m 0700 "$d/k"
"$KEYGEN" --host sealer-test --delta 1 --dir "$d/k" >/dev/null 2>&1 || fail "keygen"
me=$(id -u)

# 0. exactly one seal provider with v2
"$WRITER" "$d/x.log" "$d/sock" exclusive || fail "set_sealer_socket and set_sealing not exclusive"
[ -e "$d/x.log" ] && fail "x.log created by a refused open"

# 1. two writers at once through one sealer, across epochs
start_sealer --allow-uid "$me"
"$WRITER" "$d/a.log" "$d/sock" 200 1100 2>"$d/a.err" & wa=$!
"$WRITER" "$d/b.log" "$d/sock" 200 1100 2>"$d/b.err" & wb=$!
wait $wa || { cat "$d/a.err" >&2; fail "writer a"; }
wait $wb || { cat "$d/b.err" >&2; fail "writer b"; }
verify_intact "$d/a.log"
verify_intact "$d/b.log"
grep -c '"type":"event"' "$d/a.log" | grep -qx 200 || fail "a.log: not 200 events"
grep -q '"type":"checkpoint"' "$d/a.log" || fail "a.log: no checkpoint"
# the seals use more than one epoch (the writers crossed boundaries)
[ "$(grep -o '"epoch":[0-9]*' "$d/a.log" | sort -u | wc -l)" -ge 2 ] || fail "a.log: one epoch only"

# 2. no writer: the state still advances every epoch, on the sealer's timer
e1=$(epoch_of "$d/k/sealing-state")
sleep 2.5
e2=$(epoch_of "$d/k/sealing-state")
[ -n "$e1" ] && [ -n "$e2" ] && [ "$e2" -ge $((e1 + 2)) ] || fail "state epoch $e1 -> $e2 in 2.5 s idle"

# 3. a writer reopens its log through the sealer and continues the chain
"$WRITER" "$d/a.log" "$d/sock" 50 0 2>"$d/a.err" || { cat "$d/a.err" >&2; fail "writer a, 2nd life"; }
verify_intact "$d/a.log"
stop_sealer

# 4. the allow list: our own uid left off is refused, and nothing is written
start_sealer --allow-uid $((me + 12345))
"$WRITER" "$d/c.log" "$d/sock" 10 0 2>"$d/c.err" && fail "a peer off the allow list was served"
grep -q 'open: Permission denied' "$d/c.err" || { cat "$d/c.err" >&2; fail "refusal: wrong error"; }
[ -s "$d/c.log" ] && fail "c.log written by a refused peer"
grep -q "refused pid [0-9]* uid $me " "$d/sealer.err" || fail "the sealer did not log the refusal"
stop_sealer
# ... and by gid: our primary gid on the list lets us in
start_sealer --allow-gid "$(id -g)"
"$WRITER" "$d/g.log" "$d/sock" 10 0 2>"$d/g.err" || { cat "$d/g.err" >&2; fail "--allow-gid: refused"; }
stop_sealer

# 5. as root: `nobody` is refused while root is allowed
mkdir -m 0777 "$d/nb"
asnobody() { setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$@"; }
if [ "$me" != 0 ] || ! id nobody >/dev/null 2>&1; then
	echo "sealer.sh: not root: the 'nobody' case is not run (the own-uid refusal above is)"
elif ! asnobody test -w "$d/nb"; then
	echo "sealer.sh: nobody cannot reach $d (TMPDIR not traversable): the 'nobody' case is not run"
else
	start_sealer --allow-uid 0
	asnobody "$WRITER" "$d/nb/n.log" "$d/sock" 10 0 2>"$d/n.err" && fail "nobody was served"
	grep -q 'open: Permission denied' "$d/n.err" || { cat "$d/n.err" >&2; fail "nobody: wrong error"; }
	grep -q "refused pid [0-9]* uid $(id -u nobody) " "$d/sealer.err" ||
		fail "nobody was not refused by the sealer (could it reach the socket?)"
	stop_sealer
	echo "sealer.sh: nobody refused"
fi

# 6. the sealer killed under a writer: the next record_sync fails, the record
#    is not in the log, everything acknowledged before is intact. Within the
#    epoch the seal request finds the sealer gone; past it, the epoch query.
lost() { # NAME SLEEP
	start_sealer --allow-uid "$me"
	rm -f "$d/in"; mkfifo "$d/in"
	"$WRITER" "$d/$1.log" "$d/sock" 30 0 hold <"$d/in" >"$d/$1.out" 2>"$d/$1.err" & wh=$!
	exec 3>"$d/in"
	i=0
	until grep -q ready "$d/$1.out"; do
		i=$((i + 1)); [ $i -gt 200 ] && fail "$1: hold writer not ready"; sleep 0.05
	done
	kill -KILL "$spid"; wait "$spid" 2>/dev/null; spid=
	sleep "$2"
	echo go >&3
	exec 3>&-
	wait $wh || { cat "$d/$1.out" "$d/$1.err" >&2; fail "$1: record_sync after the sealer died did not fail"; }
	grep -q 'after-loss: ' "$d/$1.out" || fail "$1: no after-loss line"
	grep -q '"action":"after-loss"' "$d/$1.log" && fail "$1: the failed record is in the log"
	grep -c '"type":"event"' "$d/$1.log" | grep -qx 30 || fail "$1: acknowledged records missing"
	"$VERIFY" --verify-key "$d/k/verify-key" --pubkey "$d/k/pubkey" "$d/$1.log" >"$d/v.out" 2>&1
	rc=$?
	[ $rc -le 1 ] || { cat "$d/v.out" >&2; fail "$1: verify exit $rc"; }
	grep -q '^intact' "$d/v.out" || { cat "$d/v.out" >&2; fail "$1: not intact"; }
	sed "s/^/  $1 writer: /" "$d/$1.out"
	# a new sealer on the same state: the log reopens and its chain continues
	start_sealer --allow-uid "$me"
	"$WRITER" "$d/$1.log" "$d/sock" 20 0 2>"$d/$1.err" || { cat "$d/$1.err" >&2; fail "$1: reopen"; }
	stop_sealer
	"$VERIFY" --verify-key "$d/k/verify-key" --pubkey "$d/k/pubkey" "$d/$1.log" >"$d/v.out" 2>&1
	[ $? -le 1 ] && grep -q '^intact' "$d/v.out" || { cat "$d/v.out" >&2; fail "$1: after reopen"; }
	grep -c '"type":"event"' "$d/$1.log" | grep -qx 50 || fail "$1: not 30 + 20 events after reopen"
	grep -q '^intact' "$d/v.out" && sed -n "s/^/  $1 reopened: /p" "$d/v.out" | grep -v 'head\|chain '
}
lost h 0
lost i 1.2
echo "sealer.sh: ok"

#!/bin/sh
# The writer's side of a lost auditlog-sealer (docs/sealer.md section 2), with
# a real sealer (Δ 1 s) killed and restarted under a running writer:
#   queue        AUDITLOG_SEALER_QUEUE: async records queue, record_sync and
#                flush answer -EAGAIN while away; the sealer restarted 2.5 s
#                later, the writer reconnects, the chain goes on: every event
#                is in the log once, it verifies with both keys, and the
#                absence is reported as a `gap` (exit 0 without --strict)
#   queue-ckpt   the same with a checkpoint in every batch: the new
#                connection's first request is the held batch's signature
#   queue-close  closed while the sealer is away: -ENOTCONN, nothing queued
#                is written, what was acknowledged verifies
#   queue-stale  the sealer that comes back has another key: the writer
#                refuses it and fails closed (-ESTALE), writes nothing queued
#   closed       the default fails closed and stays closed after the sealer
#                is back; what was acknowledged is there and verifies
#   fork         a forked child's calls answer -ECHILD and leave the parent's
#                log and sealer connection alone
# Args: auditlog-keygen auditlog-sealer auditlog-verify sealer_queue_writer
set -u
KEYGEN=$1
SEALER=$2
VERIFY=$3
WRITER=$4
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-sealer-queue.XXXXXX")
spid=
wpid=
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$d"
}
trap cleanup EXIT
fail() {
	echo "sealer_queue.sh: $*" >&2
	for f in "$d"/*.out "$d"/*.err; do [ -s "$f" ] && sed "s|^|  $(basename "$f"): |" "$f" >&2; done
	exit 1
}
. "$(dirname "$0")/sealer_lib.sh"
start_sealer() { start_sealer_with "${1:-$d/k}" --allow-uid "$(id -u)"; } # [KEYDIR]
kill_sealer() { kill -KILL "$spid"; wait "$spid" 2>/dev/null; spid=; rm -f "$d/sock"; }
stop_sealer() { kill -TERM "$spid"; wait "$spid"; spid=; }
# wait_for NAME WORD: the writer printed WORD
wait_for() {
	i=0
	until grep -q "^$2" "$d/$1.out"; do
		i=$((i + 1))
		[ $i -gt 300 ] && fail "$1: no '$2' from the writer"
		kill -0 "$wpid" 2>/dev/null || grep -q "^$2" "$d/$1.out" || fail "$1: writer exited before '$2'"
		sleep 0.05
	done
}
events() { grep -c "\"type\":\"event\".*\"action\":\"$2\"" "$d/$1.log"; }
# verify NAME: exit 0, no integrity finding (a gap is not one without --strict)
verify() {
	"$VERIFY" --verify-key "$d/k/verify-key" --pubkey "$d/k/pubkey" "$d/$1.log" >"$d/$1.v" 2>&1
	rc=$?
	[ $rc = 0 ] || { cat "$d/$1.v" >&2; fail "$1: verify exit $rc"; }
}
# run NAME MODE: a writer driven through a fifo; the sealer is killed at "ready"
start_writer() {
	rm -f "$d/$1.in"
	mkfifo "$d/$1.in"
	"$WRITER" "$d/$1.log" "$d/sock" "$2" <"$d/$1.in" >"$d/$1.out" 2>"$d/$1.err" &
	wpid=$!
	exec 3>"$d/$1.in"
}
end_writer() {
	exec 3>&-
	wait "$wpid"
	rc=$?
	wpid=
	[ $rc = 0 ] || fail "$1: writer exit $rc"
}
chmod 0755 "$d"
mkdir -m 0700 "$d/k"
"$KEYGEN" --host queue-test --delta 1 --dir "$d/k" >/dev/null 2>&1 || fail "keygen"

# 1. queue: killed, 2.5 s away (two epochs and more), restarted
start_sealer
start_writer q queue
wait_for q ready
kill_sealer
echo go >&3
wait_for q away
sleep 2.5
start_sealer
echo back >&3
end_writer q
stop_sealer
verify q
[ "$(events q before)" = 20 ] && [ "$(events q queued)" = 30 ] && [ "$(events q after-back)" = 1 ] ||
	fail "q: events before $(events q before) queued $(events q queued) after $(events q after-back), want 20 30 1"
[ "$(events q refused)" = 0 ] || fail "q: a record_sync refused with -EAGAIN was written"
grep -q '^gap' "$d/q.v" || grep -q ' gap' "$d/q.v" || { cat "$d/q.v" >&2; fail "q: no gap reported"; }
grep -q '"kind":"open"' "$d/q.log" && [ "$(grep -c '"kind":"open"' "$d/q.log")" != 1 ] &&
	fail "q: the reconnect wrote an open seal"
sed -n 's/^/  queue: /p' "$d/q.out" | grep stats
sed -n 's/^/  queue verify: /p' "$d/q.v" | grep -v '^  queue verify: *$' | head -5

# 1b. queue-ckpt: a checkpoint in every batch, so that the batch the loss
# stops is retried from its signature, the new connection's first request
start_sealer
start_writer qk queue-ckpt
wait_for qk ready
kill_sealer
echo go >&3
wait_for qk away
start_sealer
echo back >&3
end_writer qk
stop_sealer
verify qk
[ "$(events qk before)" = 20 ] && [ "$(events qk queued)" = 30 ] && [ "$(events qk after-back)" = 1 ] ||
	fail "qk: events before $(events qk before) queued $(events qk queued) after $(events qk after-back), want 20 30 1"
[ "$(grep -c '"type":"checkpoint"' "$d/qk.log")" -ge 3 ] || fail "qk: fewer checkpoints than batches"

# 2. queue-close: closed while the sealer is away
start_sealer
start_writer qc queue-close
wait_for qc ready
kill_sealer
echo go >&3
end_writer qc
grep -q '^close: Transport endpoint is not connected' "$d/qc.out" || fail "qc: close did not answer -ENOTCONN"
verify qc
[ "$(events qc before)" = 20 ] && [ "$(events qc queued)" = 0 ] ||
	fail "qc: events before $(events qc before) queued $(events qc queued), want 20 0"

# 2b. queue-stale: the sealer back with another key is refused
mkdir -m 0700 "$d/k2"
"$KEYGEN" --host queue-test --delta 1 --dir "$d/k2" >/dev/null 2>&1 || fail "keygen k2"
start_sealer
start_writer qs queue-stale
wait_for qs ready
kill_sealer
echo go >&3
wait_for qs away
start_sealer "$d/k2"
echo back >&3
end_writer qs
stop_sealer
grep -q '^close: Stale file handle' "$d/qs.out" || fail "qs: close did not answer -ESTALE"
verify qs
[ "$(events qs before)" = 20 ] && [ "$(events qs queued)" = 0 ] && [ "$(events qs after-back)" = 0 ] ||
	fail "qs: events before $(events qs before) queued $(events qs queued) after $(events qs after-back), want 20 0 0"

# 3. closed (the default): fails closed, stays closed
start_sealer
start_writer c closed
wait_for c ready
kill_sealer
echo go >&3
wait_for c away
start_sealer
echo back >&3
end_writer c
stop_sealer
verify c
[ "$(events c before)" = 20 ] && [ "$(events c after-loss)" = 0 ] && [ "$(events c after-back)" = 0 ] ||
	fail "c: events before $(events c before), after the loss $(events c after-loss) and $(events c after-back), want 20 0 0"

# 4. fork
start_sealer
"$WRITER" "$d/f.log" "$d/sock" fork >"$d/f.out" 2>"$d/f.err" || fail "f: fork writer"
stop_sealer
verify f
[ "$(events f before)" = 20 ] && [ "$(events f after-fork)" = 10 ] && [ "$(events f child)" = 0 ] ||
	fail "f: events before $(events f before) after-fork $(events f after-fork) child $(events f child)"
echo "sealer_queue.sh: ok"

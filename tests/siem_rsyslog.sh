#!/bin/sh
# A real multi-host shipping pipeline (issue 14): three writer "hosts", each
# its own v2 chain (keys from auditlog-keygen) rotating every second or two,
# each tailed by its own rsyslogd (imfile, inotify) that forwards the raw
# lines over RELP on loopback to a central rsyslogd (imrelp) writing one file
# per host. Mid-stream, host 1's rsyslogd and then the central one are
# restarted. Then, on the central copy of every host:
#   - every line the host wrote arrived, byte for byte (set equality with the
#     host's files), and nothing else arrived;
#   - a repeated line (and 20 replayed on purpose in host 2's copy) is
#     counted and is a byte-identical repeat of a line
#     that arrived before (RELP is at-least-once; imfile sometimes reads a
#     renamed file twice: docs/siem.md);
#   - the central copy put in seq order (a shipper restart interleaves two
#     files; counted; a stable sort puts each repeat right after its first
#     arrival) verifies as a stream (`auditlog-verify --dedup --verify-key
#     --pubkey -`) with the verdict, chain, head and findings of the host's
#     own files, its repeats each a shipper-duplicate notice.
# Each host writes from 4 threads. The SIEM is the witness: auditlog-witness
# follow (restarted mid-stream too) verifies the central copies as they
# grow and cosigns every checkpoint; at the end it has cosigned each host's
# last checkpoint, the host's files verify with what it exports
# (--witness --witness-key), and an attacker holding host 1's keys who
# rewrites its files after that is caught (`rewritten`), as is a truncated
# copy (`truncated`) (tests/siem_attack.py). The figures: records/s end to
# end and the lag from a record's @timestamp to its arrival at the centre
# (tests/siem_lag.py), printed at the end (docs/benchmarks.md).
# No system service: private configs, work directories, pid files, loopback
# ports chosen at run time; every daemon is killed on exit. The configs are
# the ones docs/siem.md shows.
# Args: auditlog-keygen auditlog-verify v2_e2e_writer auditlog-witness
set -u
KEYGEN=$1
VERIFY=$2
WRITER=$3
WITNESS=$4
HERE=$(cd "$(dirname "$0")" && pwd)
RSYSLOGD=${RSYSLOGD:-/usr/sbin/rsyslogd}
[ -x "$RSYSLOGD" ] || { echo "siem_rsyslog: $RSYSLOGD missing (scripts/install-deps.sh installs rsyslog)"; exit 1; }
# rsyslogd loads its modules from its built-in directory; check RELP is there
relp=
for m in /usr/lib/*/rsyslog/omrelp.so /usr/lib/rsyslog/omrelp.so; do
	[ -f "$m" ] && [ -f "${m%/*}/imrelp.so" ] && relp=$m
done
[ -n "$relp" ] || { echo "siem_rsyslog: omrelp/imrelp missing (scripts/install-deps.sh installs rsyslog-relp)"; exit 1; }

d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-siem.XXXXXX")
wpids=
witpid=
lagpid=
cleanup() {
	for p in $wpids $witpid $lagpid; do kill "$p" 2>/dev/null; done
	for f in "$d"/*/rsyslogd.pid; do
		[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	sleep 0.2
	for f in "$d"/*/rsyslogd.pid; do
		[ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
	done
	if [ -n "${SIEM_KEEP:-}" ]; then echo "kept $d" >&2; else rm -rf "$d"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
	echo "siem_rsyslog: $*" >&2
	for f in "$d"/*/rsyslogd.err; do [ -s "$f" ] && { echo "== $f" >&2; tail -20 "$f" >&2; }; done
	exit 1
}
HOSTS="1 2 3"

# loopback ports free now (bound and released by the kernel's choice)
ports=$(python3 -c 'import socket
ss=[socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))') || fail "no free ports"
port() { echo "$ports" | cut -d' ' -f"$1"; }

# ---- the configs (docs/siem.md shows them with these paths as placeholders)
mkdir -p "$d/central/work"
{
	cat <<EOF
global(workDirectory="$d/central/work" maxMessageSize="64k")
module(load="imrelp")
# the line exactly as the host sent it: no syslog header, one \n
template(name="auditlog_line" type="string" string="%rawmsg%\n")
EOF
	for h in $HOSTS; do
		cat <<EOF
ruleset(name="from_host$h") {
  action(type="omfile" file="$d/central/host$h.log" template="auditlog_line")
}
input(type="imrelp" address="127.0.0.1" port="$(port "$h")" ruleset="from_host$h")
EOF
	done
} >"$d/central/rsyslog.conf"

for h in $HOSTS; do
	mkdir -p "$d/host$h/log" "$d/host$h/work" "$d/host$h/keys"
	"$KEYGEN" --host "host$h.example" --delta 1 --dir "$d/host$h/keys" >/dev/null || fail "keygen host$h"
	cat >"$d/host$h/rsyslog.conf" <<EOF
global(workDirectory="$d/host$h/work" maxMessageSize="64k")
module(load="imfile" mode="inotify")
module(load="omrelp")
# the raw line, unchanged (imfile gives it without its \n; RELP frames it)
template(name="auditlog_raw" type="string" string="%rawmsg%")
ruleset(name="auditlog_ship") {
  action(type="omrelp" target="127.0.0.1" port="$(port "$h")" template="auditlog_raw"
         queue.type="LinkedList" queue.filename="auditlog_ship" queue.saveOnShutdown="on"
         action.resumeRetryCount="-1" action.resumeInterval="1")
}
# the active file and its rotated names: a file renamed by rotation is still
# read to its end, and one rotated while rsyslogd was down is found again
input(type="imfile" file="$d/host$h/log/audit.log*" tag="auditlog" ruleset="auditlog_ship"
      freshStartTail="off" reopenOnTruncate="off" persistStateInterval="1")
EOF
done

start() { # dir
	"$RSYSLOGD" -n -f "$1/rsyslog.conf" -i "$1/rsyslogd.pid" >>"$1/rsyslogd.err" 2>&1 &
	i=0
	while [ ! -s "$1/rsyslogd.pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	[ -s "$1/rsyslogd.pid" ] || fail "rsyslogd in $1 did not start"
}
stop() { # dir: SIGTERM, wait until it is gone
	p=$(cat "$1/rsyslogd.pid")
	kill -TERM "$p"
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	kill -0 "$p" 2>/dev/null && fail "rsyslogd in $1 did not stop"
	rm -f "$1/rsyslogd.pid"
}

for dir in central host1 host2 host3; do
	"$RSYSLOGD" -N1 -f "$d/$dir/rsyslog.conf" >"$d/$dir/check" 2>&1 ||
		{ cat "$d/$dir/check" >&2; fail "$dir: rsyslogd -N1 rejects the config"; }
done
# the witness at the centre (docs/siem.md 7): its key, the registered hosts
W=$d/central/witness
mkdir -p "$W/key" "$W/hosts" "$W/state"
"$KEYGEN" --host siem.example --delta 1 --dir "$W/key" >/dev/null || fail "keygen siem.example"
for h in $HOSTS; do cp "$d/host$h/keys/pubkey" "$W/hosts/host$h.pub"; done
wstart() {
	"$WITNESS" --state "$W/state" --key "$W/key/signing-key" --hosts "$W/hosts" follow \
		"$d/central/host1.log" "$d/central/host2.log" "$d/central/host3.log" >>"$W/out" 2>>"$W/err" &
	witpid=$!
}

start "$d/central"
for h in $HOSTS; do start "$d/host$h"; done
wstart
python3 "$HERE/siem_lag.py" "$d/lag.stop" "$d/lag.disturb" "$d/lag.out" "$d/central/host1.log" "$d/central/host2.log" \
	"$d/central/host3.log" &
lagpid=$!

# the writers: 4 threads each, 600 events a thread, a flush and 500 ms pause
# every 25 (about 12 s), rotating at 64 KiB (about every 1.5 s)
for h in $HOSTS; do
	k=$d/host$h/keys
	"$WRITER" "$d/host$h/log/audit.log" "$k/sealing-state" "$k/signing-key" 600 65536 500 threads=4 \
		2>"$d/host$h/writer.err" &
	wpids="$wpids $!"
done

sleep 4
touch "$d/lag.disturb"
stop "$d/host1"
sleep 2 # host 1 writes on (and rotates) while its shipper is down
start "$d/host1"
sleep 1
kill -TERM "$witpid"
wait "$witpid" || fail "the witness did not stop cleanly on SIGTERM: $(cat "$W/err")"
wstart # restarted mid-stream: it reads its state and the copies again
sleep 1
stop "$d/central"
sleep 1.5 # every host's omrelp retries while the centre is down
start "$d/central"

for p in $wpids; do wait "$p" || fail "a writer failed: $(cat "$d"/host*/writer.err)"; done
wpids=

# the host's lines, all files (the set is what counts; order is the chain's)
for h in $HOSTS; do
	n=$(ls "$d/host$h/log" | wc -l)
	[ "$n" -ge 5 ] || fail "host$h rotated too little: $n files"
	cat "$d/host$h/log"/audit.log* | sort >"$d/host$h/want"
done

# wait until every line has arrived (or 60 s)
i=0
while :; do
	done_=1
	for h in $HOSTS; do
		[ -f "$d/central/host$h.log" ] && sort -u "$d/central/host$h.log" | cmp -s - "$d/host$h/want" || done_=0
	done
	[ $done_ = 1 ] && break
	[ $i -ge 600 ] && break
	sleep 0.1
	i=$((i + 1))
done

# the witness has cosigned each host's last checkpoint (or 30 s)
last_ck() { grep -h '"type":"checkpoint"' "$d/host$1/log"/audit.log* | sed 's/.*"size":\([0-9]*\),.*/\1/' | sort -n | tail -1; }
i=0
while :; do
	done_=1
	for h in $HOSTS; do
		f=$(ls "$W/state" | grep "^host$h\.example," | head -1)
		[ -n "$f" ] && [ "$(sed -n 's/^size //p' "$W/state/$f")" = "$(last_ck "$h")" ] || done_=0
	done
	[ $done_ = 1 ] && break
	[ $i -ge 300 ] && { cat "$W/err" >&2; fail "the witness did not cosign every host's last checkpoint"; }
	sleep 0.1
	i=$((i + 1))
done
touch "$d/lag.stop"
wait "$lagpid" || fail "siem_lag: $(cat "$d/lag.out")"
lagpid=
kill -TERM "$witpid"
wait "$witpid" || fail "the witness did not stop cleanly: $(tail -5 "$W/err")"
witpid=
grep -q ': refused: ' "$W/err" && { cat "$W/err" >&2; fail "the witness refused a checkpoint of an honest pipeline"; }
"$WITNESS" --state "$W/state" export >"$W/witness-all" || fail "witness export"
[ "$(grep -c '^siem\.example\|^— siem\.example ' "$W/witness-all")" = 3 ] || fail "export: not one cosigned note per host"
for h in $HOSTS; do
	k=$d/host$h/keys
	f=$(ls "$W/state" | grep "^host$h\.example,")
	"$WITNESS" --state "$W/state" export "host$h.example/auditlog/${f#*,}" >"$W/witness-host$h" ||
		fail "witness export host$h"
	"$VERIFY" --pubkey "$k/pubkey" --witness "$W/witness-host$h" --witness-key "$W/key/pubkey" "$d/host$h/log" \
		>"$d/host$h/wout" 2>&1 || { cat "$d/host$h/wout" >&2; fail "host$h: its files do not verify with the witness file"; }
	grep -q "^witness: chain .* size $(last_ck "$h") cosigned by siem.example" "$d/host$h/wout" ||
		fail "host$h: the report does not name the witness's cosignature of size $(last_ck "$h")"
done
echo "siem_rsyslog: witness: $(grep -c '^cosigned' "$W/out") checkpoints cosigned, restarted once mid-stream," \
	"repeated lines dropped after the restart: $(grep -h 'repeated line' "$W/err" | tail -3 | sed 's/.* bytes, \([0-9]*\) repeated.*/\1/' | tr '\n' ' ')"
mkdir -p "$d/attack"
python3 "$HERE/siem_attack.py" "$VERIFY" "$d/host1/log" "$d/host1/keys" "$W/witness-host1" "$W/key/pubkey" \
	"$d/attack" || fail "host1: the witness does not catch the rewritten or truncated files"
echo "siem_rsyslog: figures: 3 hosts x 4 threads, $(cat "$d/lag.out")"

total_rep=0
for h in $HOSTS; do
	c=$d/central/host$h.log
	[ -f "$c" ] || fail "no central copy of host$h"
	if [ "$h" = 2 ]; then
		# a RELP replay after a reconnect, made here so that every run has
		# one: lines 500..519 of host 2's central copy once more after 519
		awk 'NR>=500&&NR<=519{a[n++]=$0} {print} NR==519{for(i=0;i<n;i++)print a[i]}' "$c" >"$d/host2/replayed"
		c=$d/host2/replayed
	fi
	sort -u "$c" >"$d/host$h/got"
	if ! cmp -s "$d/host$h/got" "$d/host$h/want"; then
		echo "missing at the centre: $(comm -13 "$d/host$h/got" "$d/host$h/want" | wc -l)," \
			"not written by the host: $(comm -23 "$d/host$h/got" "$d/host$h/want" | wc -l)" >&2
		fail "host$h: the central copy does not hold exactly the host's lines"
	fi
	lines=$(wc -l <"$c")
	uniq_=$(wc -l <"$d/host$h/got")
	rep=$((lines - uniq_))
	total_rep=$((total_rep + rep))
	# lines that arrived after a later seq are counted (repeats aside); put
	# in seq order the copy is the chain with each repeat right after its
	# first arrival: --dedup counts those (docs/siem.md 5)
	late=$(awk -F'"seq":' '!seen[$0]++ {split($2, a, ","); s = a[1] + 0; if (NR > 1 && s < max) n++; if (s > max) max = s}
		END {print n + 0}' "$c")
	awk -F'"seq":' '{split($2, a, ","); print a[1] "\t" $0}' "$c" | sort -s -n -k1,1 | cut -f2- \
		>"$d/host$h/ordered"
	k=$d/host$h/keys
	"$VERIFY" --dedup --verify-key "$k/verify-key" --pubkey "$k/pubkey" - <"$d/host$h/ordered" \
		>"$d/host$h/vout" 2>"$d/host$h/verr"
	rc=$?
	[ $rc = 0 ] || { cat "$d/host$h/vout" "$d/host$h/verr" >&2; fail "host$h: the central copy does not verify as a stream (exit $rc)"; }
	# the same verdict, chain, head and findings (by class and seq) as the
	# host's own files (a closed v2 log ends in a `close` seal after its last
	# checkpoint: unsigned-tail 1, exit 0, in both)
	"$VERIFY" --verify-key "$k/verify-key" --pubkey "$k/pubkey" "$d/host$h/log" >"$d/host$h/hout" 2>&1 ||
		fail "host$h: its own files do not verify"
	dups=$(grep -c ': shipper-duplicate: ' "$d/host$h/vout")
	[ "$dups" = "$rep" ] || fail "host$h: $rep repeat(s) arrived, --dedup reported $dups"
	if [ "$rep" -gt 0 ]; then
		grep -q "^findings: .*shipper-duplicate $rep\b" "$d/host$h/vout" || fail "host$h: no shipper-duplicate count"
	fi
	# (the summary's bytes are the bytes read, repeats included)
	grep -v ': shipper-duplicate: ' "$d/host$h/vout" |
		sed 's/^[^ ]*: offset [0-9]*, //; s/ shipper-duplicate [0-9]*//; s/, [0-9]* bytes$//' >"$d/host$h/vout.n"
	sed 's/^[^ ]*: offset [0-9]*, //; s/, [0-9]* bytes$//' "$d/host$h/hout" >"$d/host$h/hout.n"
	cmp -s "$d/host$h/vout.n" "$d/host$h/hout.n" ||
		{ diff "$d/host$h/hout.n" "$d/host$h/vout.n" >&2; fail "host$h: the central copy's verdict differs from the host's"; }
	grep -q "^intact: .* $uniq_ records" "$d/host$h/vout" || fail "host$h: not intact: $(cat "$d/host$h/vout")"
	files=$(ls "$d/host$h/log" | wc -l)
	echo "siem_rsyslog: host$h: $uniq_ lines in $files files arrived whole; $rep byte-identical repeats; $late arrived after a later seq; $(grep '^  head' "$d/host$h/vout" | tr -s ' ')"
done
# a host that drops a range on purpose (a shipper filter deleting seq
# 300..349 before it ships): caught at the centre, with the range
h=3
awk -F'"seq":' '{split($2, a, ","); s = a[1] + 0; if (s >= 300 && s < 350) next; print}' \
	"$d/host$h/ordered" >"$d/host$h/dropped"
"$VERIFY" --dedup --verify-key "$d/host$h/keys/verify-key" --pubkey "$d/host$h/keys/pubkey" - \
	<"$d/host$h/dropped" >"$d/host$h/dout" 2>&1
rc=$?
[ $rc = 1 ] || { cat "$d/host$h/dout" >&2; fail "host$h: a dropped range verified (exit $rc)"; }
grep -q ', seq 350: deleted: seq jumps from 299 to 350: 50 record(s) missing' "$d/host$h/dout" ||
	{ cat "$d/host$h/dout" >&2; fail "host$h: the dropped range 300..349 is not reported as such"; }
echo "siem_rsyslog: host$h with seq 300..349 dropped on purpose: caught at the centre ($(grep -o 'deleted: .*' "$d/host$h/dout"))"
echo "siem_rsyslog: rsyslogd $("$RSYSLOGD" -v | head -1 | cut -d' ' -f2-3); repeats in all: $total_rep"
exit 0

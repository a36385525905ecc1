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
# No system service: private configs, work directories, pid files, loopback
# ports chosen at run time; every daemon is killed on exit. The configs are
# the ones docs/siem.md shows. Args: auditlog-keygen auditlog-verify v2_e2e_writer
set -u
KEYGEN=$1
VERIFY=$2
WRITER=$3
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
cleanup() {
	for p in $wpids; do kill "$p" 2>/dev/null; done
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
start "$d/central"
for h in $HOSTS; do start "$d/host$h"; done

# the writers: 2000 events each, a flush and 150 ms pause every 25 (about
# 12 s), rotating at 64 KiB (about every 1.5 s)
for h in $HOSTS; do
	k=$d/host$h/keys
	"$WRITER" "$d/host$h/log/audit.log" "$k/sealing-state" "$k/signing-key" 2000 65536 150 \
		2>"$d/host$h/writer.err" &
	wpids="$wpids $!"
done

sleep 4
stop "$d/host1"
sleep 2 # host 1 writes on (and rotates) while its shipper is down
start "$d/host1"
sleep 2
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
echo "siem_rsyslog: rsyslogd $("$RSYSLOGD" -v | head -1 | cut -d' ' -f2-3); repeats in all: $total_rep"
exit 0

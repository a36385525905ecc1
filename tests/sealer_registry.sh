#!/bin/sh
# The sealer's registry of chains (docs/format.md 26, docs/sealer.md 6) with a
# real auditlog-sealer and real writer processes (tests/sealer_writer.c):
#  1. two writers, all files present: intact with --registry, both registered
#  2. one chain's files left out: missing-chain naming it, exit 1 (also through
#     auditlog_verifier_add_registry)
#  3. one chain's tail cut at a seal (intact without the registry): truncated
#     against its registered close, exit 1
#  4. the registry's own file edited: a finding at the registry's file, exit 1
#  5. a writer killed: chain-lost; its tail cut: a gap (exit 0, 1 with --strict)
#  6. the sealer SIGKILLed under two writers and restarted: the registry goes
#     on (recovered), the chains opened before and after are all registered,
#     those open at the kill are checked to their first seal (missing-chain
#     without them, truncated before it)
#  7. the sealer stopped by SIGTERM under a writer: its segment is lost
# Args: auditlog-keygen auditlog-sealer auditlog-verify sealer_writer
set -u
KEYGEN=$1
SEALER=$2
VERIFY=$3
WRITER=$4
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-registry.XXXXXX")
spid=
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null; wait 2>/dev/null; rm -rf "$d"; }
trap cleanup EXIT
fail() { echo "sealer_registry.sh: $*" >&2; [ -f "$d/sealer.err" ] && sed 's/^/  sealer: /' "$d/sealer.err" >&2; exit 1; }
. "$(dirname "$0")/sealer_lib.sh"
start_sealer() { start_sealer_with "$d/k" --registry "$d/reg"; }
stop_sealer() {
	kill -TERM "$spid"
	wait "$spid"; rc=$?
	spid=
	[ "$rc" = 0 ] || fail "sealer exit $rc on SIGTERM"
}
# v WANT_RC ARGS...: auditlog-verify with both keys and the registry, output in $d/v.out
v() {
	want=$1
	shift
	"$VERIFY" --verify-key "$d/k/verify-key" --pubkey "$d/k/pubkey" --registry "$d/reg" "$@" >"$d/v.out" 2>&1
	rc=$?
	[ "$rc" = "$want" ] || { cat "$d/v.out" >&2; fail "verify $*: exit $rc, want $want"; }
}
expect() { grep -q -- "$1" "$d/v.out" || { cat "$d/v.out" >&2; fail "no '$1' in the report"; }; }
chain_of() { sed -n 's/.*"chain_id":"\([0-9a-f]\{32\}\)".*/\1/p;q' "$1"; }
# cut FILE OUT: FILE up to its third seal from the end (a cut at a seal line)
cut_at_seal() {
	n=$(grep -n '"type":"seal"' "$1" | tail -3 | head -1 | cut -d: -f1)
	head -n "$n" "$1" >"$2"
}
mkdir -m 0700 "$d/k"
"$KEYGEN" --host registry-test --delta 1 --dir "$d/k" >/dev/null 2>&1 || fail "keygen"
mkdir "$d/logs"

# 1. two writers through one sealer; every chain present
start_sealer
"$WRITER" "$d/logs/a.log" "$d/sock" 120 300 2>"$d/a.err" & wa=$!
"$WRITER" "$d/logs/b.log" "$d/sock" 120 300 2>"$d/b.err" & wb=$!
wait $wa || { cat "$d/a.err" >&2; fail "writer a"; }
wait $wb || { cat "$d/b.err" >&2; fail "writer b"; }
ca=$(chain_of "$d/logs/a.log")
cb=$(chain_of "$d/logs/b.log")
[ -n "$ca" ] && [ -n "$cb" ] || fail "no chain ids"
[ -f "$d/reg/registry.log" ] || fail "no registry.log in --registry DIR"
grep -q "\"action\":\"chain-open\".*\"chain.id\":\"$ca\"" "$d/reg/registry.log" || fail "chain a not registered open"
grep -q "\"action\":\"chain-close\".*\"chain.id\":\"$cb\"" "$d/reg/registry.log" || fail "chain b not registered closed"
v 0 "$d/logs/a.log" "$d/logs/b.log"
expect '^intact'
expect 'registry: 2 segment(s) of 2 chain(s)'
expect 'seals verified'

# 2. b's files left out (deleted): missing-chain, naming b and its range
v 1 "$d/logs/a.log"
expect "missing-chain: the sealer registered chain $cb (sealed seq 2\.\."
grep -c 'missing-chain:' "$d/v.out" | grep -qx 1 || { cat "$d/v.out" >&2; fail "not one missing-chain"; }

# the same through the public API (auditlog_verifier_add_registry)
"$WRITER" registry "$d/k/verify-key" "$d/reg" "$d/logs/a.log" "$d/logs/b.log" >"$d/api.out" ||
	fail "the API run failed"
grep -qx 'missing-chain 0 truncated 0 integrity 0' "$d/api.out" || { cat "$d/api.out" >&2; fail "API: not intact"; }
"$WRITER" registry "$d/k/verify-key" "$d/reg" "$d/logs/a.log" >"$d/api.out" || fail "the API run failed"
grep -qx 'missing-chain 1 truncated 0 integrity 1' "$d/api.out" || { cat "$d/api.out" >&2; fail "API: no missing-chain"; }
"$WRITER" registry "$d/k/verify-key" "$d/nothing" "$d/logs/a.log" >"$d/api.out" 2>&1 &&
	fail "API: a registry that is not there did not fail the run"

# 3. a's tail cut at a seal: the chain alone says intact, the registry truncated
mkdir "$d/cut"
cut_at_seal "$d/logs/a.log" "$d/cut/a.log"
"$VERIFY" --verify-key "$d/k/verify-key" --pubkey "$d/k/pubkey" "$d/cut/a.log" "$d/logs/b.log" >/dev/null 2>&1 ||
	fail "the cut chain is not intact alone (the test wants the registry to be what sees it)"
v 1 "$d/cut/a.log" "$d/logs/b.log"
expect "truncated: chain $ca ends at seq"
expect "registered it closed at seq"

# 4. the registry's own file edited (another peer uid in a chain-open record)
mkdir "$d/badreg"
cp "$d/reg/registry.log" "$d/badreg/registry.log"
sed -i '0,/"action":"chain-open"/s/"peer.uid":\([0-9]*\)/"peer.uid":9\1/' "$d/badreg/registry.log"
cmp -s "$d/reg/registry.log" "$d/badreg/registry.log" && fail "the edit changed nothing"
"$VERIFY" --verify-key "$d/k/verify-key" --pubkey "$d/k/pubkey" --registry "$d/badreg" "$d/logs/a.log" \
	"$d/logs/b.log" >"$d/v.out" 2>&1
[ $? = 1 ] || { cat "$d/v.out" >&2; fail "an edited registry is not a finding"; }
grep -q "badreg/registry.log:[0-9]*: .*\(modified\|bad-seal\)" "$d/v.out" ||
	{ cat "$d/v.out" >&2; fail "no finding at the edited registry file"; }

# 5. a writer killed: chain-lost with its last seal; its tail cut is a gap
mkfifo "$d/fifo"
"$WRITER" "$d/logs/c.log" "$d/sock" 60 0 hold <"$d/fifo" >"$d/c.out" 2>"$d/c.err" & wc=$!
exec 3>"$d/fifo"
i=0
until grep -q ready "$d/c.out"; do
	i=$((i + 1)); [ $i -gt 200 ] && fail "writer c not ready"; sleep 0.05
done
kill -KILL $wc
wait $wc 2>/dev/null
exec 3>&-
cc=$(chain_of "$d/logs/c.log")
i=0
until grep -q "\"action\":\"chain-lost\".*\"chain.id\":\"$cc\"" "$d/reg/registry.log"; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "writer c's end not registered lost"; sleep 0.05
done
# (c.log itself may end in a batch the kill tore: a crash's damage, not
# the registry's; the cut below is at a seal, clean)
cut_at_seal "$d/logs/c.log" "$d/cut/c.log"
v 0 "$d/logs/a.log" "$d/logs/b.log" "$d/cut/c.log"
expect "gap: chain $cc ends at seq .*registered it lost"
"$VERIFY" --strict --verify-key "$d/k/verify-key" --pubkey "$d/k/pubkey" --registry "$d/reg" \
	"$d/logs/a.log" "$d/logs/b.log" "$d/cut/c.log" >/dev/null 2>&1
[ $? = 1 ] || fail "--strict: a lost writer's cut tail is not a finding"

# 6. the sealer SIGKILLed under writers e and g, restarted: the registry continues
mkfifo "$d/fifo2"
"$WRITER" "$d/logs/e.log" "$d/sock" 30 0 hold <"$d/fifo" >"$d/e.out" 2>"$d/e.err" & we=$!
exec 3>"$d/fifo"
"$WRITER" "$d/logs/g.log" "$d/sock" 30 0 hold <"$d/fifo2" >"$d/g.out" 2>"$d/g.err" & wg=$!
exec 4>"$d/fifo2"
i=0
until grep -q ready "$d/e.out" && grep -q ready "$d/g.out"; do
	i=$((i + 1)); [ $i -gt 200 ] && fail "writers e, g not ready"; sleep 0.05
done
kill -KILL "$spid"
wait "$spid" 2>/dev/null
spid=
echo go >&3
echo go >&4
exec 3>&- 4>&-
wait $we || { cat "$d/e.err" >&2; fail "writer e claimed a record durable without its sealer"; }
wait $wg || { cat "$d/g.err" >&2; fail "writer g claimed a record durable without its sealer"; }
ce=$(chain_of "$d/logs/e.log")
cg=$(chain_of "$d/logs/g.log")
rm -f "$d/sock"
start_sealer
"$WRITER" "$d/logs/f.log" "$d/sock" 40 0 2>"$d/f.err" || { cat "$d/f.err" >&2; fail "writer f"; }
"$WRITER" "$d/logs/e.log" "$d/sock" 10 0 2>"$d/e2.err" || { cat "$d/e2.err" >&2; fail "writer e reopened"; }
cf=$(chain_of "$d/logs/f.log")
stop_sealer
[ "$(grep -c '"kind":"open"' "$d/reg/registry.log")" = 2 ] || fail "the registry was not reopened once"
[ "$(grep -c '"type":"header"' "$d/reg/registry.log")" = 1 ] || fail "the registry did not continue its chain"
L="$d/logs/a.log $d/logs/b.log $d/cut/c.log" # c: a gap (a notice)
v 0 $L "$d/logs/e.log" "$d/logs/f.log" "$d/logs/g.log"
expect '^intact'
expect 'registry: 7 segment(s) of 6 chain(s)'
grep -q "\"action\":\"chain-open\".*\"chain.id\":\"$cf\"" "$d/reg/registry.log" || fail "chain f not registered"
# e's first segment stayed open (the sealer was killed): without e it is missing
v 1 $L "$d/logs/f.log" "$d/logs/g.log"
expect "missing-chain: the sealer registered chain $ce (sealed seq 2\.\.[0-9]*, a segment of it still open"
# g was never reopened: its one segment is open, checked to its first seal
v 1 $L "$d/logs/e.log" "$d/logs/f.log"
expect "missing-chain: the sealer registered chain $cg (sealed from seq 2, still open"
head -n 1 "$d/logs/g.log" >"$d/cut/g.log" # its header alone: before its first seal
v 1 $L "$d/logs/e.log" "$d/logs/f.log" "$d/cut/g.log"
expect "truncated: chain $cg ends at seq 0, before seq 2, the first seal"
# f (after the restart) too
v 1 $L "$d/logs/e.log" "$d/logs/g.log"
expect "missing-chain: the sealer registered chain $cf"

# 7. the sealer stopped (SIGTERM) under a writer: its segment is registered lost
start_sealer
"$WRITER" "$d/logs/h.log" "$d/sock" 20 0 hold <"$d/fifo" >"$d/h.out" 2>"$d/h.err" & wh=$!
exec 3>"$d/fifo"
i=0
until grep -q ready "$d/h.out"; do
	i=$((i + 1)); [ $i -gt 200 ] && fail "writer h not ready"; sleep 0.05
done
stop_sealer
echo go >&3
exec 3>&-
wait $wh || fail "writer h claimed a record durable without its sealer"
ch=$(chain_of "$d/logs/h.log")
grep -q "\"action\":\"chain-lost\".*\"chain.id\":\"$ch\"" "$d/reg/registry.log" ||
	fail "SIGTERM: writer h's segment not registered lost"
v 0 $L "$d/logs/e.log" "$d/logs/f.log" "$d/logs/g.log" "$d/logs/h.log"
expect 'registry: 8 segment(s) of 7 chain(s)'
echo "sealer_registry.sh: ok"

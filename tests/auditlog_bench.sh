#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# auditlog-bench on tiny runs: the JSON report holds the CPU-per-event split
# (worker, producers, their sum), the token-shaped arms with exactly one record
# per operation, --line-size makes lines of the size asked for (through --log,
# checked on the file itself), format v2 passes the sealing files to the
# library and reports its refusal, with real keys (AUDITLOG_KEYGEN) its
# token-shaped arms hold one event record per operation plus the seals and
# trees the writer adds, --phases parts reports each v2 format function, bad
# arguments exit 2, and no directory is left behind. Timings are never asserted.
#
#   auditlog_bench.sh AUDITLOG_BENCH [AUDITLOG_KEYGEN]
#
# Exit 77 (skip) when /usr/bin/python3 is missing or the scratch directory
# under $TMPDIR (default /var/tmp) is on a file system the bench refuses.
set -euo pipefail

BENCH=${1:?usage: auditlog_bench.sh AUDITLOG_BENCH [AUDITLOG_KEYGEN]}
KEYGEN=${2:-}
PY=/usr/bin/python3

if [ ! -x "$PY" ]; then
	echo "SKIP: $PY is missing (the reports are checked with it)"
	exit 77
fi
vtmp=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-bench-test.XXXXXX")
trap 'rm -rf "$vtmp"' EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

run() { # run EXPECTED_RC ARGS...: auditlog-bench's exit status must be EXPECTED_RC
	local want=$1 rc=0
	shift
	"$BENCH" "$@" >"$vtmp/out" 2>"$vtmp/err" || rc=$?
	if [ "$rc" -eq 2 ] && grep -q "refusing the target" "$vtmp/err"; then
		cat "$vtmp/err"
		echo "SKIP: $vtmp is on a file system auditlog-bench refuses"
		exit 77
	fi
	if [ "$rc" -ne "$want" ]; then
		cat "$vtmp/err" >&2
		fail "$BENCH $* exited $rc, expected $want"
	fi
}

# -- bad arguments: exit 2 and a message naming the problem
run 2 --line-size 128
grep -q "shortest, with only action and outcome, is [0-9]* bytes.*smallest size all of them reach is 2[0-9][0-9];" "$vtmp/err" ||
	fail "--line-size 128: no word of the shortest line: $(cat "$vtmp/err")"
run 2 --format-version 2
grep -q "needs --seal-state FILE and --signing-key FILE" "$vtmp/err" ||
	fail "v2 without keys: $(cat "$vtmp/err")"
run 2 --seal-state "$vtmp/s" --signing-key "$vtmp/k"
grep -q "for --format-version 2 only" "$vtmp/err" || fail "keys with v1: $(cat "$vtmp/err")"
run 2 --phases sustained,bogus
grep -q "'bogus' is not" "$vtmp/err" || fail "--phases bogus: $(cat "$vtmp/err")"

# -- v2: the files reach auditlog_config_set_sealing and the library's answer is
# reported as a failure of the library (exit 1), never as a figure
: >"$vtmp/seal.state"
: >"$vtmp/sign.key"
run 1 --format-version 2 --seal-state "$vtmp/seal.state" --signing-key "$vtmp/sign.key" \
	--events 1000 --phases sync --sync-samples 10 --dir "$vtmp"
grep -q "cannot open .*sync.log: " "$vtmp/err" || fail "v2 open error not reported: $(cat "$vtmp/err")"
# v2 without sealing files answers EINVAL (auditlog.h): another answer shows
# that the files reached the library
grep -q "Invalid argument" "$vtmp/err" && fail "the sealing files did not reach the library"
if grep -q "Operation not supported" "$vtmp/err"; then
	grep -q "does not write v2 yet" "$vtmp/err" || fail "EOPNOTSUPP without its reason"
fi
[ -s "$vtmp/out" ] && fail "a failed v2 run printed a report: $(cat "$vtmp/out")"

# -- --line-size through --log: the lines of the file itself
for size in 220 1024 4000; do
	rm -f "$vtmp/l.log"
	run 0 --log "$vtmp/l.log" --events 3000 --threads 2 --line-size "$size" --json
	"$PY" - "$vtmp/out" "$vtmp/l.log" "$size" <<'EOF' || fail "--line-size $size"
import json, sys
rep = json.load(open(sys.argv[1]))
size = int(sys.argv[3])
lines = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
ev = [len(l) + 1 for l in lines if b'"type":"event"' in l]
assert len(ev) == 3000, len(ev)
avg = sum(ev) / len(ev)
# seq grows from 1 to 3000 while the shape was fitted at seq 1501: a byte or two
assert abs(avg - size) <= 3, (avg, size)
assert all(abs(n - size) <= 4 for n in ev), (min(ev), max(ev))
# the library's own figure, its 1 KiB header included
assert abs(rep["line_bytes_avg"] - avg) < 2, (rep["line_bytes_avg"], avg)
EOF
done

# -- one short run of every phase, the JSON's figures and their relations
run 0 --json --dir "$vtmp" --events 20000 --threads 2 --sync-samples 20 \
	--enqueue-samples 1000 --token-records 50 --token-gap-us 50
grep -q '"worker_nice"' "$vtmp/out" && fail "worker_nice reported though not set"
"$PY" - "$vtmp/out" <<'EOF' || fail "the JSON report of a full run"
import json, sys
rep = json.load(open(sys.argv[1]))
assert rep["phases"] == ["sustained", "sync", "enqueue", "token", "parts"], rep["phases"]
for p in ("digest", "emit", "chain_step", "tree_append", "tree_root", "seal", "seal_key",
          "signature"):
    assert rep["part_%s_ns" % p] > 0, (p, rep.get("part_%s_ns" % p))
# v1: no seal, tree or checkpoint in the logs
assert rep["log_seals"] == rep["log_trees"] == rep["log_checkpoints"] == 0, rep
for k in ("worker_cpu_ns_per_event", "producers_cpu_ns_per_event", "total_cpu_ns_per_event",
          "process_cpu_ns_per_event", "enqueue_cpu_ns_per_call", "sustained_events_per_s",
          "ratio_to_ceiling", "sync_ratio", "enqueue_p50_ns", "handoff_p50_ns",
          "handoff_p999_ns"):
    assert isinstance(rep[k], (int, float)) and rep[k] > 0, (k, rep.get(k))
# every timed call is one of the two kinds, half each: whole calls and hand-offs
assert rep["enqueue_samples"] + rep["handoff_samples"] == 2 * 1000, rep
assert rep["enqueue_samples"] == rep["handoff_samples"] == 1000, rep
# the hand-off is a part of the whole call (medians of equal halves)
assert rep["handoff_p50_ns"] <= rep["enqueue_p50_ns"], rep
assert rep["targets"]["handoff_p50_ns"]["target"] == "<= 100", rep["targets"]
assert "enqueue_p50_ns" not in rep["targets"], rep["targets"]
# the hand-off's yardstick: a cache line between two CPUs, when there are two
import os
if len(os.sched_getaffinity(0)) >= 2:
    assert 0 < rep["line_transfer_ns"] < 100000, rep.get("line_transfer_ns")
else:
    assert "line_transfer_ns" not in rep, rep["line_transfer_ns"]
# the thread's CPU-time clock is read by its TID, to the nanosecond
assert rep["worker_cpu_source"] == "cpuclock", rep["worker_cpu_source"]
assert rep["worker_cpu_resolution_ns"] == 1, rep["worker_cpu_resolution_ns"]
# the total is the sum of its parts; the process holds both
tot = rep["producers_cpu_ns_per_event"] + rep["worker_cpu_ns_per_event"]
assert abs(rep["total_cpu_ns_per_event"] - tot) < 0.2, (rep["total_cpu_ns_per_event"], tot)
assert rep["process_cpu_ns_per_event"] >= rep["total_cpu_ns_per_event"] - 1
# the CPUs' bound is the online CPUs over the process's CPU per event; the busy
# share is that CPU time over the phase's wall time on all of them
ncpu = os.sysconf("SC_NPROCESSORS_ONLN")
bound = ncpu * 1e9 / rep["process_cpu_ns_per_event"]
assert abs(rep["cpu_bound_events_per_s"] - bound) <= 0.01 * bound + 1, (rep["cpu_bound_events_per_s"], bound)
# (of the first round, whose phase every CPU figure is)
busy = rep["process_cpu_ns_per_event"] * rep["sustained_rounds_events_per_s"][0] / (ncpu * 1e9)
assert 0 < rep["cpu_busy_fraction"] <= 1.05 and abs(rep["cpu_busy_fraction"] - busy) < 0.02, (rep["cpu_busy_fraction"], busy)
# the phase's log opened again: timed, ordered, and the file the phase wrote
# (at least its bytes; a v1 reopen adds none, a v2 one its seals)
assert 0 < rep["reopen_min_ms"] <= rep["reopen_p50_ms"] <= rep["reopen_max_ms"], rep
assert rep["reopen_file_bytes"] >= rep["bytes_written"] > 0, rep
# the ceiling is the best point of the sweep, every documented size measured
# (docs/benchmarks.md: steps of two from 1024 lines, where this disk's best lies)
sw = rep["raw_sweep"]
assert [p["batch_lines"] for p in sw] == [16, 64, 256, 1024, 2048, 4096, 8192, 16384], sw
assert all(p["events_per_s"] > 0 for p in sw), sw
# each batch's time split into its pwrite and its fdatasync, both timed, within the whole
assert all(p["write_ms_per_batch"] > 0 and p["fsync_ms_per_batch"] > 0 for p in sw), sw
assert all(p["write_ms_per_batch"] + p["fsync_ms_per_batch"] <= p["ms_per_batch"] + 0.002
           for p in sw), sw
# each size ran at least --sweep-seconds (default 1), at most twice that and the
# batch that crossed it, no longer than the slowest (a disk stall can make that one
# far longer than the mean: CI on 2026-12-06, 2.014 s at 0.43 ms a batch)
assert rep["sweep_seconds"] == 1, rep["sweep_seconds"]
assert all(p["ms_per_batch"] <= p["max_batch_ms"] + 0.002 for p in sw), sw
# (or, on a disk slow enough, its first four batches: SWEEP_MIN_BATCHES)
assert all(1.0 <= p["seconds"] <= max(2.0 + p["max_batch_ms"] / 1e3, 4 * p["max_batch_ms"] / 1e3) + 0.002
           for p in sw), sw
# rounds (default 5): the first sweeps every size and picks the best; the
# others measure that size and the sustained phase again; both sides of the
# ratio are the medians of their rounds (docs/benchmarks.md, "Rounds")
import statistics
assert rep["rounds"] == 5, rep["rounds"]
best = max(sw, key=lambda p: p["events_per_s"])
assert rep["raw_ceiling_batch_lines"] == best["batch_lines"], (rep["raw_ceiling_batch_lines"], best)
for p in sw:
    r = p["rounds_events_per_s"]
    assert len(r) == (5 if p is best else 1) and r[0] == p["events_per_s"], p
    assert abs(p["median_events_per_s"] - statistics.median(r)) <= 1, p
assert rep["raw_ceiling_events_per_s"] == best["median_events_per_s"], (rep["raw_ceiling_events_per_s"], best)
su = rep["sustained_rounds_events_per_s"]
assert len(su) == 5 and all(x > 0 for x in su), su
assert abs(rep["sustained_events_per_s"] - statistics.median(su)) <= 1, (rep["sustained_events_per_s"], su)
assert abs(rep["ratio_to_ceiling"] - rep["sustained_events_per_s"] / rep["raw_ceiling_events_per_s"]) < 0.002, rep["ratio_to_ceiling"]
assert abs(rep["ratio_round1"] - su[0] / best["events_per_s"]) < 0.002, rep["ratio_round1"]
# batches formed ahead (the stats' batches_ahead) are some of the phase's batches
assert isinstance(rep["batches_ahead"], int) and 0 <= rep["batches_ahead"] <= rep["batches"], (rep["batches_ahead"], rep["batches"])
# both sides primed with the same bytes (auto: 512 an event, at least 64 MiB), written
primed = rep["prime_bytes"]
assert primed == 64 << 20, primed
assert rep["prime_sustained_s"] > 0 and rep["prime_ceiling_s"] > 0, rep
# the library's default drops the page cache only 1 GiB behind: a short log, never
assert rep["cache_drops"] == 0 and "drop_behind_bytes" not in rep, rep["cache_drops"]
for t in ("worker_cpu_ns_per_event", "total_cpu_ns_per_event", "ratio_to_ceiling"):
    assert t in rep["targets"], t
assert rep["targets"]["worker_cpu_ns_per_event"]["target"] == "<= 500"
assert rep["targets"]["total_cpu_ns_per_event"]["target"] == "<= 1200"
assert rep["targets"]["ratio_to_ceiling"]["target"] == ">= 0.9"
v2 = rep["v2_producer_step"]
assert "error" in v2 or (v2["decode_ns"] > 0 and v2["digest_ns"] > 0), v2
arms = {a["arm"]: a for a in rep["token"]}
assert set(arms) == {"sync", "async", "async-coalesce"}, set(arms)
for a in arms.values():
    assert a["records"] == 50 and a["one_record_per_operation"], a
    assert a["events_written"] == 50 and a["records_written"] == 50, a
    assert a["seals"] == a["trees"] == a["checkpoints"] == 0, a
    # bytes per record: one event line each
    assert abs(a["bytes_per_record"] - rep["line_bytes_avg"]) < 8, (a, rep["line_bytes_avg"])
    assert abs(a["bytes_per_record"] - a["bytes_written"] / 50) <= 0.051, a
    assert abs(a["fsyncs_per_record"] - a["fsyncs"] / 50) <= 0.0006, a
# record_sync from one thread: its own batch and fdatasync every time (the contract)
s = arms["sync"]
assert s["batches"] == 50 and s["fsyncs"] == 50 and s["records_per_batch"] == 1.0, s
assert s["caller_cpu_ns_per_record"] > 0 and s["worker_cpu_ns_per_record"] > 0, s
assert arms["async"]["caller_cpu_ns_per_record"] is None, arms["async"]
assert arms["async-coalesce"]["coalesce_us"] == 5000
assert rep["token_sync_fsyncs_per_record"] == s["fsyncs_per_record"]
EOF

# -- --queue, --worker-nice and --prime-bytes in one sustained run (its raw ceiling
#    swept at the shortest --sweep-seconds, 0.1 s a size): the queue as asked, filled no further; one
#    producer; the worker's nice reported as set (a higher nice needs no
#    privilege); the prime as asked, its scratch file gone from the kept directory
kdir="$vtmp/keep"
mkdir "$kdir"
run 0 --json --dir "$kdir" --keep --phases sustained --events 20000 --threads 1 --queue 64 \
	--drop-behind-bytes 0 --worker-nice 19 --prime-bytes 3M --sweep-seconds 0.1 --rounds 2 \
	--rotate-bytes 512K
"$PY" - "$vtmp/out" <<'EOF' || fail "--queue 64 --worker-nice 19 --prime-bytes 3M"
import json, sys
rep = json.load(open(sys.argv[1]))
assert rep["queue_slots"] == 64, rep["queue_slots"]
assert 0 < rep["queue_high_water"] <= 64, rep["queue_high_water"]
assert rep["drop_behind_bytes"] == 0, rep.get("drop_behind_bytes")
assert rep["threads"] == 1 and rep["sustained_events_per_s"] > 0, rep
assert rep["worker_nice"] == 19, rep.get("worker_nice")
assert rep["prime_bytes"] == 3 << 20, rep["prime_bytes"]
assert rep["prime_sustained_s"] > 0 and rep["prime_ceiling_s"] > 0, rep
assert rep["rounds"] == 2 and len(rep["sustained_rounds_events_per_s"]) == 2, rep
# each round's CPU per event, round 1's the phase's own figures
for k, whole in (("worker", "worker_cpu_ns_per_event"), ("producers", "producers_cpu_ns_per_event"),
                 ("other", "other_threads_cpu_ns_per_event")):
    r = rep["sustained_rounds_%s_cpu_ns_per_event" % k]
    assert len(r) == 2, (k, r)
    assert k == "other" or all(x > 0 for x in r), (k, r)
    assert abs(r[0] - rep[whole]) <= 0.1, (k, r, rep[whole])
# a tenth of a second a size, at most two tenths and the batch that crossed them
assert rep["sweep_seconds"] == 0.1, rep["sweep_seconds"]
assert all(0.1 <= p["seconds"] <= max(0.2 + p["max_batch_ms"] / 1e3, 4 * p["max_batch_ms"] / 1e3) + 0.002
           for p in rep["raw_sweep"]), rep["raw_sweep"]
EOF
kept=$(echo "$kdir"/auditlog-bench.*)
[ -s "$kept/sustained.log" ] || fail "--keep kept no sustained.log in $kept"
[ -e "$kept/prime.dat" ] && fail "the prime's scratch file was left in $kept"
ls "$kept"/sustained.log.* >/dev/null 2>&1 || fail "--rotate-bytes 512K: no rotated file in $kept"
for f in "$kept"/sustained-round.log* "$kept"/raw-ceiling.dat; do
	[ -e "$f" ] && fail "round 2's file $f was left in $kept (rotated ones too)"
done
rm -rf "$kdir"
run 2 --prime-bytes 1Q
grep -q "prime-bytes" "$vtmp/err" || fail "--prime-bytes 1Q: $(cat "$vtmp/err")"
for bad in 0 10 x; do
	run 2 --rounds "$bad"
	grep -q -- "--rounds" "$vtmp/err" || fail "--rounds $bad: $(cat "$vtmp/err")"
done
run 2 --drop-behind-bytes 5
grep -q "the library refuses 5" "$vtmp/err" || fail "--drop-behind-bytes 5: $(cat "$vtmp/err")"
run 2 --queue 63
grep -q "out of range 64" "$vtmp/err" || fail "--queue 63: $(cat "$vtmp/err")"
for bad in 0 0.05 0.15 601 -1 nan x ""; do
	run 2 --sweep-seconds "$bad"
	grep -q "out of range 0.1..600 (in tenths)" "$vtmp/err" || fail "--sweep-seconds '$bad': $(cat "$vtmp/err")"
done
run 2 --worker-nice 20
grep -q "not an integer in -20..19" "$vtmp/err" || fail "--worker-nice 20: $(cat "$vtmp/err")"

# -- --phases: only what was asked, and no targets of phases not run
run 0 --json --dir "$vtmp" --phases token --token-records 20 --line-size 1024
"$PY" - "$vtmp/out" <<'EOF' || fail "--phases token"
import json, sys
rep = json.load(open(sys.argv[1]))
assert rep["phases"] == ["token"], rep["phases"]
assert "sustained_events_per_s" not in rep and "sync_p50_us" not in rep
assert rep["targets"] == {} and rep["line_size_requested"] == 1024
for a in rep["token"]:
    # fitted at the seq of a default run (7 digits); these logs count from 11
    assert 1024 - 8 <= a["bytes_per_record"] <= 1024, a
EOF

# -- v2 with real keys: the token-shaped arms count the writer's seals and
# trees (read back from each arm's bytes), and the sustained log's
if [ -n "$KEYGEN" ]; then
	mkdir "$vtmp/keys"
	"$KEYGEN" --dir "$vtmp/keys" --host bench --delta 1 >/dev/null 2>"$vtmp/err" ||
		fail "auditlog-keygen: $(cat "$vtmp/err")"
	run 0 --json --dir "$vtmp" --format-version 2 --seal-state "$vtmp/keys/sealing-state" \
		--signing-key "$vtmp/keys/signing-key" --phases sustained,token,parts --events 20000 \
		--threads 2 --token-records 30 --token-gap-us 50 --prime-bytes 0 --sweep-seconds 0.1 \
		--rounds 1
	"$PY" - "$vtmp/out" <<'EOF' || fail "the JSON report of a v2 run"
import json, sys
rep = json.load(open(sys.argv[1]))
assert rep["format_version"] == 2 and rep["phases"] == ["sustained", "token", "parts"], rep
assert rep["prime_bytes"] == 0 and rep["prime_sustained_s"] == rep["prime_ceiling_s"] == 0, rep
# one round: the ratio is the first round's, as before rounds
assert rep["rounds"] == 1 and rep["ratio_to_ceiling"] == rep["ratio_round1"], rep
assert all(len(p["rounds_events_per_s"]) == 1 for p in rep["raw_sweep"]), rep["raw_sweep"]
assert rep["targets"]["worker_cpu_ns_per_event"]["target"] == "<= 350"
# every batch ends with its seal (and the open and close seals frame the log)
assert rep["log_seals"] >= rep["batches"] >= 1, (rep["log_seals"], rep["batches"])
assert rep["log_trees"] >= 1, rep["log_trees"]
arms = {a["arm"]: a for a in rep["token"]}
for a in arms.values():
    assert a["records"] == 30 and a["events_written"] == 30 and a["one_record_per_operation"], a
    assert a["records_written"] == 30 + a["seals"] + a["trees"] + a["checkpoints"], a
    # one seal a batch at least, in the batch's own write (a batch across an epoch
    # boundary has one an epoch, an idle seal is a batch of its own)
    assert a["seals"] >= a["batches"] >= 1, a
    assert abs(a["seals_per_record"] - a["seals"] / 30) <= 0.0006, a
s = arms["sync"]
# record_sync: one batch, one fdatasync and one seal per record
assert s["batches"] == s["fsyncs"] and s["seals"] >= s["batches"] >= 30, s
assert s["records_per_batch"] >= 1.9 and s["fsyncs_per_record"] < 1.2, s
assert s["bytes_per_record"] > 1.5 * rep["line_bytes_avg"], (s, rep["line_bytes_avg"])
for p in ("digest", "emit", "tree_append", "seal", "signature"):
    assert rep["part_%s_ns" % p] > 0, p
EOF
fi

# every run removed its own directory
left=$(find "$vtmp" -maxdepth 1 -name 'auditlog-bench.*' | head -1)
[ -z "$left" ] || fail "a run left $left behind"
echo "PASS"

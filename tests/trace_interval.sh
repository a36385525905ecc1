#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench/trace-interval: its figures on a hand-made trace whose answers can be
# read off the events (the disk busy 3.8 ms of 10, the worker running 2 + 3.5
# ms, asleep 3.5, woken onto an idle CPU 0.5 ms before it ran, a write 0.4 ms
# before its data reached the disk, an io-wq thread preempted on CPU 0 for 2 ms
# while CPU 1 idled, the CPUs idle 8.4 ms of 20), its bad arguments, and, run as root, a
# real capture of auditlog-bench's first sustained round. Timings of the real
# run are never asserted.
#
#   trace_interval.sh AUDITLOG_BENCH
#
# Exit 77 (skip) when not root (tracefs) or the scratch directory is in memory.
set -euo pipefail

BENCH=${1:?usage: trace_interval.sh AUDITLOG_BENCH}
TI="$(cd "$(dirname "$0")/.." && pwd)/bench/trace-interval"
. "$(dirname "$0")/bench_lib.sh"
bench_scratch trace-interval-test "auditlog-bench"

# --- the analysis, on a trace made by hand -----------------------------------
# pid 10 the command's main thread (the start mark names it), 11 its worker, 12
# an io-wq thread; 99 the tool writing the marks; 7 the worker of another
# program (pid 5, a lower one) whose write and sleep must not count. CPU 1 runs the worker, then idles, then runs it again.
# CPU 0 runs the io-wq thread, preempted at 3 ms by a kworker (it waits there while CPU 1
# idles: 2 ms), again from 5 to 5.8 ms, then idles but for pid 7 from 6.8 to 7.1 ms; the
# worker's wake-up at 6 ms waits for its own idle CPU, which is not counted as left waiting.
cat >"$tmp/hand.txt" <<'EOF'
# tracer: nop
#           TASK-PID       TGID    CPU#  |||||  TIMESTAMP  FUNCTION
  trace-interval-99      (     99) [000] ...1.   100.000000: tracing_mark_write: TRACE-INTERVAL START pid=10
          <idle>-0       (-------) [001] d..2.   100.000500: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=auditlog-worker next_pid=11 next_prio=120
 auditlog-worker-11      (     10) [001] .....   100.000600: io_uring_submit_req: ring 000000001, req 000000002, user_data 0x0, opcode WRITE, flags 0x400044, sq_thread 0
  iou-wrk-11-12          (     10) [000] .....   100.001000: block_rq_issue: 254,0 WS 2097152 () 8 + 4096 be,0,4 [iou-wrk-11]
 auditlog-worker-11      (     10) [001] d..2.   100.002500: sched_switch: prev_comm=auditlog-worker prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
  iou-wrk-11-12          (     10) [000] d..2.   100.003000: sched_switch: prev_comm=iou-wrk-11 prev_pid=12 prev_prio=120 prev_state=R+ ==> next_comm=kworker/0:1H next_pid=50 next_prio=100
          <idle>-0       (-------) [000] d.h2.   100.004000: block_rq_complete: 254,0 WS () 8 + 4096 be,0,4 [0]
    kworker/0:1H-50      (     50) [000] .....   100.004200: block_rq_issue: 254,0 FF 0 () 0 + 0 none,0,0 [kworker/0:1H]
          <idle>-0       (-------) [000] d.h2.   100.005000: block_rq_complete: 254,0 FF () 18446744073709551615 + 0 none,0,0 [0]
          <idle>-0       (-------) [000] d.h2.   100.005000: block_rq_complete: 254,0 WS () 0 + 0 be,0,4 [0]
    kworker/0:1H-50      (     50) [000] d..2.   100.005000: sched_switch: prev_comm=kworker/0:1H prev_pid=50 prev_prio=100 prev_state=I ==> next_comm=iou-wrk-11 next_pid=12 next_prio=120
  iou-wrk-11-12          (     10) [000] d..2.   100.005500: io_uring_complete: ring 000000001, req 000000003, user_data 0x1, result 0, cflags 0x0 extra1 0 extra2 0
  iou-wrk-11-12          (     10) [000] d..2.   100.005800: sched_switch: prev_comm=iou-wrk-11 prev_pid=12 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       (-------) [000] dNh2.   100.006000: sched_wakeup: comm=auditlog-worker pid=11 prio=120 target_cpu=001
          <idle>-0       (-------) [001] d..2.   100.006500: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=auditlog-worker next_pid=11 next_prio=120
          <idle>-0       (-------) [000] d..2.   100.006800: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=auditlog-worker next_pid=7 next_prio=120
 auditlog-worker-7       (      5) [000] .....   100.007000: io_uring_submit_req: ring 000000009, req 000000008, user_data 0x0, opcode WRITE, flags 0x400044, sq_thread 0
 auditlog-worker-7       (      5) [000] d..2.   100.007100: sched_switch: prev_comm=auditlog-worker prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
  trace-interval-99      (     99) [000] ...1.   100.010000: tracing_mark_write: TRACE-INTERVAL STOP
EOF
"$TI" --input "$tmp/hand.txt" >"$tmp/hand.out" 2>&1 || { cat "$tmp/hand.out" >&2; fail "--input failed"; }
for want in \
	"interval       10.0 ms; a disk busy (a request in flight) 38 % of it" \
	"worker         running 5.5 ms, runnable 0.5 ms, sleeping 3.5 ms (summed over its threads)" \
	"io_uring writes 1; from one to the next data request >= 1 MiB at a disk 0.40 ms (median)" \
	"wake-up to running, worker on an idle CPU: 1, p50 500 us, p90 500 us, 0.5 ms in all" \
	"io-wq          running 0.8 ms, runnable 2.0 ms, sleeping 4.2 ms (summed over its threads)" \
	"runnable while another CPU idled: worker 0.0 ms, io-wq 2.0 ms, other threads 0.0 ms; the CPUs idle 42 % of the interval (2 CPUs)"; do
	grep -qxF "$want" "$tmp/hand.out" || { cat "$tmp/hand.out" >&2; fail "missing: $want"; }
done
# (38 %: the data 3 ms, the flush 0.8 ms; its two completions, the flush's and its empty
# request's, end one request, and the disk is idle from the data's end to the flush's issue)
# a trace without the marks holds no interval
grep -v 'TRACE-INTERVAL STOP' "$tmp/hand.txt" >"$tmp/nostop.txt"
rc=0
"$TI" --input "$tmp/nostop.txt" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "a trace without its stop mark: exit $rc, not 1"

# --- bad arguments: exit 2 ---------------------------------------------------
for bad in "" "--input $tmp/none.txt" "--input $tmp/hand.txt -- true"; do
	rc=0
	# shellcheck disable=SC2086
	"$TI" $bad >/dev/null 2>&1 || rc=$?
	[ "$rc" -eq 2 ] || fail "bench/trace-interval $bad exited $rc, not 2"
done

# --- a real capture (root: tracefs) -------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: the capture needs root for tracefs (the analysis passed)"
	exit 77
fi
T=/sys/kernel/tracing
# not mounted (a machine without systemd): the tool mounts it for its capture and must
# unmount it after
unmounted=false
[ -e "$T/trace" ] || unmounted=true
tfs_state() { cat "$T/set_event" "$T/options/record-tgid" "$T/tracing_on"; }
# the buffer's size per CPU in KiB: "7 (expanded: 1408)" before its first use reads as the
# expanded size; written back, the kernel rounds it to pages
tfs_kb() { grep -o '[0-9]*' "$T/buffer_size_kb" | tail -1; }
if ! $unmounted; then
	before=$(tfs_state)
	kb_before=$(tfs_kb)
fi
"$TI" --out "$tmp/real.txt" -- "$BENCH" --dir "$tmp" --phases sustained --events 200000 \
	--threads 2 --sweep-seconds 0.1 --rounds 1 --prime-bytes 0 >"$tmp/real.out" 2>"$tmp/real.err" ||
	{ cat "$tmp/real.err" >&2; fail "the capture failed"; }
# tracefs as it was found: unmounted, or the events enabled, the tgid column, on/off,
# the buffer's size
if $unmounted; then
	[ ! -e "$T/trace" ] || fail "tracefs was not mounted, and the tool left it mounted"
else
	[ "$(tfs_state)" = "$before" ] || fail "tracefs changed: $(tfs_state | tr '\n' ' ') (was $(echo "$before" | tr '\n' ' '))"
	kb=$(tfs_kb)
	[ $((kb - kb_before)) -le 8 ] && [ $((kb_before - kb)) -le 8 ] ||
		fail "the trace buffer left at $kb KiB a CPU (was $kb_before)"
fi
grep -q 'figures against their targets' "$tmp/real.out" || fail "the bench's own output did not pass through"
grep -q 'sustained: the producers start' "$tmp/real.err" ||
	fail "the bench's standard error (its progress and error lines) did not pass through"
grep -q 'TRACE-INTERVAL START' "$tmp/real.txt" || fail "the kept trace has no start mark"
/usr/bin/python3 - "$tmp/real.out" <<'EOF'
import re, sys
out = open(sys.argv[1]).read()
m = re.search(r"^interval +([\d.]+) ms; a disk busy \(a request in flight\) (\d+) % of it$", out, re.M)
assert m and float(m.group(1)) > 0 and 0 < int(m.group(2)) <= 100, out
w = re.search(r"^worker +running ([\d.]+) ms, runnable ([\d.]+) ms, sleeping ([\d.]+) ms", out, re.M)
assert w, out
# one worker thread: its three states fill the interval it lived in, never more
total = sum(float(x) for x in w.groups())
assert 0 < total <= float(m.group(1)) + 0.2, (total, out)
n = re.search(r"^io_uring writes (\d+)", out, re.M)
assert n and int(n.group(1)) >= 1, out
EOF
echo "trace_interval: ok"

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""auditlog-verify --follow --each-chain LOGDIR: a verifying tail for each
writer's chain in a directory, and for each chain that appears later
(docs/auditlog-verify.md, docs/siem.md 9).

Real writers (tests/follow_writer.c) write three logs into one directory,
rotating: two before the tail starts, one after. Beside them a file that is
no log. With --emit --state-dir, the tail's output must be every line of the
three chains, each chain's lines in seq order, whole lines only; each chain
gets its state file under its active name and nothing else does; SIGTERM
ends every tail and the run exits 0. Restarted with the same state
directory while a writer goes on, it passes on the new lines (repeating at
most one batch a chain). A chain whose tail cannot start (a state file that
is not one) ends with exit 2 and the others go on; the run's status is the
worst of its tails'; once its state file is removed, the name is followed
again from its chain's start. Without --state-dir, a tail that ended is
started again when its writer begins a new chain under its name, and only
then (not at a rotation of its chain), whether it was killed or ended on its
own at the new chain: each chain's lines once, in order. ECS objects over 4 KiB from three chains at once come
out whole, each chain's in order. Usage errors exit 2 at once.

Args: follow_writer auditlog-verify
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WRITER, VERIFY = sys.argv[1:3]
BATCH = 1024
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("cli_each_chain: FAIL:", msg, file=sys.stderr)


def chain_lines(logdir, name):
    """Every line of the chain under the active name, in seq order."""
    out = []
    for f in os.listdir(logdir):
        if f == name or (f.startswith(name + ".") and f[len(name) + 1:len(name) + 2].isdigit()):
            with open(os.path.join(logdir, f), "rb") as fh:
                out += fh.read().splitlines(keepends=True)
    out.sort(key=lambda ln: json.loads(ln)["seq"])
    return out


def write(path, events, rotate=32768):
    r = subprocess.run([WRITER, path, str(events), str(rotate)], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"follow_writer {path}: {r.stderr}")


def start(args, out):
    """The run's stderr goes to a file beside its output, never to a pipe
    nobody reads while it runs: tails that report much under load would
    block on a full pipe and the output would stop growing."""
    err = open(out.name + ".err", "wb")
    p = subprocess.Popen([VERIFY] + args, stdout=out, stderr=err)
    p.err_path = err.name
    err.close()
    return p


def stderr_of(p):
    with open(p.err_path, "rb") as f:
        return f.read().decode(errors="replace")


def stop(p, what):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        fail(f"{what}: did not end within 30 s of SIGTERM")
    return p.returncode, stderr_of(p)


WAIT_S = 60


def wait_for(pred, secs=WAIT_S):
    t = time.monotonic() + secs
    while time.monotonic() < t:
        if pred():
            return True
        time.sleep(0.1)
    return False


def timed_out(p, path, what):
    """A wait ran out: say which, with what the run had written so far."""
    with open(path, "rb") as f:
        n = f.read().count(b"\n")
    fail(f"{what} within {WAIT_S} s: {n} lines out; its stderr:\n" + stderr_of(p)[-4000:])


def wait_out(p, path, lines, what):
    """Wait until every one of lines is in the output file at path."""
    def there():
        with open(path, "rb") as f:
            have = set(f.read().splitlines(keepends=True))
        return all(e in have for e in lines)
    if not wait_for(there):
        timed_out(p, path, what)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def pids_where(pred):
    """The other processes whose command line (NUL-separated bytes) pred accepts."""
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and int(pid) != os.getpid() and
            pred(_cmdline(int(pid)))]


def tails_left(marker):
    """Processes whose command line holds marker (the state directory)."""
    return len(pids_where(lambda c: marker.encode() in c))


def check_run(out_path, names, logdir, allow_repeats=None):
    """The output against the chains: every line, each chain's in order.
    allow_repeats: the lines a run before passed on (a restart may repeat
    at most a batch a chain of them)."""
    with open(out_path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        fail("the output ends in the middle of a line")
    got = data.splitlines(keepends=True)
    owner = {}
    for n in names:
        for ln in chain_lines(logdir, n):
            owner[ln] = n
    by_chain = {n: [] for n in names}
    for ln in got:
        if ln not in owner:
            fail(f"a line that is no chain's line: {ln[:80]!r}")
            return got
        by_chain[owner[ln]].append(json.loads(ln)["seq"])
    for n in names:
        seqs = by_chain[n]
        want = [json.loads(ln)["seq"] for ln in chain_lines(logdir, n)]
        if allow_repeats is None:
            if seqs != want:
                fail(f"{n}: {len(seqs)} lines passed on, {len(want)} in the chain, or not in order")
        else:
            first_new = allow_repeats.get(n, -1) + 1
            rep = [s for s in seqs if s < first_new]
            if len(rep) > BATCH or seqs[len(rep):] != [s for s in want if s >= first_new] or \
                    rep != sorted(rep):
                fail(f"{n}: after the restart {len(rep)} repeats and the rest not the chain's new lines")
    return got


tmp = tempfile.mkdtemp(prefix="auditlog-each-chain.")
try:
    logdir = os.path.join(tmp, "log")
    sdir = os.path.join(tmp, "state")
    os.mkdir(logdir)
    os.mkdir(sdir)

    # --- usage ---------------------------------------------------------------
    for args in (["--each-chain", logdir], ["--follow", "--each-chain", logdir, sdir],
                 ["--follow", "--each-chain", os.path.join(logdir, "nope")],
                 ["--follow", "--emit", "--each-chain", "--state-dir", logdir, logdir],
                 ["--follow", "--each-chain", "--state-dir", sdir, logdir],
                 ["--follow", "--emit", "--each-chain", "--state", os.path.join(sdir, "x"), logdir],
                 ["--follow", "--emit", "--state-dir", sdir, logdir],
                 ["--follow", "--each-chain", "--json", logdir], ["--follow", "--each-chain", "-"]):
        r = subprocess.run([VERIFY] + args, capture_output=True, text=True, timeout=10)
        if r.returncode != 2 or not r.stderr.startswith("auditlog-verify: "):
            fail(f"{args}: exit {r.returncode}, not 2 with one line: {r.stderr!r}")

    # --- two chains, a third later, rotations, a file that is no log --------
    write(os.path.join(logdir, "a.log"), 3000)
    write(os.path.join(logdir, "b.log"), 2000)
    with open(os.path.join(logdir, "notes.txt"), "w") as f:
        f.write("not a log\n")
    out1 = os.path.join(tmp, "out1")
    args = ["--follow", "--emit", "--each-chain", "--state-dir", sdir, logdir]
    with open(out1, "wb") as o:
        p = start(args, o)
        write(os.path.join(logdir, "c.log"), 2500)
        write(os.path.join(logdir, "a.log"), 1500)
        names = ["a.log", "b.log", "c.log"]
        total = sum(len(chain_lines(logdir, n)) for n in names)
        wait_out(p, out1, [chain_lines(logdir, n)[-1] for n in names],
                 "the tail did not pass on every chain's lines")
        rc, err = stop(p, "the first run")
    if rc != 0:
        fail(f"the first run exited {rc}, not 0: {err}")
    rotated = [f for f in os.listdir(logdir) if f.startswith("a.log.")]
    if len(rotated) < 2:
        fail(f"the writer rotated too little for the test: {rotated}")
    got = check_run(out1, names, logdir)
    if len(got) != total:
        fail(f"first run: {len(got)} lines, {total} in the chains")
    if sorted(os.listdir(sdir)) != ["a.log.state", "b.log.state", "c.log.state"]:
        fail(f"state files: {sorted(os.listdir(sdir))}")
    if "notes.txt is not a log's first file" not in err:
        fail(f"the file that is no log was not told: {err}")
    if tails_left(sdir):
        fail("a tail outlived the run")

    # --- restarted: resumes each chain, passes on what came meanwhile -------
    last = {n: json.loads(chain_lines(logdir, n)[-1])["seq"] for n in names}
    write(os.path.join(logdir, "b.log"), 1200)
    out2 = os.path.join(tmp, "out2")
    with open(out2, "wb") as o:
        p = start(args, o)
        write(os.path.join(logdir, "c.log"), 800)
        ends = [chain_lines(logdir, n)[-1] for n in names
                if json.loads(chain_lines(logdir, n)[-1])["seq"] > last[n]]
        if len(ends) != 2:
            fail(f"the writers between the runs wrote to {len(ends)} chains, not 2")
        wait_out(p, out2, ends, "the restarted tail did not pass on the new lines")
        rc, err = stop(p, "the restart")
    if rc != 0:
        fail(f"the restart exited {rc}, not 0: {err}")
    check_run(out2, names, logdir, allow_repeats=last)

    # --- one chain's tail cannot start: the others go on, the run says 2;
    # its state file removed, the name is followed again from its start ----
    bad_state = os.path.join(sdir, "b.log.state")
    with open(bad_state, "w") as f:
        f.write("not a state\n")
    out3 = os.path.join(tmp, "out3")
    with open(out3, "wb") as o:
        p = start(args, o)
        write(os.path.join(logdir, "a.log"), 600)
        wait_out(p, out3, [chain_lines(logdir, "a.log")[-1]],
                 "chain a's tail did not go on beside b's failed one")
        b_before = set(chain_lines(logdir, "b.log"))
        err = stderr_of(p)
        if "the tail of b.log ended (exit 2)" not in err:
            fail(f"the failed tail was not told: {err}")
        if "once its state file is removed" not in err:
            fail(f"the failed tail's message does not say how to follow it again: {err}")
        if any(ln in b_before for ln in open(out3, "rb").read().splitlines(keepends=True)):
            fail("chain b's lines were passed on from a tail that refused its state")
        if open(bad_state).read() != "not a state\n":
            fail("the refused state file was changed")
        os.unlink(bad_state)
        write(os.path.join(logdir, "b.log"), 300)
        wait_out(p, out3, chain_lines(logdir, "b.log"),
                 "chain b was not followed again, from its start, once its state file was removed")
        if not os.path.exists(bad_state):
            fail("the new tail of b.log keeps no state file")
        rc, err = stop(p, "the run with a bad state")
    if rc != 2:
        fail(f"a run whose tail exited 2 exited {rc}, not 2")
    if "the state file of b.log was removed" not in err:
        fail(f"following b.log again was not told: {err}")
    b_lines = chain_lines(logdir, "b.log")
    b_set = set(b_lines)
    got = open(out3, "rb").read().splitlines(keepends=True)
    bseq = [json.loads(ln)["seq"] for ln in got if ln in b_set]
    if bseq != [json.loads(ln)["seq"] for ln in b_lines]:
        fail(f"chain b followed again: {len(bseq)} lines passed on, not its {len(b_lines)} in order")

    # --- without --state-dir: a tail that ended is followed again only when a
    # new chain begins under its name (docs/siem.md 9.2), not while the writer
    # goes on with the chain it had, rotations included ----------------------
    ndir = os.path.join(tmp, "newchain")
    os.mkdir(ndir)
    nlog = os.path.join(ndir, "n.log")
    write(nlog, 1000, 65536)
    old = chain_lines(ndir, "n.log")
    out5 = os.path.join(tmp, "out5")
    with open(out5, "wb") as o:
        p = start(["--follow", "--emit", "--each-chain", ndir], o)
        wait_out(p, out5, [old[-1]], "the old chain's lines did not all arrive")
        kids = [k for k in pids_where(lambda c: c.startswith(VERIFY.encode() + b"\0--follow\0") and
                                      nlog.encode() in c) if k != p.pid]
        if len(kids) != 1:
            fail(f"the tail of n.log: {len(kids)} processes found, not 1")
        for k in kids:
            os.kill(k, signal.SIGKILL)
        if not wait_for(lambda: "the tail of n.log ended" in stderr_of(p)):
            timed_out(p, out5, "the killed tail was not told")
        # the same chain goes on, rotating (a new header, the same chain_id):
        # not followed again
        before = set(os.listdir(ndir))
        write(nlog, 600, 65536)
        if len(set(os.listdir(ndir)) - before) < 2:
            fail("the writer did not rotate while the tail was down: not the case it tests")
        time.sleep(2.5)
        if "a new chain began" in stderr_of(p):
            fail("a tail that ended was started again while its chain went on: " + stderr_of(p))
        os.unlink(nlog)
        write(nlog, 40, 0)
        new = open(nlog, "rb").read().splitlines(keepends=True)
        if json.loads(new[0])["chain_id"] == json.loads(old[0])["chain_id"]:
            fail("the writer did not begin a new chain")
        wait_out(p, out5, new, "the new chain under n.log was not followed")
        # a third chain while that tail runs: the tail ends on its own (the
        # writer began a new chain, exit 1) and the third one is followed
        os.unlink(nlog)
        write(nlog, 30, 0)
        third = open(nlog, "rb").read().splitlines(keepends=True)
        wait_out(p, out5, third, "the third chain under n.log was not followed")
        rc, err = stop(p, "the run without a state directory")
    if err.count("a new chain began under n.log: it is followed from its start") != 2:
        fail(f"following the two new chains was not told twice: {err}")
    if "the tail of n.log ended (exit 1)" not in err:
        fail(f"the tail that saw the writer begin a new chain did not end on its own: {err}")
    if rc != 2:
        fail(f"a run whose tail was killed exited {rc}, not 2")
    got = open(out5, "rb").read().splitlines(keepends=True)
    if got != old + new + third:
        fail(f"without --state-dir: {len(got)} lines passed on, not the old chain's {len(old)} "
             f"then the next two's {len(new)} and {len(third)}, each once and in order")

    # --- long lines: ECS objects of 7-8 KiB from three chains at once -------
    # (a tail writes a line over 4 KiB alone, in one write that a reader of
    # its pipe can see in parts: only whole lines may be passed on)
    ldir = os.path.join(tmp, "long")
    os.mkdir(ldir)
    for n in ("x.log", "y.log", "z.log"):
        r = subprocess.run([WRITER, os.path.join(ldir, n), "1500", "1048576", "3600"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"follow_writer {n}: {r.stderr}")
    want = {}
    for n in ("x.log", "y.log", "z.log"):
        lines = chain_lines(ldir, n)
        want[json.loads(lines[0])["chain_id"]] = [json.loads(ln)["seq"] for ln in lines]
    out4 = os.path.join(tmp, "out4")
    with open(out4, "wb") as o:
        p = start(["--follow", "--emit", "--format", "ecs", "--each-chain", ldir], o)
        total = sum(len(v) for v in want.values())
        if not wait_for(lambda: open(out4, "rb").read().count(b"\n") >= total):
            timed_out(p, out4, "the long lines did not all arrive")
        rc, err = stop(p, "the long-line run")
    if rc != 0:
        fail(f"the long-line run exited {rc}: {err}")
    seen = {c: [] for c in want}
    longest = 0
    for ln in open(out4, "rb").read().splitlines():
        longest = max(longest, len(ln))
        try:
            obj = json.loads(ln)
            seen[obj["auditlog"]["chain_id"]].append(obj["event"]["sequence"])
        except (ValueError, KeyError) as e:
            fail(f"a line passed on is not one whole ECS object of a chain ({e}): {ln[:60]!r}")
            break
    if seen != want:
        fail("the long-line run: each chain's objects are not its records, in order")
    if longest <= 4096:
        fail(f"the long-line run's objects are {longest} bytes at most: not the case it tests")
finally:
    if failures == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print("cli_each_chain: kept", tmp, file=sys.stderr)

if failures:
    sys.exit(1)
print("cli_each_chain: ok")

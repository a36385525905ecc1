#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""auditlog-verify --follow --emit --state FILE, the verifying tail (issue 14,
docs/siem.md 9).

A real writer (tests/follow_writer.c) writes a rotating log; the tail is killed
with SIGKILL at random points while it catches up, and again while the writer
goes on, left down while the writer rotates the file the state names, then
restarted and ended with SIGTERM. The union of its outputs must be every line
the writer wrote, in chain order; each restart may repeat only the lines after
the last saved position (at most one batch, 1024 lines), and those must be
exactly the last ones the run before emitted. After SIGTERM the state names
the last emitted record. Bogus state files (garbage, another chain, a changed
hash, seq, offset or chain id, a symbolic link, a state inside the log
directory) are refused with exit 2, emit nothing and are left as they were.

Retention behind a stopped tail (the rotated files wholly before the state's
record deleted) resumes with no finding; a deleted file after it is still a
missing-file. The writer beginning a new chain at the active name: a state
on the old chain is refused, a new tail follows the new chain. A restart on
a glob expanded before the writer rotated the state's file away resumes, and
so does one started while the state's file is out of the directory's listing
for 0.3 s (a rename seen by no listing). Then a v2 log
(keys from auditlog-keygen, seals, checkpoints, rotation) tailed with --pubkey
--format ocsf, SIGKILLed in its catch-up and restarted: the
objects' metadata.sequence values cover the chain without a gap, repeats only
at the restart, and each object is the one of its record (raw_data).

Args: follow_writer auditlog-verify auditlog-keygen v2_e2e_writer
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WRITER, VERIFY, KEYGEN, V2WRITER = sys.argv[1:5]
BATCH = 1024
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("cli_follow_state: FAIL:", msg, file=sys.stderr)


def seq_of(line):
    return json.loads(line)["seq"]


def read_state(path):
    with open(path) as f:
        return dict(ln.split(" ", 1) for ln in f.read().splitlines())


def rotated(logdir):
    """The rotated files in chain order, by the first seq in their names
    (<name>.<time>-<first seq>)."""
    return sorted((n for n in os.listdir(logdir) if n.startswith("audit.log.")), key=lambda n: int(n.rsplit("-", 1)[1]))


def chain_lines(logdir):
    """Every line written, in chain order: the rotated files, then the active file."""
    out = []
    for n in rotated(logdir) + ["audit.log"]:
        with open(os.path.join(logdir, n), "rb") as f:
            out += f.read().split(b"\n")[:-1]
    return out


ALL = []


class Tail:
    def __init__(self, d, k, state, logdir, extra=()):
        ALL.append(self)
        self.path = "%s/out%d" % (d, k)
        self.err = "%s/err%d" % (d, k)
        with open(self.path, "wb") as o, open(self.err, "wb") as e:
            self.p = subprocess.Popen([VERIFY, "--follow", "--emit", "--state", state] + list(extra) + [logdir],
                                      stdout=o, stderr=e)

    def lines(self):
        """Its whole lines: a run killed in the middle of a write may leave a
        partial last line, which a receiver drops (docs/siem.md 9)."""
        with open(self.path, "rb") as f:
            data = f.read()
        self.torn = not data.endswith(b"\n") and bool(data)
        return data.split(b"\n")[:-1]

    def kill(self, sig):
        self.p.send_signal(sig)
        return self.p.wait(timeout=30)


def ino_of(path):
    """The inode at path, None while there is no file: a rotation renames the
    active file away before it creates the next one."""
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def wait_for(cond, secs, step=0.05):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


def refused(args):
    """A run that must stop at once: one still following after 5 s took the
    state (it is killed; its exit status is then -9)."""
    try:
        return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=5)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(args, -9, e.stdout or b"", e.stderr or b"")


def v2_tail(d):
    keys = d + "/v2keys"
    os.mkdir(keys, 0o700)
    subprocess.run([KEYGEN, "--delta", "1", "--host", "host-a.example", "--dir", keys], check=True,
                   stdout=subprocess.DEVNULL)
    logdir = d + "/v2log"
    os.mkdir(logdir)
    subprocess.run([V2WRITER, logdir + "/audit.log", keys + "/sealing-state", keys + "/signing-key", "3000",
                    "8192", "0"], check=True)
    lines = chain_lines(logdir)
    extra = ["--pubkey", keys + "/pubkey", "--format", "ocsf"]
    t1 = Tail(d, 200, d + "/v2state", logdir, extra)
    wait_for(lambda: os.path.getsize(t1.path) >= 2000000, 10, 0.001)
    t1.kill(signal.SIGKILL)
    t2 = Tail(d, 201, d + "/v2state", logdir, extra)
    # the last lines wait for a checkpoint that never comes (the writer
    # closed): the tail has caught up once its state stops moving
    prev = None
    for _ in range(100):
        time.sleep(0.2)
        cur = os.path.exists(d + "/v2state") and read_state(d + "/v2state")["seq"]
        if cur and cur == prev:
            break
        prev = cur
    if t2.kill(signal.SIGTERM) != 0:
        fail("v2: exit status after SIGTERM")
    a = [json.loads(x) for x in t1.lines()]
    b = [json.loads(x) for x in t2.lines()]
    if not a or not b:
        fail("v2: a run emitted nothing (%d, %d objects)" % (len(a), len(b)))
        return
    sa, sb = [o["metadata"]["sequence"] for o in a], [o["metadata"]["sequence"] for o in b]
    rep = sa[-1] - sb[0] + 1
    if sa != list(range(len(sa))) or sb != list(range(sb[0], sb[0] + len(sb))) or not 0 <= rep <= BATCH:
        fail("v2: sequences %d..%d then %d..%d" % (sa[0], sa[-1], sb[0], sb[-1]))
    for o in a + b:
        if o["raw_data"].encode() != lines[o["metadata"]["sequence"]]:
            fail("v2: the object of seq %d is not its record's" % o["metadata"]["sequence"])
            break
    if sb[-1] < len(lines) - 3:
        fail("v2: the tail stopped at seq %d of %d" % (sb[-1], len(lines) - 1))
    print("cli_follow_state: v2 --pubkey --format ocsf: %d + %d objects, %d repeated, last seq %d of %d" % (
        len(a), len(b), rep, sb[-1], len(lines) - 1))


def caught_up(d, k, log, events, state, what):
    """Write `events` events to log (64 KiB files), tail its directory with
    state until it has passed every line on, end it (SIGTERM): the lines."""
    logdir = os.path.dirname(log)
    subprocess.run([WRITER, log, str(events), "65536"], check=True)
    want = chain_lines(logdir)
    t = Tail(d, k, state, logdir)
    wait_for(lambda: len(t.lines()) >= len(want), 30)
    time.sleep(0.3)
    if t.kill(signal.SIGTERM) != 0 or t.lines() != want:
        fail("%s: the first run (%d of %d lines)" % (what, len(t.lines()), len(want)))
    return want


def scene(d, name, k, events, what):
    """A log in d/name that the writer filled with `events` events, and the
    state d/name-state of a tail that passed every line on (caught_up): the
    directory, the log, the state's path and the lines."""
    ldir = "%s/%s" % (d, name)
    os.mkdir(ldir)
    log = ldir + "/audit.log"
    state = "%s/%s-state" % (d, name)
    return ldir, log, state, caught_up(d, k, log, events, state, what)


def retention(d):
    """Retention behind a stopped tail: the rotated files wholly before the
    state's record are deleted; the tail resumes with no finding (exit 0) and
    passes on exactly the records written since. A file deleted after the
    state's record is still a missing-file (exit 1)."""
    rdir, rlog, rstate, _ = scene(d, "ret", 400, 3000, "retention")
    st = read_state(rstate)
    old = rotated(rdir)
    if len(old) < 3:
        fail("retention: the writer rotated %d times, want 3 or more" % len(old))
        return
    for n in old[:2]:
        os.unlink(os.path.join(rdir, n))
    subprocess.run([WRITER, rlog, "200", "65536"], check=True)
    new = [x for x in chain_lines(rdir) if seq_of(x) > int(st["seq"])]
    t = Tail(d, 401, rstate, rdir)
    wait_for(lambda: t.lines() and seq_of(t.lines()[-1]) == seq_of(new[-1]), 30)
    time.sleep(0.3)
    rc = t.kill(signal.SIGTERM)
    with open(t.err) as f:
        err = f.read()
    if rc != 0 or "missing-file" in err:
        fail("retention: resumed after old files were deleted: exit %d, stderr %r" % (rc, err[-600:]))
    if [x for x in t.lines() if seq_of(x) > int(st["seq"])] != new:
        fail("retention: %d new lines passed on, want %d" % (len(t.lines()), len(new)))
    # now a file after the state's record goes: that is a loss, reported
    st = read_state(rstate)
    subprocess.run([WRITER, rlog, "1500", "65536"], check=True)
    later = [n for n in rotated(rdir) if n not in old]
    victim = None
    for n in later:
        with open(os.path.join(rdir, n), "rb") as f:
            seqs = [seq_of(x) for x in f.read().split(b"\n")[:-1]]
        if seqs and seqs[0] > int(st["seq"]) and n != later[-1]:
            victim = n
            break
    if victim is None:
        fail("retention: no rotated file wholly after the state's record")
        return
    os.unlink(os.path.join(rdir, victim))
    end = seq_of(chain_lines(rdir)[-1])
    t = Tail(d, 402, rstate, rdir)
    # the gap is passed on after the tail's tries (docs/siem.md 9.3), then the rest
    wait_for(lambda: t.lines() and seq_of(t.lines()[-1]) == end, 60)
    time.sleep(0.3)
    rc = t.kill(signal.SIGTERM)
    with open(t.err) as f:
        err = f.read()
    if rc != 1 or "missing-file" not in err:
        fail("retention: a file after the state's record deleted: exit %d, stderr %r" % (rc, err[-600:]))


def new_chain(d):
    """The writer begins a new chain at the active name (its active file was
    deleted while rotated files of the old chain remain, docs/durability.md).
    A tail resumed from a state on the old chain is refused (exit 2, nothing
    passed on, the state left as it was: never a silent switch to another
    chain); a new tail follows the new chain, passes on exactly its lines and
    tells the old chain once (extra-chain, exit 1 at SIGTERM). Before, any
    second chain stopped --follow after 50 tries of listing the files again."""
    ndir, nlog, nstate, old = scene(d, "newchain", 500, 2000, "new chain")
    # the file the state names rotated away, then the active file deleted
    subprocess.run([WRITER, nlog, "1000", "65536"], check=True)
    if len(rotated(ndir)) < 2:
        fail("new chain: the writer did not rotate")
        return
    os.unlink(nlog)
    subprocess.run([WRITER, nlog, "40", "0"], check=True)
    with open(nlog, "rb") as f:
        new = f.read().split(b"\n")[:-1]
    if json.loads(new[0]).get("chain_id") == json.loads(old[0]).get("chain_id"):
        fail("new chain: the writer did not begin a new chain")
        return
    with open(nstate, "rb") as f:
        before = f.read()
    r = refused([VERIFY, "--follow", "--emit", "--state", nstate, ndir])
    with open(nstate, "rb") as f:
        after = f.read()
    if r.returncode != 2 or r.stdout or b"began a new chain" not in r.stderr or before != after:
        fail("new chain: a tail resumed on the old chain: exit %d, %d bytes out, stderr %r, state %s" %
             (r.returncode, len(r.stdout), r.stderr[-400:], "kept" if before == after else "changed"))
    t = Tail(d, 501, d + "/newchain-state2", ndir)
    wait_for(lambda: len(t.lines()) >= len(new), 30)
    time.sleep(0.3)
    rc = t.kill(signal.SIGTERM)
    with open(t.err) as f:
        err = f.read()
    if rc != 1 or t.lines() != new or err.count(": extra-chain: ") != 1:
        fail("new chain: a new tail: exit %d, %d lines (want the new chain's %d), stderr %r" %
             (rc, len(t.lines()), len(new), err[-600:]))


def stale_glob(d):
    """A tail of DIR/audit.log* (the shell's glob) is stopped, the writer then
    rotates the file its state names, and the tail is restarted with the glob
    as it was expanded before those rotations (a restart that raced them): the
    renamed files are found beside the named active file (the state's by its
    inode, the others by the headers that name them); every record since is
    passed on, no finding. Before, exit 2: "no input file begins with the
    header it names"."""
    gdir, glog, gstate, _ = scene(d, "glob", 600, 2000, "stale glob")
    st = read_state(gstate)
    files = sorted(os.path.join(gdir, n) for n in os.listdir(gdir))  # the glob, expanded now
    subprocess.run([WRITER, glog, "600", "65536"], check=True)
    if ino_of(glog) == int(st["ino"]) or len(rotated(gdir)) < len(files) + 1:
        fail("stale glob: the writer did not rotate the state's file away")
        return
    new = [x for x in chain_lines(gdir) if seq_of(x) > int(st["seq"])]
    t = Tail(d, 601, gstate, files[0], extra=files[1:])
    wait_for(lambda: t.lines() and seq_of(t.lines()[-1]) == seq_of(new[-1]), 30)
    time.sleep(0.3)
    rc = t.kill(signal.SIGTERM)
    with open(t.err) as f:
        err = f.read()
    if rc != 0 or ": offset " in err or [x for x in t.lines() if seq_of(x) > int(st["seq"])] != new:
        fail("stale glob: exit %d, %d lines (want %d after seq %s), stderr %r" %
             (rc, len(t.lines()), len(new), st["seq"], err[-600:]))


def renamed_while_listed(d):
    """The state's file out of every listing when the tail starts, back 0.3 s
    later: a directory listing that runs while the writer renames that file
    (a rotation) can miss it under both names on ext4 (hash order), which
    once refused a good state (exit 2) in cli_each_chain. The tail lists
    the inputs again for up to a second before it refuses; here it resumes
    and passes on exactly what the writer wrote since, no finding."""
    rdir, rlog, rstate, _ = scene(d, "relist", 700, 500, "renamed while listed")
    st = read_state(rstate)
    if ino_of(rlog) != int(st["ino"]):
        fail("renamed while listed: the state does not name the active file")
        return
    hidden = os.path.join(rdir, ".moving")  # listings skip it
    os.rename(rlog, hidden)
    t = Tail(d, 701, rstate, rdir)
    time.sleep(0.3)
    os.rename(hidden, rlog)
    subprocess.run([WRITER, rlog, "300", "65536"], check=True)
    new = [x for x in chain_lines(rdir) if seq_of(x) > int(st["seq"])]
    wait_for(lambda: t.lines() and seq_of(t.lines()[-1]) == seq_of(new[-1]), 30)
    time.sleep(0.3)
    rc = t.kill(signal.SIGTERM) if t.p.poll() is None else t.p.returncode
    with open(t.err) as f:
        err = f.read()
    if rc != 0 or [x for x in t.lines() if seq_of(x) > int(st["seq"])] != new:
        fail("renamed while listed: exit %d, %d lines (want %d after seq %s), stderr %r" %
             (rc, len(t.lines()), len(new), st["seq"], err[-600:]))


def main():
    d = tempfile.mkdtemp(prefix="auditlog-tailstate.", dir=os.environ.get("TMPDIR"))
    procs = []
    try:
        logdir = d + "/log"
        os.mkdir(logdir)
        state = d + "/state"
        log = logdir + "/audit.log"
        rnd = random.Random(os.environ.get("SEED", str(time.time())))
        # a backlog to catch up on
        subprocess.run([WRITER, log, "30000", "65536"], check=True)
        runs = []
        k = 0
        for _ in range(5):
            # killed once it has written some way into the backlog (the
            # catch-up takes well under a second: a time would miss it)
            t = Tail(d, k, state, logdir)
            k += 1
            grow = rnd.randint(100000, 600000)
            wait_for(lambda: os.path.getsize(t.path) >= grow, 10, 0.001)
            t.kill(signal.SIGKILL)
            runs.append(t)
            if os.environ.get("DEBUG"):
                o = t.lines() or []
                print("run", k - 1, len(o), o and seq_of(o[0]), o and seq_of(o[-1]), os.path.exists(state) and read_state(state)["seq"],
                      os.path.getsize(t.path), open(t.err).read()[:300])
        # the writer goes on while the tail runs, is killed, and is down
        w = subprocess.Popen([WRITER, log, "20000", "65536"])
        procs.append(w)
        t = Tail(d, k, state, logdir)
        k += 1
        time.sleep(0.6)
        t.kill(signal.SIGKILL)
        runs.append(t)
        st = read_state(state)
        rotated_away = wait_for(lambda: ino_of(log) not in (None, int(st["ino"])), 20)
        if not rotated_away:
            fail("the file the state names was not rotated away while the tail was down")
        time.sleep(0.3)
        t = Tail(d, k, state, logdir)
        runs.append(t)
        if w.wait(timeout=120) != 0:
            fail("the writer failed")
        want = chain_lines(logdir)
        last = seq_of(want[-1])
        if not wait_for(lambda: t.lines() and seq_of(t.lines()[-1]) == last, 60):
            with open(t.err) as f:
                fail("the last tail did not reach seq %d (exit %s); its stderr:\n%s" % (
                    last, t.p.poll(), f.read()[-2000:]))
        time.sleep(0.2)
        rc = t.kill(signal.SIGTERM)
        if rc != 0:
            fail("exit %d after SIGTERM" % rc)

        # the union: in order, every line, repeats only of the last batch
        acc = []
        repeats = []
        torn = 0
        for i, r in enumerate(runs):
            out = r.lines()
            torn += r.torn
            if not out:
                continue
            if acc:
                s0, sa = seq_of(out[0]), seq_of(acc[-1])
                rep = sa - s0 + 1
                if rep < 0:
                    fail("run %d starts at seq %d, after %d: lines lost" % (i, s0, sa))
                    rep = 0
                if rep > BATCH:
                    fail("run %d repeats %d lines (more than a batch of %d)" % (i, rep, BATCH))
                # (a run killed early may end before the one before it did)
                m = min(rep, len(out))
                if out[:m] != acc[len(acc) - rep:len(acc) - rep + m]:
                    fail("run %d: its first %d lines are not the last ones emitted before" % (i, m))
                repeats.append(rep)
                acc += out[rep:]
            else:
                acc = out
        if acc != want:
            fail("the union of the outputs (%d lines) is not the log (%d lines)" % (len(acc), len(want)))
        again = 0
        for r in runs:
            with open(r.err) as f:
                again += len(re.findall("verifying again from seq|listing the inputs again", f.read()))
        print("cli_follow_state: %d runs, %d lines, repeats per restart %s, %d partial last line(s), "
              "rotated away while down: %s, %d start(s) again after a rotation race" % (
                  len(runs), len(want), repeats, torn, rotated_away, again))
        st = read_state(state)
        if int(st["seq"]) != last or st["hash"] != json.loads(want[-1])["hash"]:
            fail("after SIGTERM the state names seq %s, not the last record %d" % (st["seq"], last))
        with open(runs[-1].err) as f:
            err = f.read()
            # findings of an attempt the tail gave up (a file rotated while
            # it listed or opened the inputs) were followed by a new one
            err = re.split("verifying again from seq|listing the inputs again", err)[-1]
            if ": offset " in err:
                fail("the last run reported a finding:\n" + err[-2000:])

        # bogus states: exit 2, nothing emitted, the file untouched
        with open(state) as f:
            good = f.read()
        other = d + "/other"
        os.mkdir(other)
        subprocess.run([WRITER, other + "/audit.log", "50", "0"], check=True)
        ot = Tail(d, 100, d + "/other-state", other)
        wait_for(lambda: os.path.exists(d + "/other-state"), 10)
        time.sleep(0.3)
        ot.kill(signal.SIGTERM)
        with open(d + "/other-state") as f:
            other_state = f.read()

        def change(name, fn):
            lines = good.splitlines()
            for i, ln in enumerate(lines):
                if ln.startswith(name + " "):
                    lines[i] = name + " " + fn(ln.split(" ", 1)[1])
            return "\n".join(lines) + "\n"

        flip = lambda h: h[:-1] + ("0" if h[-1] != "0" else "1")
        bogus = {
            "garbage": "not a state\n",
            "empty": "",
            "another chain": other_state,
            "hash": change("hash", flip),
            "seq": change("seq", lambda v: str(int(v) - 1)),
            "offset": change("offset", lambda v: str(int(v) + 1)),
            "chain_id": change("chain_id", flip),
            "header_hash": change("header_hash", flip),
            "trailing line": good + "extra 1\n",
        }
        for what, text in bogus.items():
            path = d + "/bogus"
            with open(path, "w") as f:
                f.write(text)
            p = refused([VERIFY, "--follow", "--emit", "--state", path, logdir])
            with open(path) as f:
                after = f.read()
            if p.returncode != 2 or p.stdout or after != text or b"--state" not in p.stderr:
                fail("bogus state (%s): exit %d, %d bytes out, %s, stderr %r" % (
                    what, p.returncode, len(p.stdout), "unchanged" if after == text else "CHANGED",
                    p.stderr[:200]))
        os.symlink(state, d + "/link")
        p = refused([VERIFY, "--follow", "--emit", "--state", d + "/link", logdir])
        if p.returncode != 2 or p.stdout:
            fail("a state through a symbolic link: exit %d" % p.returncode)
        p = refused([VERIFY, "--follow", "--emit", "--state", logdir + "/tail-state", logdir])
        if p.returncode != 2 or p.stdout or os.path.exists(logdir + "/tail-state"):
            fail("a state in the log directory: exit %d" % p.returncode)
        v2_tail(d)

        # a gap that stays (a rotated file deleted): the tail verifies again
        # from the last line it passed on, three times, then passes the gap
        # on with its finding (exit 1), every other line once
        gdir = d + "/gap"
        os.mkdir(gdir)
        subprocess.run([WRITER, gdir + "/audit.log", "3000", "65536"], check=True)
        rot = rotated(gdir)
        with open(os.path.join(gdir, rot[2]), "rb") as f:
            gone = {seq_of(x) for x in f.read().split(b"\n")[:-1]}
        os.unlink(os.path.join(gdir, rot[2]))
        g = Tail(d, 300, d + "/gap-state", gdir)
        left = [x for x in chain_lines(gdir)]
        wait_for(lambda: len(g.lines()) >= len(left), 30)
        time.sleep(0.3)
        rc = g.kill(signal.SIGTERM)
        with open(g.err) as f:
            err = f.read()
        if rc != 1 or "missing-file" not in err or err.count("verifying again from seq") != 4:
            fail("a deleted file: exit %d, stderr %r" % (rc, err[-600:]))
        if g.lines() != left or gone & {seq_of(x) for x in g.lines()}:
            fail("a deleted file: %d lines passed on, want the %d left" % (len(g.lines()), len(left)))
        retention(d)
        new_chain(d)
        stale_glob(d)
        renamed_while_listed(d)
    finally:
        for p in procs + [t.p for t in ALL]:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(d)
    if failures:
        sys.exit(1)
    print("cli_follow_state: ok")


main()

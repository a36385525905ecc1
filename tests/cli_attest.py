#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Attestation statements end to end (docs/format.md 27).

Args: auditlog-keygen auditlog-verify auditlog-sealer sealer_writer

1. A real sealer (keygen's keys, delta 1 s) and a real writer: after two epochs
   `auditlog-keygen --attest` (the state under its lock, never written)
   gives a statement that `auditlog-verify --attest` accepts with the
   verification key and the writer's log (exit 0); the state file is
   byte-identical before and after. A writer killed without `close`, left
   behind while the sealer goes on, is an `attest-lag` notice (exit 0).
2. Tampering, each a finding (exit 1): a changed attested epoch, another
   host, another key's verification key (unknown-key), a replayed statement
   (the auditor's nonce differs; older than --attest-max-age), a state kept
   behind its schedule (attest-epoch), a truncated statement.
3. Chains against the statement, written with tests/vectors/v2log.py (the
   spec's independent writer) under a state whose file this script writes:
   a seal of a later epoch dated before the statement, and one of an earlier
   epoch dated after it, are `attest-conflict`; an honest chain is not.
"""
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors"))
import gen_v2_vectors as V  # noqa: E402
import v2log  # noqa: E402

KEYGEN, VERIFY, SEALER, WRITER = sys.argv[1:5]
NS = 10 ** 9
failed = []


def check(cond, what):
    if not cond:
        failed.append(what)
        sys.stderr.write("FAIL: %s\n" % what)


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, **kw)


def verify(d, stmt, vkey, *extra):
    p = run(VERIFY, "--attest", stmt, "--verify-key", vkey, *extra)
    return p.returncode, p.stdout + p.stderr


def expect(rc_out, rc, cls, what):
    got, out = rc_out
    ok = got == rc and (cls is None or (": %s: " % cls) in out)
    if cls is None and rc == 0:
        ok = ok and ": attest-" not in out and ": bad-" not in out
    check(ok, "%s: want exit %d %s, got %d:\n%s" % (what, rc, cls or "", got, out))


def edit(path, out, old, new):
    with open(path) as f:
        t = f.read()
    assert old in t, (old, t)
    with open(out, "w") as f:
        f.write(t.replace(old, new, 1))


def state_text(keys, e, max_jump=3162240):
    """A sealing state (17.2) of v2log's keys at epoch e (boot fields are not
    read by --attest)."""
    t = ("auditlog-sealing-state 2\nscheme hmac-sha256-tree32\nhost %s\nkey-id %s\nt0 %d\n"
         "delta %d\nmax-jump %d\nepoch %d\nboot-id %s\nboot-start %d\n"
         % (keys.host.decode(), keys.kid.hex(), keys.t0, keys.delta, max_jump, e, "00" * 16, 1))
    for d, i, s in V.covering_seeds(keys.S, e):
        t += "node %d %d %s\n" % (d, i, s.hex())
    return t


def write_key(path, text, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text if isinstance(text, str) else text.decode())


def attest(state, out, *extra):
    p = run(KEYGEN, "--attest", "--state", state, "--out", out, *extra)
    check(p.returncode == 0, "keygen --attest %s: exit %d: %s" % (state, p.returncode, p.stderr))
    return p


def wall_of(stmt):
    with open(stmt) as f:
        for line in f:
            if line.startswith("wall "):
                return int(line.split()[1])
    raise ValueError(stmt)


def part1(d):
    k = os.path.join(d, "k")
    os.mkdir(k, 0o700)
    p = run(KEYGEN, "--host", "attest-test", "--delta", "1", "--dir", k)
    check(p.returncode == 0, "keygen: %s" % p.stderr)
    sock = os.path.join(d, "sock")
    sealer = subprocess.Popen([SEALER, "--state", k + "/sealing-state", "--signing-key",
                               k + "/signing-key", "--socket", sock, "--allow-uid", str(os.getuid())],
                              stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        check(os.path.exists(sock), "no sealer socket")
        log = os.path.join(d, "a.log")
        w = run(WRITER, log, sock, "120", "600")
        check(w.returncode == 0, "writer: %s" % w.stderr)
        # a writer that dies without close: its chain stops
        dead = os.path.join(d, "dead.log")
        h = subprocess.Popen([WRITER, dead, sock, "10", "0", "hold"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(h.stdout.readline().strip() == b"ready", "hold writer not ready")
        h.kill()
        h.wait()
        time.sleep(3.2)  # the sealer's timer goes on, three epochs
        # --attest leaves the state alone. The sealer's own timer replaces the
        # file once an epoch (1 s) and may do so while --attest runs (a debug
        # run under load, 2026-12-02): only three changes in three tries count
        s1 = os.path.join(d, "s1")
        changed = replaced = 0
        for _ in range(3):
            with open(k + "/sealing-state", "rb") as f:
                before = f.read()
            st_before = os.stat(k + "/sealing-state")
            if os.path.exists(s1):  # a try before: --out never overwrites
                os.unlink(s1)
            attest(k + "/sealing-state", s1)
            with open(k + "/sealing-state", "rb") as f:
                same = f.read() == before
            same_ino = os.stat(k + "/sealing-state").st_ino == st_before.st_ino
            changed += not same
            replaced += not same_ino
            if same and same_ino:
                break
        check(changed < 3, "--attest changed the state file")
        check(replaced < 3, "--attest replaced the state")
        vk = k + "/verify-key"
        expect(verify(d, s1, vk), 0, None, "a fresh statement alone")
        expect(verify(d, s1, vk, log), 0, None, "a fresh statement and the writer's log")
        expect(verify(d, s1, vk, log, dead), 0, "attest-lag", "the dead writer's chain lags")
        # the ordinary verification of the same log still says intact
        p = run(VERIFY, "--verify-key", vk, log)
        check(p.returncode == 0, "ordinary verification: %s" % p.stdout)
        # with the auditor's challenge
        nonce = V.H(b"challenge 1").hex()
        s2 = os.path.join(d, "s2")
        attest(k + "/sealing-state", s2, "--nonce", nonce)
        expect(verify(d, s2, vk, "--attest-nonce", nonce), 0, None, "the statement with its nonce")
        # 2. tampering
        other = V.H(b"challenge 2").hex()
        expect(verify(d, s2, vk, "--attest-nonce", other), 1, "bad-attestation",
               "a replayed statement (another nonce)")
        expect(verify(d, s1, vk, "--attest-nonce", nonce), 1, "bad-attestation",
               "a statement without the nonce asked for")
        time.sleep(1.2)
        expect(verify(d, s1, vk, "--attest-max-age", "1"), 1, "attest-age", "a statement shown again later")
        with open(s1) as f:
            e = int([x for x in f if x.startswith("epoch ")][0].split()[1])
        edit(s1, d + "/t-epoch", "\nepoch %d\n" % e, "\nepoch %d\n" % (e + 1))
        expect(verify(d, d + "/t-epoch", vk), 1, "bad-attestation", "a changed attested epoch")
        edit(s1, d + "/t-host", "host attest-test\n", "host attest-tesu\n")
        expect(verify(d, d + "/t-host", vk), 1, "bad-attestation", "another host id")
        edit(s1, d + "/t-wall", "wall ", "wall 1")
        expect(verify(d, d + "/t-wall", vk), 1, "bad-attestation", "a changed wall time")
        with open(s1) as f:
            t = f.read()
        with open(d + "/t-cut", "w") as f:
            f.write(t[:-10])
        expect(verify(d, d + "/t-cut", vk), 1, "bad-attestation", "a truncated statement")
        k2 = os.path.join(d, "k2")
        os.mkdir(k2, 0o700)
        run(KEYGEN, "--host", "attest-test", "--delta", "1", "--dir", k2)
        expect(verify(d, s1, k2 + "/verify-key"), 1, "unknown-key", "another key's verification key")
        # a state kept behind: a copy of an early epoch's state, attested now
        old = os.path.join(d, "old")
        os.mkdir(old, 0o700)
        shutil.copy(k2 + "/sealing-state", old + "/sealing-state")
        os.chmod(old + "/sealing-state", 0o600)
        time.sleep(2.2)  # no holder advances k2's state: it is behind by two epochs
        attest(old + "/sealing-state", d + "/s-old")
        expect(verify(d, d + "/s-old", k2 + "/verify-key"), 1, "attest-epoch", "a state kept behind")
        # a state file readable by others is refused, nothing attested
        os.chmod(old + "/sealing-state", 0o644)
        p = run(KEYGEN, "--attest", "--state", old + "/sealing-state")
        check(p.returncode == 1 and p.stdout == "", "a 0644 state attested: %s" % p.stderr)
        # usage: each a usage error (exit 2), nothing written
        for args in ([VERIFY, "--attest", s1], [VERIFY, "--attest-nonce", nonce, "--verify-key", vk, log],
                     [VERIFY, "--attest", s1, "--verify-key", vk, "--json"],
                     [VERIFY, "--attest", s1, "--verify-key", vk, "--attest-nonce", "xyz"],
                     [KEYGEN, "--attest"], [KEYGEN, "--nonce", nonce, "--dir", d + "/never"],
                     [KEYGEN, "--attest", "--state", k + "/sealing-state", "--nonce", "ab"],
                     [KEYGEN, "--attest", "--state", k + "/sealing-state", "--dir", d]):
            p = run(*args)
            check(p.returncode == 2, "usage %s: exit %d" % (args[1:], p.returncode))
        check(not os.path.exists(d + "/never"), "a usage error wrote files")
    finally:
        sealer.send_signal(signal.SIGTERM)
        sealer.wait(timeout=10)


def part3(d):
    delta = 10 * NS
    e = 40
    now = time.time_ns()
    keys = v2log.Keys(b"attest", host=b"attest-host", t0=now - e * delta - delta // 2, delta=delta)
    sd = os.path.join(d, "p3")
    os.mkdir(sd, 0o700)
    write_key(sd + "/sealing-state", state_text(keys, e))
    write_key(sd + "/vkey", keys.vkey_text())
    stmt = sd + "/stmt"
    attest(sd + "/sealing-state", stmt)
    W = wall_of(stmt)
    vk = sd + "/vkey"
    expect(verify(d, stmt, vk), 0, None, "the python-made state's statement")

    def chain(label, seals, close=True):
        """seals: (epoch, ns) of batch seals after an open at the first."""
        log = v2log.Log(keys, label)
        log.open(seals[0][1] - 1000)
        for ep, ns in seals:
            log.event(ns - 500)
            log.seal("batch", ns, ep)
        if close:
            log.close(seals[-1][1] + 1000)
        path = os.path.join(sd, label.decode() + ".log")
        log.write(path)
        return path

    t = keys.t0
    honest = chain(b"honest", [(e - 2, t + (e - 2) * delta + NS), (e - 1, t + (e - 1) * delta + NS)])
    expect(verify(d, stmt, vk, honest), 0, None, "an honest closed chain")
    later = chain(b"later", [(e - 2, t + (e - 2) * delta + NS), (e + 3, t + (e - 1) * delta + NS)])
    expect(verify(d, stmt, vk, later), 1, "attest-conflict", "a later epoch's seal dated before")
    earlier = chain(b"earlier", [(e - 3, W + 3 * delta)])
    expect(verify(d, stmt, vk, earlier), 1, "attest-conflict", "an earlier epoch's seal dated after")
    lag = chain(b"lag", [(e - 5, t + (e - 5) * delta + NS)], close=False)
    expect(verify(d, stmt, vk, lag), 0, "attest-lag", "a chain far behind, not closed")
    expect(verify(d, stmt, vk, honest, lag, later), 1, "attest-conflict", "several chains")


def main():
    d = tempfile.mkdtemp(prefix="auditlog-attest.", dir=os.environ.get("TMPDIR"))
    try:
        part1(d)
        part3(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if failed:
        sys.stderr.write("cli_attest: %d check(s) failed\n" % len(failed))
        return 1
    print("cli_attest: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

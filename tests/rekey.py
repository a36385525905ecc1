#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Re-keying and a lost or corrupt sealing state (docs/format.md 17.4, 19.4;
docs/keys.md, docs/durability.md).

Args: auditlog-keygen auditlog-verify auditlog-sealer v2_e2e_writer sealer_writer

1. In-process: a writer's life, `auditlog-keygen --rekey` (the state replaced
   by a new key's, atomically; the new verification key 0600), a second life:
   its open seal carries prev_key; the verifier with both keys says intact,
   with the old key only `unknown-key` at the re-key ("re-keyed here"), with
   the new one only `unknown-key` before it. A writer running across the
   re-key fails closed at its next advance (-ESTALE) and its reopening
   continues the chain.
2. Through auditlog-sealer: a life, --rekey under the running sealer (which
   stops at its next advance, exit 1, -ESTALE), the sealer started again on
   the new state, a second life: the open seal's prev_key is
   under the sealer's MAC (the chain verifies with both keys).
3. Chains from the spec's python writer (tests/vectors/v2log.py): a key change
   without the mark, on a batch seal, with a prev_key naming another key, or
   a mark on a seal under the same key are `bad-seal`; a re-key after a seal
   that is not a close, long after it, is a `gap`.
4. Lost or corrupt state: deleted, truncated, a line broken, another host's
   state, an older copy, a state others may read: the writer's open fails
   with a clear errno and the log is unchanged; a flipped seed digit is not
   seen by the holder and shows at the auditor as `bad-seal`. A state lost
   under a running writer fails it closed; the documented recovery (--rekey
   --host) continues the chain and the verifier reports the gap.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors"))
import gen_v2_vectors as V  # noqa: E402
import v2log  # noqa: E402

KEYGEN, VERIFY, SEALER, WRITER, SWRITER = sys.argv[1:6]
NS = 10 ** 9
failed = []


def check(cond, what):
    if not cond:
        failed.append(what)
        sys.stderr.write("FAIL: %s\n" % what)
    return cond


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=90, **kw)


def keygen(d, host="rk-host"):
    os.mkdir(d, 0o700)
    p = run(KEYGEN, "--host", host, "--delta", "1", "--dir", d)
    check(p.returncode == 0, "keygen %s: %s" % (d, p.stderr))


def life(log, k, events=20, pause=0, state=None):
    p = run(WRITER, log, state or k + "/sealing-state", k + "/signing-key", str(events), "0", str(pause))
    return p.returncode, p.stderr


def verify(*args):
    p = run(VERIFY, *args)
    return p.returncode, p.stdout + p.stderr


def expect(got, rc, text, what):
    ok = got[0] == rc and all(t in got[1] for t in ([text] if isinstance(text, str) else text))
    check(ok, "%s: want exit %d and %r, got %d:\n%s" % (what, rc, text, got[0], got[1][-1500:]))


def key_id(path):
    with open(path) as f:
        return [x.split()[1] for x in f if x.startswith("key-id ")][0]


def opens(log):
    with open(log) as f:
        return [x for x in f if '"kind":"open"' in x]


def part1(d):
    k = d + "/k1"
    keygen(k)
    log = d + "/a.log"
    rc, err = life(log, k)
    check(rc == 0, "life 1: %s" % err)
    old_kid, old_ino = key_id(k + "/sealing-state"), os.stat(k + "/sealing-state").st_ino
    p = run(KEYGEN, "--rekey", "--state", k + "/sealing-state", "--verify-key", d + "/new.vkey")
    check(p.returncode == 0, "rekey: %s" % p.stderr)
    new_kid = key_id(k + "/sealing-state")
    check(new_kid != old_kid and key_id(d + "/new.vkey") == new_kid, "rekey: key ids %s %s" % (old_kid, new_kid))
    check(os.stat(k + "/sealing-state").st_ino != old_ino, "rekey did not replace the state by a rename")
    check(os.stat(d + "/new.vkey").st_mode & 0o777 == 0o600, "new vkey not 0600")
    check(not [n for n in os.listdir(k) if n.endswith(".rekey")], "rekey left a temporary file")
    # a verification key is never overwritten: nothing changes
    p = run(KEYGEN, "--rekey", "--state", k + "/sealing-state", "--verify-key", d + "/new.vkey")
    check(p.returncode == 1 and key_id(k + "/sealing-state") == new_kid, "rekey over an existing vkey")
    for args in (["--rekey", "--state", k + "/sealing-state"], ["--rekey", "--verify-key", d + "/x"],
                 ["--rekey", "--state", k + "/sealing-state", "--verify-key", d + "/x", "--dir", k],
                 ["--rekey", "--state", k + "/sealing-state", "--verify-key", d + "/x", "--delta", "0"]):
        p = run(KEYGEN, *args)
        check(p.returncode == 2 and key_id(k + "/sealing-state") == new_kid and not os.path.exists(d + "/x"),
              "rekey usage %s: exit %d" % (args, p.returncode))
    rc, err = life(log, k)
    check(rc == 0, "life 2 after the re-key: %s" % err)
    o = opens(log)
    check(len(o) == 2 and '"prev_key":"%s"' % old_kid in o[1] and '"seal_key":"%s"' % new_kid in o[1],
          "the second open seal is not the re-key mark: %s" % o[-1:])
    both = ("--verify-key", k + "/verify-key", "--verify-key", d + "/new.vkey")
    expect(verify(*both, log), 0, "intact", "both keys")
    expect(verify("--verify-key", k + "/verify-key", log), 1, ["unknown-key", "re-keyed here", new_kid],
           "the old key only")
    expect(verify("--verify-key", d + "/new.vkey", log), 1, "unknown-key", "the new key only")
    # a writer running across a re-key fails closed, and its next life goes on
    w = subprocess.Popen([WRITER, log, k + "/sealing-state", k + "/signing-key", "200", "0", "400"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.2)
    p = run(KEYGEN, "--rekey", "--state", k + "/sealing-state", "--verify-key", d + "/third.vkey")
    check(p.returncode == 0, "rekey under a writer: %s" % p.stderr)
    _, err = w.communicate(timeout=60)
    check(w.returncode == 1 and "Stale file handle" in err,
          "a writer across a re-key: exit %d %s" % (w.returncode, err.strip()))
    rc, err = life(log, k)
    check(rc == 0, "life after the second re-key: %s" % err)
    expect(verify(*both, "--verify-key", d + "/third.vkey", log), 0, "verified", "three keys, two re-keys")


def part2(d):
    k = d + "/k2"
    keygen(k)
    sock = d + "/sock"

    def start():
        s = subprocess.Popen([SEALER, "--state", k + "/sealing-state", "--signing-key", k + "/signing-key",
                              "--socket", sock, "--allow-uid", str(os.getuid())], stderr=subprocess.PIPE)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        check(os.path.exists(sock), "no sealer socket")
        return s

    log = d + "/s.log"
    s = start()
    p = run(SWRITER, log, sock, "40", "0")
    check(p.returncode == 0, "sealer life 1: %s" % p.stderr)
    old_kid = key_id(k + "/sealing-state")
    p = run(KEYGEN, "--rekey", "--state", k + "/sealing-state", "--verify-key", d + "/s-new.vkey")
    check(p.returncode == 0, "rekey (sealer): %s" % p.stderr)
    # the running sealer does not reload: at its next advance it stops
    try:
        rc = s.wait(timeout=5)
    except subprocess.TimeoutExpired:
        s.kill()
        rc = None
    err = s.stderr.read().decode()
    check(rc == 1 and "Stale file handle" in err, "a sealer across a re-key: exit %s %s" % (rc, err))
    s = start()
    try:
        p = run(SWRITER, log, sock, "40", "0")
        check(p.returncode == 0, "sealer life 2: %s" % p.stderr)
    finally:
        s.send_signal(signal.SIGTERM)
        s.wait(timeout=10)
    o = opens(log)
    check(len(o) == 2 and '"prev_key":"%s"' % old_kid in o[1], "sealer: no re-key mark: %s" % o[-1:])
    expect(verify("--verify-key", k + "/verify-key", "--verify-key", d + "/s-new.vkey", log), 0, "intact",
           "through the sealer, both keys")


def part3(d):
    delta = 10 * NS
    A = v2log.Keys(b"rekey a", delta=delta)
    B = v2log.Keys(b"rekey b", t0=v2log.T0 + 100 * delta, delta=delta)
    sd = d + "/p3"
    os.mkdir(sd, 0o700)
    for name, keys in (("a", A), ("b", B)):
        with open("%s/%s.vkey" % (sd, name), "wb") as f:
            f.write(keys.vkey_text())
    vk = ("--verify-key", sd + "/a.vkey", "--verify-key", sd + "/b.vkey")

    def chain(label, how, first_close=True, gap=0):
        """life 1 under A, then life 2 under B as `how` says"""
        log = v2log.Log(A, label)
        ns = A.t0 + 150 * delta
        log.open(ns)
        log.batch([ns + 1000, ns + 2000])
        if first_close:
            log.close(ns + 3000)
        else:
            log.seal("batch", ns + 3000, A.epoch(ns))
        ns += 4000 + gap
        log.k, log.h = B, v2log.Holder(B)
        e = B.epoch(ns)
        last = log.last_seal
        f = [("kind", b"open"), ("epoch", e), ("seal_key", B.kid.hex().encode()), ("chain_id", log.chain_id),
             ("prev_seal", last[0]), ("prev_kind", last[1].encode())]
        if how == "mark":
            f.append(("prev_key", A.kid.hex().encode()))
        elif how == "wrong":
            f.append(("prev_key", B.kid.hex().encode()))
        if how == "batch":  # the key changes on a batch seal
            log.add("event", ns, [("action", b"x"), ("outcome", b"success")])
            log.seal("batch", ns + 1000, e)
        elif how == "same":  # a mark under the old key
            log.k, log.h = A, v2log.Holder(A)
            e = A.epoch(ns)
            f[1] = ("epoch", e)
            f[2] = ("seal_key", A.kid.hex().encode())
            f.append(("prev_key", A.kid.hex().encode()))
            log.add("seal", ns, f, epoch=e)
        else:
            log.add("seal", ns, f, epoch=e)
        log.batch([ns + 1000])
        log.close(ns + 2000)
        path = "%s/%s.log" % (sd, label.decode())
        log.write(path)
        return path

    expect(verify(*vk, chain(b"mark", "mark")), 0, "intact", "a marked re-key")
    # to another host's key: marked, but not a re-key of this host
    C = v2log.Keys(b"rekey c", host=b"other-host", t0=v2log.T0 + 100 * delta, delta=delta)
    with open(sd + "/c.vkey", "wb") as f:
        f.write(C.vkey_text())
    B_saved = B
    B = C
    other = chain(b"otherhost", "mark")
    B = B_saved
    expect(verify("--verify-key", sd + "/a.vkey", "--verify-key", sd + "/c.vkey", other), 1,
           ["bad-seal", "another host"], "a re-key to another host's key")
    expect(verify(*vk, chain(b"nomark", "none")), 1, ["bad-seal", "without the re-key mark"],
           "a key change without the mark")
    expect(verify(chain(b"nomark2", "none")), 1, "bad-seal", "a key change without the mark, no keys")
    expect(verify(*vk, chain(b"batch", "batch")), 1, "bad-seal", "a key change on a batch seal")
    expect(verify(*vk, chain(b"wrong", "wrong")), 1, "bad-seal", "prev_key naming another key")
    expect(verify(*vk, chain(b"same", "same")), 1, "bad-seal", "a mark under the same key")
    g = chain(b"gap", "mark", first_close=False, gap=60 * NS)
    expect(verify(*vk, g), 0, ["gap", "re-key after a batch seal"], "a re-key long after an unclosed seal")
    expect(verify("--strict", *vk, g), 1, "gap", "the same with --strict")
    expect(verify(*vk, chain(b"nogap", "mark", first_close=False)), 0, "intact",
           "a re-key right after an unclosed seal")


def part4(d):
    k = d + "/k4"
    keygen(k)
    log = d + "/l.log"
    rc, err = life(log, k)
    check(rc == 0, "life 1: %s" % err)
    st = k + "/sealing-state"
    shutil.copy(st, d + "/older")
    time.sleep(2.2)
    rc, err = life(log, k)  # the state advances past the copy
    check(rc == 0, "life 2: %s" % err)
    with open(st) as f:
        good = f.read()
    with open(log, "rb") as f:
        before = f.read()

    def put(text, mode=0o600):
        os.unlink(st)
        fd = os.open(st, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        os.write(fd, text.encode())
        os.close(fd)
        os.chmod(st, mode)

    def refused(what, err_text):
        rc, err = life(log, k)
        check(rc == 1 and err_text in err, "%s: want a refused open (%s), got %d %s" % (what, err_text, rc, err))
        with open(log, "rb") as f:
            check(f.read() == before, "%s: the log changed" % what)

    os.unlink(st)
    refused("a deleted state", "No such file or directory")
    open(st, "w").close()
    os.chmod(st, 0o600)
    put(good[:len(good) // 2])
    refused("a truncated state", "Invalid argument")
    put(good.replace("\nepoch ", "\nepocj ", 1))
    refused("a flipped byte in a name", "Invalid argument")
    put(good.replace("\nnode 32 ", "\nnode 31 ", 1))
    refused("a flipped byte in a node position", "Invalid argument")
    other = d + "/other"
    keygen(other, host="another-host")
    with open(other + "/sealing-state") as f:
        put(f.read())
    refused("another host's state", "Invalid argument")
    with open(d + "/older") as f:
        put(f.read())
    refused("an older copy", "Stale file handle")
    put(good, 0o644)
    refused("a state others may read", "Operation not permitted")
    # a flipped seed digit: not seen by the holder (no checksum without S),
    # but the seals made with keys derived from it fail at the auditor. Every
    # node gets one, so whichever epoch the writer seals in uses a bad one.
    lines = good.split("\n")
    for i, x in enumerate(lines):
        if x.startswith("node "):
            lines[i] = x[:-1] + ("0" if x[-1] != "0" else "1")
    put("\n".join(lines))
    rc, err = life(log, k)
    check(rc == 0, "a flipped seed digit: the writer cannot tell (%d %s)" % (rc, err))
    expect(verify("--verify-key", k + "/verify-key", log), 1, "bad-seal", "seals made with a flipped seed")
    # a state lost under a running writer: it fails closed; the recovery is a
    # re-key, and the verifier shows the gap
    log2 = d + "/m.log"
    put(good)
    os.unlink(st)
    p = run(KEYGEN, "--rekey", "--state", st, "--verify-key", d + "/k4-b.vkey")
    check(p.returncode == 1 and "give --host" in p.stderr, "rekey of a lost state without --host: %s" % p.stderr)
    p = run(KEYGEN, "--rekey", "--host", "rk-host", "--delta", "1", "--state", st, "--verify-key", d + "/k4-b.vkey")
    check(p.returncode == 0, "rekey --host of a lost state: %s" % p.stderr)
    w = subprocess.Popen([WRITER, log2, st, k + "/signing-key", "200", "0", "400"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.2)
    os.unlink(st)
    _, err = w.communicate(timeout=60)
    check(w.returncode == 1 and "No such file or directory" in err,
          "a state deleted under a writer: exit %d %s" % (w.returncode, err.strip()))
    time.sleep(2.5)
    p = run(KEYGEN, "--rekey", "--host", "rk-host", "--delta", "1", "--state", st, "--verify-key", d + "/k4-c.vkey")
    check(p.returncode == 0 and "missing" in p.stdout, "the documented recovery: %s %s" % (p.stdout, p.stderr))
    rc, err = life(log2, k)
    check(rc == 0, "the writer after the recovery: %s" % err)
    expect(verify("--verify-key", d + "/k4-b.vkey", "--verify-key", d + "/k4-c.vkey", log2), 0,
           ["gap", "re-key after a"], "the sealing gap of a lost state, reported")


def main():
    d = tempfile.mkdtemp(prefix="auditlog-rekey.", dir=os.environ.get("TMPDIR"))
    try:
        part1(d)
        part2(d)
        part3(d)
        part4(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if failed:
        sys.stderr.write("rekey: %d check(s) failed\n" % len(failed))
        return 1
    print("rekey: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

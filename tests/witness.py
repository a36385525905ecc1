#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""auditlog-witness end to end (docs/format.md 20.6): a real writer's v2 log
with auditlog-keygen keys; its checkpoint notes fed to the witness in order
with the consistency bundles of auditlog-verify --prove-consistency: accepted
and cosigned (the cosignature checked here from the C2SP tlog-cosignature/v1
text, with python's Ed25519); the older one again, a forged note, notes of
the right key but another root: refused; export: auditlog-verify --witness
passes on the log and reports `rewritten` on a rewritten copy.

Then the witness's keys and its service (20.6): auditlog-verify --witness-key
trusts only notes the witness cosigned (a cosignature by another key, a
tampered timestamp, a note without one: bad-checkpoint, not compared);
--hosts refuses an unregistered host; `follow` on a central copy cosigns
each checkpoint once, across its own restart (mid-stream, and killed by
SIGTERM while following), refuses a copy that moves backwards or whose
lines between two checkpoints were rewritten, and what it exports catches
the rewritten host files with --witness --witness-key.

    witness.py KEYGEN VERIFY WRITER WITNESS WITNESS_API"""

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "vectors"))
import v2_e2e as E  # noqa: E402

KEYGEN, VERIFY, WRITER, WITNESS, WITNESS_API = sys.argv[1:6]
FAILED = []
DASH = "\u2014 ".encode()


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        FAILED.append(what)
    return ok


def run(*args):
    p = subprocess.run(list(args), capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode().strip()


def key_lines(path):
    with open(path) as f:
        return dict(ln.split(" ", 1) for ln in f.read().splitlines())


def sign_note(text, origin, seed, pub):
    """a C2SP signed note of text by (origin, seed); the key id from pub"""
    kid = hashlib.sha256(origin + b"\n\x01" + pub).digest()[:4]
    sig = Ed25519PrivateKey.from_private_bytes(seed).sign(text)
    return text + b"\n" + DASH + origin + b" " + base64.b64encode(kid + sig) + b"\n"


def with_root(note, root):
    ls = note.split(b"\n")
    ls[2] = base64.b64encode(root)
    return b"\n".join(ls[:ls.index(b"")]) + b"\n"  # the text only


def main():
    tmp = tempfile.mkdtemp(prefix="witness.")
    try:
        cases(tmp)
    finally:
        shutil.rmtree(tmp)
    print("%d failed" % len(FAILED) if FAILED else "all passed")
    return 1 if FAILED else 0


def cases(tmp):
    keys, other, wkeys, log, state = (os.path.join(tmp, d) for d in ("keys", "other", "wkeys", "log", "state"))
    for d, host in ((keys, "host-a"), (other, "host-a"), (wkeys, "siem.example")):
        os.makedirs(d)
        subprocess.run([KEYGEN, "--host", host, "--delta", "1", "--dir", d], check=True, stdout=subprocess.DEVNULL)
    os.makedirs(log)
    os.makedirs(state)
    subprocess.run([WRITER, os.path.join(log, "audit.log"), os.path.join(keys, "sealing-state"),
                    os.path.join(keys, "signing-key"), "200", "8192", "0"], check=True)
    pub, wkey = os.path.join(keys, "pubkey"), os.path.join(wkeys, "signing-key")
    notes = {}
    for n in os.listdir(log):
        with open(os.path.join(log, n), "rb") as f:
            for ln in f.read().splitlines():
                j = json.loads(ln)
                if j["type"] == "checkpoint":
                    notes[j["size"]] = j["note"].encode()
    sizes = sorted(notes)
    if not check(len(sizes) >= 3, "the log holds checkpoints: %s" % sizes):
        return
    s0, s1, s2 = sizes[0], sizes[1], sizes[-1]
    origin = notes[s0].split(b"\n")[0]
    hpub = bytes.fromhex(key_lines(pub)["ed25519"])
    hseed = bytes.fromhex(key_lines(os.path.join(keys, "signing-key"))["ed25519-seed"])
    oseed = bytes.fromhex(key_lines(os.path.join(other, "signing-key"))["ed25519-seed"])
    wseed = bytes.fromhex(key_lines(wkey)["ed25519-seed"])
    wpub = bytes.fromhex(key_lines(os.path.join(wkeys, "pubkey"))["ed25519"])

    def put(name, data):
        p = os.path.join(tmp, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def bundle(m, n):
        out = os.path.join(tmp, "c%d-%d" % (m, n))
        if not os.path.exists(out):
            rc, _, err = run(VERIFY, "--prove-consistency", "%d:%d" % (m, n), "--out", out, log)
            check(rc == 0, "--prove-consistency %d:%d (%s)" % (m, n, err))
        return out

    def add(note_path, cons=None):
        args = [WITNESS, "--state", state, "--key", wkey, "--pubkey", pub, "add", note_path]
        return run(*(args + (["--consistency", cons] if cons else [])))

    def held():
        rc, out, _ = run(WITNESS, "--state", state, "export", origin.decode())
        return out if rc == 0 else None

    def cosigned(what, note, out):
        """out is note + one cosignature line of the witness, valid per tlog-cosignature/v1"""
        if not check(out.startswith(note) and out.count(b"\n") == note.count(b"\n") + 1,
                     "%s: the note as given and one line more" % what):
            return
        line = out[len(note):]
        m = re.fullmatch(DASH + rb"siem\.example ([A-Za-z0-9+/=]+)\n", line)
        if not check(m is not None, "%s: a cosignature line of siem.example: %r" % (what, line)):
            return
        blob = base64.b64decode(m.group(1), validate=True)
        check(len(blob) == 4 + 8 + 64, "%s: key id, timestamp, signature (%d bytes)" % (what, len(blob)))
        kid, t, sig = blob[:4], int.from_bytes(blob[4:12], "big"), blob[12:]
        check(kid == hashlib.sha256(b"siem.example\n\x04" + wpub).digest()[:4], "%s: key id of type 0x04" % what)
        check(abs(t - time.time()) < 120, "%s: timestamp %d is now" % (what, t))
        text = note[:note.index(b"\n\n") + 1]
        try:
            Ed25519PublicKey.from_public_bytes(wpub).verify(sig, b"cosignature/v1\ntime %d\n" % t + text)
            ok = True
        except Exception:
            ok = False
        check(ok, "%s: the cosignature verifies over cosignature/v1, time and the note text" % what)

    # first use, then in order with the bundles
    rc, out, err = add(put("n0", notes[s0]))
    check(rc == 0, "first note (size %d) accepted (%s)" % (s0, err))
    cosigned("size %d" % s0, notes[s0], out)
    check(held() == out, "the state holds the cosigned note")
    rc, out, err = add(put("n1", notes[s1]))
    check(rc == 1 and "needs --consistency" in err, "a larger note without a bundle is refused (%s)" % err)
    rc, out, err = add(put("n1", notes[s1]), bundle(s0, s2))
    check(rc == 1 and "held tree size" in err, "a bundle of other sizes is refused (%s)" % err)
    rc, out, err = add(put("n1", notes[s1]), bundle(s0, s1))
    check(rc == 0, "size %d with the bundle %d:%d accepted (%s)" % (s1, s0, s1, err))
    cosigned("size %d" % s1, notes[s1], out)
    kept = held()
    check(kept == out, "the state moved to size %d" % s1)

    # refusals, the state unchanged by each
    rc, _, err = add(put("n0", notes[s0]))
    check(rc == 1 and "moving backwards" in err, "the older note again is refused (%s)" % err)
    text2 = notes[s2][:notes[s2].index(b"\n\n") + 1]
    rc, _, err = add(put("forged", sign_note(text2, origin, oseed, hpub)), bundle(s1, s2))
    check(rc == 1 and "signature" in err, "a note signed by another key is refused (%s)" % err)
    bad = with_root(notes[s2], hashlib.sha256(b"another tree").digest())
    rc, _, err = add(put("bad2", sign_note(bad, origin, hseed, hpub)), bundle(s1, s2))
    check(rc == 1 and "inconsistent" in err, "a validly signed note of another root is refused (%s)" % err)
    bad = with_root(notes[s1], hashlib.sha256(b"another tree").digest())
    rc, _, err = add(put("bad1", sign_note(bad, origin, hseed, hpub)))
    check(rc == 1 and "inconsistent" in err, "the held size with another root is refused (%s)" % err)
    check(held() == kept, "no refusal changed the state")
    rc, out, err = add(put("n1", notes[s1]))
    check(rc == 0 and out == kept, "the held note again: accepted, its cosigned copy printed (%s)" % err)

    rc, out, err = add(put("n2", notes[s2]), bundle(s1, s2))
    check(rc == 0, "size %d with the bundle %d:%d accepted (%s)" % (s2, s1, s2, err))
    cosigned("size %d" % s2, notes[s2], out)

    # export, then auditlog-verify --witness on the log and on a rewritten copy
    rc, wfile, err = run(WITNESS, "--state", state, "export", origin.decode())
    check(rc == 0 and wfile == out, "export writes the held note (%s)" % err)
    wpath = put("witness-file", wfile)
    rc, o, err = run(VERIFY, "--json", "--pubkey", pub, "--witness", wpath, log)
    counts = json.loads(o)["counts"] if o else {}
    check(rc == 0 and not counts.get("rewritten"), "the log verifies with the witness file (rc %d %s)" % (rc, err))
    recs = E.parse(log)
    ka = E.RealKeys(keys)
    target = next(r for r in recs if r.caller and r.seq < s2 - 1)
    key = target.caller[0][0]
    att = E.rebuild(recs, ka, E.Holder(ka, orig=E.Orig(recs)), E.replace_caller(target.seq, key, b"mallo"))
    d = E.write_dir(os.path.join(tmp, "rewritten"), att)
    rc, o, err = run(VERIFY, "--json", "--pubkey", pub, d)
    check(rc == 0, "the rewritten copy (re-signed with the host's key) verifies without a witness (rc %d)" % rc)
    rc, o, err = run(VERIFY, "--json", "--pubkey", pub, "--witness", wpath, d)
    counts = json.loads(o)["counts"] if o else {}
    check(rc == 1 and counts.get("rewritten", 0) >= 1,
          "the witness file catches the rewrite of seq %d: rewritten %s (rc %d)" % (target.seq, counts.get("rewritten"), rc))

    # a damaged state file: refused, and left as it is
    sfile = os.path.join(state, origin.decode().replace("/auditlog/", ","))
    check(os.path.isfile(sfile), "the state file is named <host>,<chain id>")
    with open(sfile, "rb") as f:
        good = f.read()
    check(good.startswith(b"auditlog-witness-state 1\norigin %s\nsize %d\n" % (origin, s2)),
          "the state file holds the origin and size %d" % s2)
    with open(sfile, "wb") as f:
        f.write(good[:-2] + b"\n")
    rc, _, err = add(put("n2", notes[s2]))
    check(rc == 1 and "not of docs/format.md 20.6" in err, "a damaged state is refused (%s)" % err)
    with open(sfile, "rb") as f:
        check(f.read() == good[:-2] + b"\n", "the damaged state is left untouched")
    check([n for n in os.listdir(state) if n.endswith(".new")] == [], "no temporary file left behind")

    # usage
    rc, _, _ = run(WITNESS, "--state", state, "add")
    check(rc == 2, "add without its arguments is a usage error")
    rc, _, _ = run(WITNESS, "--state", state, "export", "no-origin")
    check(rc == 2, "export of a malformed origin is a usage error")
    rc, _, _ = run(WITNESS, "--state", state, "export", origin.decode()[:-1] + ("0" if origin[-1:] != b"0" else "1"))
    check(rc == 1, "export of an origin never held is refused")

    service_cases(tmp, dict(keys=keys, pub=pub, wkey=wkey, wkeys=wkeys, wpub=wpub, wseed=wseed, log=log,
                            notes=notes, origin=origin, recs=recs, att=att, put=put))


def cosig_line(name, seed, pub, t, text):
    """a tlog-cosignature/v1 line, written here from the C2SP text"""
    kid = hashlib.sha256(name + b"\n\x04" + pub).digest()[:4]
    sig = Ed25519PrivateKey.from_private_bytes(seed).sign(b"cosignature/v1\ntime %d\n" % t + text)
    return DASH + name + b" " + base64.b64encode(kid + t.to_bytes(8, "big") + sig) + b"\n"


def vjson(*args):
    rc, o, err = run(VERIFY, "--json", *args)
    try:
        return rc, json.loads(o), err
    except ValueError:
        return rc, {}, err


def service_cases(tmp, c):
    pub, wkey, log, notes, origin, put = c["pub"], c["wkey"], c["log"], c["notes"], c["origin"], c["put"]
    wpubf = os.path.join(c["wkeys"], "pubkey")
    sizes = sorted(notes)
    s1 = sizes[1]
    host_only = notes[s1]  # signed by the host, cosigned by nobody
    text = host_only[:host_only.index(b"\n\n") + 1]
    now = int(time.time())

    # ---- auditlog-verify --witness --witness-key
    good = host_only + cosig_line(b"siem.example", c["wseed"], c["wpub"], now, text)
    rc, j, err = vjson("--pubkey", pub, "--witness", put("w-good", good), "--witness-key", wpubf, log)
    cos = j.get("cosigned", [])
    check(rc == 0 and not j.get("counts", {}).get("bad-checkpoint") and len(cos) == 1 and
          cos[0]["size"] == s1 and cos[0]["witness"] == "siem.example",
          "--witness-key: a note the witness cosigned is trusted, the report names it and the size (%s)" % cos)
    rc, o, _ = run(VERIFY, "--pubkey", pub, "--witness", put("w-good", good), "--witness-key", wpubf, log)
    check(rc == 0 and b"witness: chain %s size %d cosigned by siem.example at " % (origin.split(b"/")[-1], s1) in o,
          "the text report says which witness cosigned what size")
    other = Ed25519PrivateKey.generate()
    oseed = other.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())  # (Debian 12's cryptography 38)
    opub = other.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    cases = [
        ("no cosignature at all", host_only, "carries no cosignature"),
        ("a cosignature by another key of the same name",
         host_only + cosig_line(b"siem.example", oseed, opub, now, text), "carries no cosignature"),
    ]
    blob_line = cosig_line(b"siem.example", c["wseed"], c["wpub"], now, text)
    blob = bytearray(base64.b64decode(blob_line.split(b" ")[-1]))
    blob[4:12] = (now + 3600).to_bytes(8, "big")  # the time moved, the signature kept
    cases.append(("a tampered timestamp", host_only + DASH + b"siem.example " + base64.b64encode(bytes(blob)) + b"\n",
                  "does not verify"))
    for what, note, msg in cases:
        rc, j, _ = vjson("--pubkey", pub, "--witness", put("w-bad", note), "--witness-key", wpubf, log)
        msgs = [f.get("message", "") for f in j.get("findings", [])]
        check(rc == 1 and j.get("counts", {}).get("bad-checkpoint") == 1 and any(msg in m for m in msgs)
              and not j.get("cosigned"), "--witness-key: %s: bad-checkpoint, %r (rc %d)" % (what, msg, rc))
    # the same through the public API (auditlog_verifier_add_witness_key)
    for what, note, d, want in (("cosigned", good, log, b"bad-checkpoint 0 rewritten 0 truncated 0"),
                                ("not cosigned", host_only, log, b"bad-checkpoint 1 rewritten 0 truncated 0")):
        rc, o, err = run(WITNESS_API, d, pub, put("w-api", note), wpubf)
        check(rc == 0 and o.strip() == want, "add_witness_key (API), a note %s: %r (%s)" % (what, o.strip(), err))
    # --check-proof --witness-key: a bundle for a record of the cosigned
    # note's tree (--prove --witness carries the cosigned copy), offline
    tampered = [n for w, n, _ in cases if w == "a tampered timestamp"][0]
    s0 = sizes[0]  # (a record of the tree of size s1, not of the one before)
    for what, wf, wk, want_rc, want in (
            ("cosigned", good, True, 0, b"cosigned: note by siem.example at %d " % now),
            ("cosigned, without --witness-key", good, False, 0, b"valid: record %d " % s0),
            ("cosigned by nobody", host_only, True, 1, b"no cosignature of the --witness-key given"),
            ("a tampered timestamp", tampered, True, 1, b"a cosignature of witness siem.example does not verify")):
        bundle = os.path.join(tmp, "bundle-w-" + what.replace(" ", "-").replace(",", ""))
        rc, _, err = run(VERIFY, "--prove", str(s0), "--witness", put("w-bundle", wf), "--out", bundle, log)
        check(rc == 0, "--prove %d --witness (%s)" % (s0, err))
        rc, o, err = run(VERIFY, "--check-proof", bundle, "--pubkey", pub, *(["--witness-key", wpubf] if wk else []))
        check(rc == want_rc and want in (o if want_rc == 0 else err.encode()),
              "--check-proof %s: exit %d, %r (%r %r)" % (what, want_rc, want, o, err))
    # a rewritten copy: caught only through a note the witness cosigned
    wfile = put("w-good", good)
    rc, j, _ = vjson("--pubkey", pub, "--witness", wfile, "--witness-key", wpubf, E.write_dir(os.path.join(tmp, "rw2"), c["att"]))
    check(rc == 1 and j.get("counts", {}).get("rewritten", 0) >= 1,
          "--witness --witness-key: the rewritten copy is `rewritten` (rc %d)" % rc)

    # ---- --hosts: registered hosts only
    hosts, nohosts = os.path.join(tmp, "hosts"), os.path.join(tmp, "nohosts")
    os.makedirs(hosts)
    os.makedirs(nohosts)
    shutil.copy(pub, os.path.join(hosts, "host-a.pub"))
    shutil.copy(wpubf, os.path.join(nohosts, "siem.pub"))  # a key, of another host
    st = os.path.join(tmp, "st-hosts")
    os.makedirs(st)
    rc, _, err = run(WITNESS, "--state", st, "--key", wkey, "--hosts", nohosts, "add", put("h0", notes[sizes[0]]))
    check(rc == 1 and "not registered" in err, "add --hosts: an unregistered host is refused (%s)" % err)
    check(os.listdir(st) == [], "the refusal left no state")
    rc, _, err = run(WITNESS, "--state", st, "--key", wkey, "--hosts", hosts, "add", put("h0", notes[sizes[0]]))
    check(rc == 0, "add --hosts: a registered host's new chain is taken on first use (%s)" % err)

    # ---- follow: the central copy as it grows
    stream = b"".join(r.line for r in c["recs"])
    ck = [(r.seq, json.loads(r.line)["size"]) for r in c["recs"] if r.type == "checkpoint"]
    copy, fst = os.path.join(tmp, "central.log"), os.path.join(tmp, "st-follow")
    os.makedirs(fst)

    def follow(*files, hostsdir=hosts, state=fst):
        return run(WITNESS, "--state", state, "--key", wkey, "--hosts", hostsdir, "--once", "follow", *files)

    def cosigned_sizes(out):
        return [int(x) for x in re.findall(rb"^cosigned \S+ size (\d+)$", out, re.M)]

    rc, _, err = follow(put("central-x", stream), hostsdir=nohosts, state=os.path.join(tmp, "st-hosts"))
    check(rc == 1 and "not registered" in err, "follow: an unregistered host's checkpoints are refused (%s)" % err[:200])
    # the copy stops mid-stream (half its checkpoints arrived), the follower stops
    cut = sum(len(r.line) for r in c["recs"][:ck[len(ck) // 2][0] + 3])
    with open(copy, "wb") as f:
        f.write(stream[:cut])
    rc, out, err = follow(copy)
    first = cosigned_sizes(out)
    check(rc == 0 and first == [sz for q, sz in ck if q < ck[len(ck) // 2][0] + 3],
          "follow: every checkpoint of the first half cosigned, in order: %s (%s)" % (first, err))
    # restarted on the grown copy: only the new ones, from the state re-read
    with open(copy, "ab") as f:
        f.write(stream[cut:])
    rc, out, err = follow(copy)
    second = cosigned_sizes(out)
    check(rc == 0 and second == [sz for q, sz in ck if q >= ck[len(ck) // 2][0] + 3] and not set(first) & set(second),
          "follow restarted: the rest cosigned, nothing twice: %s (%s)" % (second, err))
    rc, out, err = follow(copy)
    check(rc == 0 and cosigned_sizes(out) == [], "follow again on the same copy: nothing cosigned again")
    rc, wf, _ = run(WITNESS, "--state", fst, "export")
    check(rc == 0 and wf.split(b"\n")[1] == b"%d" % ck[-1][1], "export (every origin): the last size %d" % ck[-1][1])
    rc, o, err = run(VERIFY, "--pubkey", pub, "--witness", put("w-follow", wf), "--witness-key", wpubf, log)
    check(rc == 0 and b"size %d cosigned by siem.example" % ck[-1][1] in o,
          "the host's files verify with what follow exported (rc %d %s)" % (rc, err))
    # a copy that moves backwards: its checkpoints end below the held one
    rc, out, err = follow(put("central-short", stream[:cut]))
    check(rc == 1 and "below the held" in err and cosigned_sizes(out) == [],
          "follow: a copy that ends below the held size is refused (%s)" % err[-200:])
    # the rewritten copy (re-signed with the host's key): never cosigned
    rw = b"".join(ln for _, ln in c["att"])
    rc, out, err = follow(put("central-rw", rw))
    check(rc == 1 and "inconsistent" in err and cosigned_sizes(out) == [],
          "follow: a rewritten copy's checkpoints are refused (%s)" % err[-300:])
    # lines between the held checkpoint and the next one rewritten in a copy
    # that first proves the held one: the next is not cosigned
    st2 = os.path.join(tmp, "st-between")
    os.makedirs(st2)
    rc, _, _ = follow(put("central-a", stream[:cut]), state=st2)
    held_q = max(q for q, _ in ck if q < ck[len(ck) // 2][0] + 3)
    mid = next(r for r in c["recs"] if r.seq > held_q and r.type == "event")
    bad = stream.replace(mid.line, mid.line.replace(b'"attempt":', b'"attempt":1'), 1)
    rc, out, err = follow(put("central-b", bad), state=st2)
    check(rc == 1 and cosigned_sizes(out) == [] and "not shown consistent" in err,
          "follow: a line changed after the held checkpoint: the next ones are refused (%s)" % err[-300:])

    # a shipper's ways: a replayed range (RELP after a reconnect) holding an
    # older checkpoint, and lines of two files interleaved (imfile after a
    # restart): every checkpoint cosigned once, nothing refused
    lines = [r.line for r in c["recs"]]
    # (in a log without rotation: --dedup takes a replayed header for an
    # inserted one, which a replay across a rotation would hold)
    one = os.path.join(tmp, "one")
    os.makedirs(one)
    subprocess.run([WRITER, os.path.join(one, "audit.log"), os.path.join(c["keys"], "sealing-state"),
                    os.path.join(c["keys"], "signing-key"), "150", "0", "0"], check=True)
    orecs = E.parse(one)
    ock = [(r.seq, json.loads(r.line)["size"]) for r in orecs if r.type == "checkpoint"]
    olines = [r.line for r in orecs]
    q1, q2 = ock[1][0], ock[2][0]
    replayed = olines[:q2 + 1] + olines[q1 - 5:q2 + 1] + olines[q2 + 1:]
    a0 = ck[0][0] + 10
    mixed = lines[:a0] + lines[a0 + 30:a0 + 60] + lines[a0:a0 + 30] + lines[a0 + 60:]
    # auditlog-verify --dedup on a replay across a rotation: the repeated
    # header is a shipper-duplicate like the other repeated lines
    hq = next(r.seq for r in c["recs"] if r.type == "header" and r.seq > 20)
    rep_h = b"".join(lines[:hq + 10] + lines[hq - 10:hq + 10] + lines[hq + 10:])
    p = subprocess.run([VERIFY, "--json", "--dedup", "-"], input=rep_h, capture_output=True)
    counts = json.loads(p.stdout).get("counts", {}) if p.stdout else {}
    check(p.returncode == 0 and counts.get("shipper-duplicate") == 20 and not counts.get("inserted"),
          "--dedup: a replayed range holding a header (seq %d): 20 shipper-duplicate, exit 0 (%s)" % (hq, counts))
    for what, data, want in (("a replayed range with an older checkpoint", replayed, ock),
                             ("interleaved lines", mixed, ck)):
        stx = os.path.join(tmp, "st-" + what.replace(" ", "-"))
        os.makedirs(stx)
        rc, out, err = follow(put("central-x", b"".join(data)), state=stx)
        check(rc == 0 and cosigned_sizes(out) == [sz for _, sz in want],
              "follow: %s: every checkpoint cosigned once, none refused (%s)" % (what, err[-300:]))

    # ---- follow as a service: killed mid-stream (SIGTERM), restarted
    st3, live = os.path.join(tmp, "st-live"), os.path.join(tmp, "live.log")
    os.makedirs(st3)
    open(live, "wb").close()
    outs = []
    for part, upto in ((stream[:cut], first[-1]), (stream[cut:], ck[-1][1])):
        p = subprocess.Popen([WITNESS, "--state", st3, "--key", wkey, "--hosts", hosts, "follow", live],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with open(live, "ab") as f:
            for i in range(0, len(part), 4096):  # as a shipper writes it
                f.write(part[i:i + 4096])
                f.flush()
        for _ in range(300):  # until it holds the part's last checkpoint (30 s at most)
            rc, o, _ = run(WITNESS, "--state", st3, "export")
            if rc == 0 and o.split(b"\n")[1] == b"%d" % upto:
                break
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        o, e = p.communicate(timeout=30)
        outs.append(cosigned_sizes(o))
        check(p.returncode == 0, "follow (live) stops on SIGTERM with exit 0 (%s)" % e.decode()[-200:])
    check(outs[0] + outs[1] == [sz for _, sz in ck] and outs[0] == first,
          "follow (live), killed and restarted mid-stream: every checkpoint cosigned once: %s" % outs)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The v2 tamper corpus (issue 12 "Tests"; docs/format.md 22, 23).

Each case makes logs with tests/vectors/v2log.py (an independent writer, from
the spec) in a private mkdtemp directory, runs auditlog-verify on them with
the keys named, and requires exactly the classes given (the findings with a
count; notices included) and the exit code. An honest log is intact under
every key set. Usage: v2_tamper.py AUDITLOG_VERIFY [CASE...]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors"))
import v2log  # noqa: E402
from v2log import DELTA, Holder, Keys, Log, T0, replay  # noqa: E402

VERIFY = None
TMP = None
FAILED = []

KA = Keys(b"host a")
KB = Keys(b"host b", host=b"host-2.example")
EVIL = Keys(b"evil", host=KA.host)  # another signing key of the same host


def files(d, **texts):
    for name, data in texts.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def run(case, logs, opts, stdin=None):
    """logs: {name: Log}; opts: option list with {vkey}, {pubkey}... names of
    files in the case's directory. Returns (exit code, {class: count}, json)."""
    d = os.path.join(TMP, case)
    os.makedirs(d, exist_ok=True)
    files(d, vkey=KA.vkey_text(), pubkey=KA.pubkey_text(), vkey_b=KB.vkey_text(),
          pubkey_b=KB.pubkey_text())
    paths = []
    for name, log in logs.items():
        log.write(os.path.join(d, name))
        paths.append(os.path.join(d, name))
    args = [VERIFY, "--json"] + [o.format(d=d) for o in opts]
    if os.environ.get("AUDITLOG_VERIFY_BLOCK") and "-j" not in opts:
        args += ["-j", "3"]  # workers on every host (v2_tamper_blocks)
    if stdin is not None:
        with open(os.path.join(d, stdin), "rb") as f:
            p = subprocess.run(args + ["-"], stdin=f, capture_output=True)
    else:
        p = subprocess.run(args + paths, capture_output=True)
    if p.returncode == 2:
        raise RuntimeError("%s: %s" % (case, p.stderr.decode()))
    j = json.loads(p.stdout)
    got = {k: v for k, v in j["counts"].items() if v}
    return p.returncode, got, j


def expect(case, logs, opts, classes, rc=None, first_seq=None, stdin=None):
    """classes: {class: count or None (any count)}"""
    code, got, j = run(case, logs, opts, stdin)
    ok = set(got) == set(classes) and all(n is None or got[c] == n for c, n in classes.items())
    integrity = any(f["integrity"] for f in j["findings"])
    want_rc = (1 if integrity else 0) if rc is None else rc
    ok = ok and code == want_rc and (rc is None or code == rc)
    if ok and first_seq is not None:
        cls, seq = first_seq
        fs = [f["seq"] for f in j["findings"] if f["class"] == cls]
        ok = bool(fs) and fs[0] == seq
    print("%s %s %s: %s exit %d" % ("ok  " if ok else "FAIL", case, " ".join(
        os.path.basename(o) for o in opts) or "(no keys)", got or "intact", code))
    if not ok:
        FAILED.append(case)
        print("  want %s exit %s%s" % (classes, want_rc, " first %s at seq %s" % first_seq if first_seq
                                          else ""))
        for f in j["findings"][:8]:
            print("  %s line %s seq %s: %s" % (f["class"], f["line"], f["seq"], f["message"]))
    return j


VK = ["--verify-key", "{d}/vkey"]
PK = ["--pubkey", "{d}/pubkey"]
ALL = VK + PK
TAIL = {"unsigned-tail": 1}  # a closed log: the close seal after its checkpoint


def witness_file(name, notes):
    path = os.path.join(TMP, "witness-" + name)
    with open(path, "wb") as f:
        f.write(b"".join(notes))
    return ["--witness", path]


def op_index(log, pred):
    return [i for i, op in enumerate(log.ops) if pred(op)]


def events(log):
    return op_index(log, lambda op: op[1] == "event")


def epoch_of_op(log, i):
    return KA.epoch(log.ops[i][2])


def edit_action(target):
    def edit(i, op):
        if i != target:
            return op
        fields = [(k, b"rewritten" if k == "action" else v) for k, v in op[3]]
        return op[:3] + (fields,) + op[4:]
    return edit


def case_honest(h):
    w = witness_file("honest", h.notes)
    expect("honest", {"audit.log": h}, [], {})
    expect("honest", {"audit.log": h}, VK, {})
    expect("honest", {"audit.log": h}, PK, TAIL)
    expect("honest", {"audit.log": h}, ALL + w, TAIL)
    expect("honest", {"audit.log": h}, ALL + w + ["-j", "4"], TAIL)
    expect("honest", {"audit.log": h}, ALL + w, TAIL, stdin="audit.log")
    j = expect("honest", {"audit.log": h}, ALL + w, TAIL)
    if not (j["seals_checked"] and j["checkpoints_checked"] and j["seal_macs_verified"] == j["seals"] and
            j["checkpoint_signatures_verified"] == j["checkpoints"] and j["seals"] > 0):
        FAILED.append("honest: summary")
        print("FAIL honest: summary %s" % {k: j[k] for k in j if k.startswith(("seal", "checkp"))})
    j = expect("honest", {"audit.log": h}, [], {})
    if j["seals_checked"] or j["checkpoints_checked"] or j["seal_macs_verified"]:
        FAILED.append("honest: unchecked summary")
    # --from a record inside the chain: the seals and the tree are taken up
    # again from the next seal and tree record, unchecked up to there
    r = h.recs[30]
    expect("honest-from", {"audit.log": h}, ALL + w + ["--from", "%d:%s" % (r["seq"], r["hash"].hex())], TAIL)
    # two hosts, each with its keys: both intact
    b = v2log.honest(KB, b"b", start_epoch=40)
    expect("two-hosts", {"a.log": h, "b.log": b},
           ALL + ["--verify-key", "{d}/vkey_b", "--pubkey", "{d}/pubkey_b"], {"unsigned-tail": 2})


def case_edit_recompute(h):
    """edit a record, recompute the whole plain chain, trees and ranges
    included; the attacker has no key: seals and notes stay the old ones"""
    target = events(h)[5]
    att = replay(h, Holder(KA, seal_from=None, sign=False, orig=h), edit_action(target))
    seals = [r["seq"] for r in att.recs if r["type"] == "seal" and r["seq"] > target]
    ckpts = [r["seq"] for r in att.recs if r["type"] == "checkpoint" and r["seq"] > target]
    expect("edit-recompute", {"audit.log": att}, [], {})
    expect("edit-recompute", {"audit.log": att}, VK, {"bad-seal": len(seals)}, first_seq=("bad-seal", seals[0]))
    expect("edit-recompute", {"audit.log": att}, PK, dict(TAIL, **{"bad-checkpoint": len(ckpts)}),
           first_seq=("bad-checkpoint", ckpts[0]))
    # the same, the tree records left as they were: no key needed to see it
    att2 = replay(h, Holder(KA, seal_from=None, sign=False, orig=h), edit_action(target), stale_trees=True)
    trees = [r["seq"] for r in att2.recs if r["type"] == "tree" and r["seq"] > target]
    expect("edit-stale-trees", {"audit.log": att2}, [], {"bad-checkpoint": None},
           first_seq=("bad-checkpoint", trees[0]))
    # --emit: nothing the failed seals cover reaches the pipeline
    d = os.path.join(TMP, "edit-recompute")
    p = subprocess.run([VERIFY, "--emit", "--verify-key", d + "/vkey", d + "/audit.log"], capture_output=True)
    out = p.stdout.splitlines()
    ok = p.returncode == 1 and b"rewritten" not in p.stdout and len(out) < seals[0] and \
        all(line + b"\n" in h.lines for line in out)
    print("%s edit-recompute --emit: %d line(s) passed on, none after seq %d" % (
        "ok  " if ok else "FAIL", len(out), len(out) - 1))
    if not ok:
        FAILED.append("edit-recompute --emit")


def case_honest_window(h):
    """root at epoch e holds the sealing state of e: rewrites records of e
    (passes: the honest window) and of an earlier epoch (fails)"""
    ev = events(h)
    late = ev[-4]
    e = epoch_of_op(h, late)
    early = [i for i in ev if epoch_of_op(h, i) < e - 1][3]
    w = witness_file("window", h.notes)
    att = replay(h, Holder(KA, seal_from=e, sign=True, orig=h), edit_action(late))
    expect("window-epoch-e", {"audit.log": att}, ALL, TAIL)
    att = replay(h, Holder(KA, seal_from=e, sign=True, orig=h), edit_action(early))
    expect("window-earlier", {"audit.log": att}, VK, {"bad-seal": None})
    expect("window-earlier", {"audit.log": att}, PK, TAIL)  # re-signed: undetected
    expect("window-earlier", {"audit.log": att}, PK + w, dict(TAIL, rewritten=None))


def case_cut_gap(h):
    """cut the tail at a batch seal, then the writer goes on later: a gap"""
    seals = op_index(h, lambda op: op[1] == "seal" and op[3][0][1] == b"batch")
    cut = seals[len(seals) // 3]
    att = replay(h, Holder(KA), upto=cut + 1)
    ns = att.last_ns + 6 * DELTA
    att.open(ns)
    att.batch([ns + 10, ns + 20])
    att.close(ns + 30)
    opened = [r["seq"] for r in att.recs if r["type"] == "seal" and r["members"]["kind"] == b"open"][-1]
    expect("cut-gap", {"audit.log": att}, [], {"gap": 1}, rc=0, first_seq=("gap", opened))
    expect("cut-gap", {"audit.log": att}, ["--strict"], {"gap": 1}, rc=1)
    expect("cut-gap", {"audit.log": att}, VK, {"gap": 1}, rc=0)
    expect("cut-gap", {"audit.log": att}, PK, dict(TAIL, gap=1), rc=0)
    # the same, the open naming an earlier seal than the last one there
    att = replay(h, Holder(KA), upto=cut + 1)
    att.seal("open", att.last_ns + DELTA, prev=(h.recs[seals[0]]["seq"], "batch"))
    att.batch([att.last_ns + 10])
    expect("open-names-earlier", {"audit.log": att}, [], {"bad-seal": 1})
    expect("open-names-earlier", {"audit.log": att}, VK, {"bad-seal": 1})


def case_replay_epoch(h):
    """an old epoch's seal again later (the attacker recomputes the chain)"""
    seals = op_index(h, lambda op: op[1] == "seal" and op[3][0][1] == b"batch")
    old, later = seals[1], seals[-3]

    def edit(i, op):
        return h.ops[old][:2] + (op[2],) + h.ops[old][3:] if i == later else op
    att = replay(h, Holder(KA, seal_from=None, sign=False, orig=h), edit)
    expect("replay-epoch", {"audit.log": att}, [], {"bad-seal": 1}, first_seq=("bad-seal", later))
    expect("replay-epoch", {"audit.log": att}, VK, {"bad-seal": None}, first_seq=("bad-seal", later))


def case_downgrade(h):
    """v2 records as v1 after t0: in the middle, and a whole chain"""
    target = events(h)[4]

    def edit(i, op):
        if i != target:
            return op
        return op[:3] + ([f for f in op[3] if f[0] in ("action", "outcome", "actor")], [], None, 1)
    att = replay(h, Holder(KA, seal_from=None, sign=False, orig=h), edit)
    expect("downgrade-one", {"audit.log": att}, [], {"version": 1}, first_seq=("version", target))
    v1 = Log(KA, b"v1 chain")
    ns = T0 + 3 * DELTA
    v1.add("header", ns, [("file_id", v1.file_id), ("chain_id", v1.chain_id), ("reason", b"new")],
           version=1)
    for i in range(5):
        v1.add("event", ns + i, [("action", b"login"), ("outcome", b"success")], version=1)
    expect("downgrade-chain", {"audit.log": v1}, [], {})
    expect("downgrade-chain", {"audit.log": v1}, VK, {"version": 6}, first_seq=("version", 0))


def case_splice(h):
    """another host's records spliced into the chain, hashes recomputed"""
    b = v2log.honest(KB, b"b", start_epoch=60)
    start = op_index(b, lambda op: op[1] == "event")[0]
    end = op_index(b, lambda op: op[1] == "seal" and op[3][0][1] == b"batch")[0]
    att = replay(h, Holder(KA, seal_from=None, sign=False, orig=h))
    for op in b.ops[start:end + 1]:
        _, rtype, ns, fields, caller, epoch, version = op
        att.add(rtype, ns, fields, caller, epoch, version)
    sseq = att.seq - 1
    expect("splice", {"audit.log": att}, [], {"bad-seal": 1}, first_seq=("bad-seal", sseq))
    expect("splice", {"audit.log": att}, VK, {"bad-seal": 1})
    # relabelled to this chain: its key is not one given, or its MAC fails
    att = replay(h, Holder(KA, seal_from=None, sign=False, orig=h))
    for op in b.ops[start:end + 1]:
        _, rtype, ns, fields, caller, epoch, version = op
        if rtype == "seal":
            fields = [(k, att.chain_id if k == "chain_id" else v) for k, v in fields]
        att.add(rtype, ns, fields, caller, epoch, version)
    # without keys too: a key change outside a re-key mark (docs/format.md 17.4, 19.4)
    expect("splice-relabelled", {"audit.log": att}, [], {"bad-seal": 1}, first_seq=("bad-seal", sseq))
    expect("splice-relabelled", {"audit.log": att}, VK, {"unknown-key": 1}, first_seq=("unknown-key", sseq))
    expect("splice-relabelled", {"audit.log": att}, VK + ["--verify-key", "{d}/vkey_b"], {"bad-seal": 1})


def case_other_signer(h):
    """checkpoints signed by another key of the same host"""
    att = replay(h, Holder(KA, seal_from=0, sign=True, orig=h, sign_keys=EVIL))
    n = sum(1 for r in att.recs if r["type"] == "checkpoint")
    expect("other-signer", {"audit.log": att}, VK, {})
    expect("other-signer", {"audit.log": att}, PK, dict(TAIL, **{"bad-checkpoint": n}))
    # the honest notes, signed by that key: refused with the public key
    forged = []
    for note in h.notes:
        text = note[:note.index(b"\n\n") + 1]
        forged.append(Log(KA, holder=Holder(KA, sign_keys=EVIL)).note_for(text))
    w = witness_file("other-signer", forged)
    expect("other-signer-witness", {"audit.log": h}, w, {})
    expect("other-signer-witness", {"audit.log": h}, PK + w, dict(TAIL, **{"bad-checkpoint": n}))


def case_witness(h):
    w = witness_file("witness-truncated", h.notes)
    ck = op_index(h, lambda op: op[1] == "checkpoint")
    # cut at a batch seal before the last two checkpoints
    cut = [i for i in op_index(h, lambda op: op[1] == "seal") if i < ck[-2]][-1]
    att = replay(h, Holder(KA), upto=cut + 1)
    expect("witness-truncated", {"audit.log": att}, ALL, {"unsigned-tail": None})
    expect("witness-truncated", {"audit.log": att}, ALL + w, {"unsigned-tail": None, "truncated": 2})
    # rewritten by someone holding every key (the state of epoch 0, the signing key)
    w = witness_file("witness-rewritten", h.notes)
    att = replay(h, Holder(KA, seal_from=0, sign=True, orig=h), edit_action(events(h)[2]))
    expect("witness-rewritten", {"audit.log": att}, ALL, TAIL)
    expect("witness-rewritten", {"audit.log": att}, ALL + w, dict(TAIL, rewritten=len(h.notes)))
    # a witnessed chain deleted
    w = witness_file("witness-missing", h.notes)
    b = v2log.honest(KB, b"b", start_epoch=40)
    expect("witness-missing", {"b.log": b}, w, {"missing-chain": len(h.notes)})


def case_backdated(h):
    """root at a later epoch fabricates a record dated back: it can seal
    only with the epoch it holds"""
    e = KA.epoch(h.last_ns) + 10
    att = replay(h, Holder(KA))
    att.h = Holder(KA, seal_from=e)
    att.event(h.last_ns + 1)
    att.seal("batch", h.last_ns + 2, epoch=e)
    expect("backdated-after-close", {"audit.log": att}, VK, {"clock": 1}, rc=0,
           first_seq=("clock", att.seq - 2))
    # into an open life (the log cut at a batch seal): a gap as well
    seals = op_index(h, lambda op: op[1] == "seal" and op[3][0][1] == b"batch")
    att = replay(h, Holder(KA), upto=seals[-1] + 1)
    e = KA.epoch(att.last_ns) + 10
    att.h = Holder(KA, seal_from=e)
    ns = att.last_ns + 1
    att.event(ns)
    att.seal("batch", ns + 1, epoch=e)
    expect("backdated-open", {"audit.log": att}, VK, {"clock": 1, "gap": 1}, rc=0)


def case_unsealed(h):
    """lines appended after the last seal"""
    att = replay(h, Holder(KA))
    att.event(att.last_ns + 1)
    att.event(att.last_ns + 2)
    expect("unsealed", {"audit.log": att}, [], {"unsealed": 1}, first_seq=("unsealed", att.seq - 2))


def case_rotated(h):
    """a chain of three files: the tree and the seals go on across them"""
    log = Log(KA, b"rotated")
    ns = T0 + 5 * DELTA
    log.open(ns)
    for k in range(3):
        for b in range(4):
            log.batch([ns + i * 1000 for i in range(5)])
            ns += DELTA // 3
        if k < 2:
            log.rotate(ns)
    log.close(ns)
    d = os.path.join(TMP, "rotated-logs")  # a directory of the log's files alone
    os.makedirs(d)
    names = log.write_dir(d)
    w = witness_file("rotated", log.notes)
    j = expect("rotated", {}, ALL + w + [d], TAIL)
    ok = j["files"] == 3 and len(names) == 3 and j["seal_macs_verified"] == j["seals"] and \
        j["chains"][0]["tree_size"] == log.seq
    print("%s rotated: %d files, tree of %d leaves" % ("ok  " if ok else "FAIL", j["files"],
                                                         j["chains"][0]["tree_size"]))
    if not ok:
        FAILED.append("rotated")
    # the middle file gone: missing-file; the walk goes on from the next file
    # (its own piece, its own tail), where the tree is not known: not compared
    os.unlink(os.path.join(d, names[1]))
    expect("rotated", {}, ALL + w + [d], {"missing-file": 1, "unsigned-tail": 2})


def case_recovery(h):
    """v2 crash repair (docs/format.md 19.5): damage right after a seal,
    named by the recovery record, is recovered; after any other record the
    recovery record is inserted"""
    import hashlib
    for after_seal in (True, False):
        kinds = [i for i, op in enumerate(h.ops) if op[1] == "seal" and op[3][0][1] == b"batch"]
        cut = kinds[2] if after_seal else kinds[2] - 1
        att = replay(h, Holder(KA), upto=cut + 1)
        off = len(att.text())
        damage = b'{"@timestamp":"2026-12-01T00:00:' + bytes(40) + b"\n"
        att.lines.append(damage)
        last = att.seq - 1
        att.add("recovery", att.last_ns, [("last_seq", last), ("damage_offset", off),
                                          ("damage_length", len(damage)),
                                          ("damage_sha256", hashlib.sha256(damage).hexdigest().encode())])
        att.batch([att.last_ns + 10])
        att.close(att.last_ns + 20)
        if after_seal:
            expect("recovery-after-seal", {"audit.log": att}, ALL, dict(TAIL, recovered=1), rc=0)
        else:
            expect("recovery-after-event", {"audit.log": att}, [], {"unparseable": 1, "inserted": 1},
                   first_seq=("inserted", last + 1))


def case_usage(h):
    """key and witness files that are not their format: exit 2, one line"""
    d = os.path.join(TMP, "usage")
    os.makedirs(d)
    h.write(os.path.join(d, "audit.log"))
    bad_kid = KA.vkey_text().replace(b"key-id " + KA.kid.hex().encode(),
                                     b"key-id " + bytes(8).hex().encode())
    files(d, vkey=KA.vkey_text(), pubkey=KA.pubkey_text(), badkid=bad_kid, note=h.notes[0][:-1])
    for opts, why in [(["--verify-key", "pubkey"], b"not a verification key file"),
                      (["--verify-key", "badkid"], b"its key-id is not the one"),
                      (["--verify-key", "vkey", "--verify-key", "vkey"], b"same key id"),
                      (["--pubkey", "vkey"], b"not a checkpoint public key file"),
                      (["--witness", "note"], b"not a witness file"),
                      (["--witness", "missing"], b"No such file")]:
        p = subprocess.run([VERIFY] + [o if o.startswith("--") else os.path.join(d, o) for o in opts] +
                           [os.path.join(d, "audit.log")], capture_output=True)
        ok = p.returncode == 2 and why in p.stderr and p.stderr.count(b"\n") == 1 and not p.stdout
        print("%s usage %s: exit %d, %s" % ("ok  " if ok else "FAIL", " ".join(opts), p.returncode,
                                            p.stderr.decode().strip()))
        if not ok:
            FAILED.append("usage " + " ".join(opts))


CASES = {
    "honest": case_honest, "edit": case_edit_recompute, "window": case_honest_window,
    "gap": case_cut_gap, "replay": case_replay_epoch, "downgrade": case_downgrade,
    "splice": case_splice, "signer": case_other_signer, "witness": case_witness,
    "backdated": case_backdated, "unsealed": case_unsealed, "recovery": case_recovery,
    "rotated": case_rotated, "usage": case_usage,
}


def main():
    global VERIFY, TMP
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    VERIFY = sys.argv[1]
    TMP = tempfile.mkdtemp(prefix="v2_tamper.")
    try:
        h = v2log.honest(KA, b"a")
        for name in sys.argv[2:] or CASES:
            CASES[name](h)
    finally:
        shutil.rmtree(TMP)
    if FAILED:
        print("%d failed: %s" % (len(FAILED), ", ".join(FAILED)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

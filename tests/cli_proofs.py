#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Evidence bundles end to end (docs/format.md 18.4): a real writer's log
with auditlog-keygen keys, bundles written by auditlog-verify --prove and
--prove-consistency, each checked by the C (--check-proof) and by the
independent python checker (vectors/check_proof.py); then each bundle with
one part tampered (line, prev, path, root, signature, index, tree size,
origin, consistency proof and notes): both must refuse every one.

    cli_proofs.py KEYGEN VERIFY WRITER"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors"))
import check_proof  # noqa: E402
import gen_v2_vectors as V  # noqa: E402

KEYGEN, VERIFY, WRITER = sys.argv[1:4]
FAILED = []


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        FAILED.append(what)


def run(*args):
    p = subprocess.run([VERIFY] + list(args), capture_output=True)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def both(tmp, name, bundle, pub, want_valid):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(bundle)
    rc, out, err = run("--check-proof", path, "--pubkey", pub)
    why = check_proof.check(bundle, pub)
    if want_valid:
        check(rc == 0 and out.startswith("valid:"), "C accepts %s (rc %d %s)" % (name, rc, err.strip()))
        check(why is None, "python accepts %s (%s)" % (name, why))
    else:
        check(rc == 1 and "invalid:" in err, "C refuses %s: %s" % (name, err.strip() or rc))
        check(why is not None, "python refuses %s: %s" % (name, why))
    os.unlink(path)


def field_edit(bundle, name, fn, nth=0):
    """bundle with the nth line `name value` replaced by `name fn(value)`"""
    lines = bundle.split(b"\n")
    idx = [i for i, ln in enumerate(lines) if ln.startswith(name + b" ")][nth]
    lines[idx] = name + b" " + fn(lines[idx][len(name) + 1:])
    return b"\n".join(lines)


def flip_hex(v, i=0):
    return v[:i] + (b"0" if v[i:i + 1] != b"0" else b"1") + v[i + 1:]


def note_edit(fn):
    """edit the note's bytes (hex in the bundle)"""
    return lambda v: fn(bytes.fromhex(v.decode())).hex().encode()


def root_flip(n):
    ls = n.split(b"\n")
    r = ls[2]
    ls[2] = (b"B" if r[:1] != b"B" else b"C") + r[1:]
    return b"\n".join(ls)


def sig_flip(n):
    i = n.rindex(b" ") + 10  # inside the signature's base64
    return n[:i] + (b"A" if n[i:i + 1] != b"A" else b"B") + n[i + 1:]


def main():
    tmp = tempfile.mkdtemp(prefix="cli_proofs.")
    try:
        return cases(tmp)
    finally:
        shutil.rmtree(tmp)


def cases(tmp):
    keys, other, log = (os.path.join(tmp, d) for d in ("keys", "other", "log"))
    for d, host in ((keys, "host-a"), (other, "host-a")):
        os.makedirs(d)
        subprocess.run([KEYGEN, "--host", host, "--delta", "1", "--dir", d], check=True,
                       stdout=subprocess.DEVNULL)
    os.makedirs(log)
    subprocess.run([WRITER, os.path.join(log, "audit.log"), os.path.join(keys, "sealing-state"),
                    os.path.join(keys, "signing-key"), "200", "8192", "0"], check=True)
    pub, wrong = os.path.join(keys, "pubkey"), os.path.join(other, "pubkey")
    rc, _, err = run("--pubkey", pub, log)
    check(rc == 0, "the writer's log verifies (%s)" % err.strip())
    sizes = []
    for n in os.listdir(log):
        with open(os.path.join(log, n), "rb") as f:
            sizes += [int(m) for m in re.findall(rb'"type":"checkpoint","size":([0-9]+)', f.read())]
    sizes.sort()
    check(len(sizes) >= 3, "the log holds checkpoints: %s" % sizes)

    # --prove: the first record, one inside, the last leaf of the first tree,
    # the first checkpoint record itself (a leaf of the next tree)
    for seq in (0, sizes[0] // 2, sizes[0] - 1, sizes[0], sizes[1] + 1):
        out = os.path.join(tmp, "p%d" % seq)
        rc, _, err = run("--prove", str(seq), "--out", out, log)
        check(rc == 0, "--prove %d (%s)" % (seq, err.strip()))
        with open(out, "rb") as f:
            b = f.read()
        want = sizes[0] if seq < sizes[0] else sizes[1] if seq < sizes[1] else sizes[2]
        check(b"\ntree-size %d\n" % want in b, "record %d is proved by the first checkpoint covering it" % seq)
        both(tmp, "inclusion-%d" % seq, b, pub, True)
    # the same bundles written from the spec by python (18.4, RFC 9162 PATH and
    # PROOF of gen_v2_vectors.py): byte for byte what --prove wrote
    recs = {}
    for n in os.listdir(log):
        with open(os.path.join(log, n), "rb") as f:
            for ln in f.read().splitlines():
                j = json.loads(ln)
                recs[j["seq"]] = (ln, j)
    cps = sorted((j["seq"], j) for _, j in recs.values() if j["type"] == "checkpoint")

    def py_bundle(seq):
        c = next(j for _, j in cps if j["first_seq"] <= seq < j["first_seq"] + j["size"])
        f, n = c["first_seq"], c["size"]
        leaves = [bytes.fromhex(recs[f + i][1]["hash"]) for i in range(n)]
        prev = recs[seq - 1][1]["hash"] if seq else "0" * 64
        out = b"auditlog-inclusion-proof 1\norigin %s\nindex %d\ntree-size %d\nprev %s\nline %s\n" % (
            c["note"].split("\n")[0].encode(), seq - f, n, prev.encode(), recs[seq][0])
        out += b"".join(b"path %s\n" % h.hex().encode() for h in V.path(seq - f, leaves))
        return out + b"note %s\n" % c["note"].encode().hex().encode()

    for seq in (0, sizes[0] // 2, sizes[0] - 1, sizes[0], sizes[1] + 1):
        with open(os.path.join(tmp, "p%d" % seq), "rb") as f:
            check(f.read() == py_bundle(seq), "--prove %d wrote the bundle python writes from the spec" % seq)
    rc, _, err = run("--prove", str(sizes[0]), "--out", os.path.join(tmp, "p%d" % sizes[0]), log)
    check(rc == 2 and "File exists" in err, "--out never overwrites a file (%s)" % err.strip())
    rc, _, err = run("--prove", "100000", log)
    check(rc == 1, "--prove of a seq the log lacks is refused (%s)" % err.strip())

    with open(os.path.join(tmp, "p%d" % (sizes[0] // 2)), "rb") as f:
        b = f.read()
    tampered = {
        "line": field_edit(b, b"line", lambda v: v.replace(b'"outcome":"success"', b'"outcome":"failure"')
                           if b'"outcome":"success"' in v else v.replace(b'"seq":', b'"seq": ', 1)),
        "line-byte": field_edit(b, b"line", lambda v: v[:20] + (b"1" if v[20:21] != b"1" else b"2") + v[21:]),
        "prev": field_edit(b, b"prev", flip_hex),
        "path": field_edit(b, b"path", lambda v: flip_hex(v, 7)),
        "path-dropped": b.replace(re.search(rb"path [0-9a-f]{64}\n", b).group(0), b"", 1),
        "root": field_edit(b, b"note", note_edit(root_flip)),
        "signature": field_edit(b, b"note", note_edit(sig_flip)),
        "index": field_edit(b, b"index", lambda v: str(int(v) + 1).encode()),
        "tree-size": field_edit(b, b"tree-size", lambda v: str(int(v) + 1).encode()),
        "origin": field_edit(b, b"origin", lambda v: v[:-1] + (b"0" if v[-1:] != b"0" else b"1")),
        "trailer": b + b"path " + b"0" * 64 + b"\n",
    }
    for name, t in tampered.items():
        check(t != b, "tampered %s differs" % name)
        both(tmp, "inclusion-" + name, t, pub, False)
    both(tmp, "inclusion-wrong-key", b, wrong, False)

    # a witnessed copy of the note (--witness): written in place of the log's,
    # its cosignature line carried (a C2SP cosignature's form: 8-byte
    # timestamp and signature after the key id; not checked by either checker)
    note = bytes.fromhex(re.search(rb"\nnote ([0-9a-f]+)\n", b + b"\n").group(1).decode())
    cosig = "\u2014 witness.example/w ".encode() + base64.b64encode(bytes(range(76))) + b"\n"
    wfile = os.path.join(tmp, "witnessed")
    with open(wfile, "wb") as f:
        f.write(note + cosig)
    out = os.path.join(tmp, "pw")
    rc, _, err = run("--prove", str(sizes[0] // 2), "--witness", wfile, "--out", out, log)
    check(rc == 0, "--prove --witness (%s)" % err.strip())
    with open(out, "rb") as f:
        bw = f.read()
    check(bw == b.replace(note.hex().encode(), (note + cosig).hex().encode()),
          "the bundle carries the witnessed note, cosignature line included")
    both(tmp, "inclusion-witnessed", bw, pub, True)

    # --prove-consistency
    for m, n in ((sizes[0], sizes[-1]), (sizes[1], sizes[2]), (sizes[1], sizes[1])):
        out = os.path.join(tmp, "c%d-%d" % (m, n))
        rc, _, err = run("--prove-consistency", "%d:%d" % (m, n), "--out", out, log)
        check(rc == 0, "--prove-consistency %d:%d (%s)" % (m, n, err.strip()))
        with open(out, "rb") as f:
            both(tmp, "consistency-%d-%d" % (m, n), f.read(), pub, True)
    with open(os.path.join(tmp, "c%d-%d" % (sizes[0], sizes[-1])), "rb") as f:
        c = f.read()
    c1 = next(j for _, j in cps if j["size"] == sizes[0])
    c2 = next(j for _, j in cps if j["size"] == sizes[-1])
    leaves = [bytes.fromhex(recs[c2["first_seq"] + i][1]["hash"]) for i in range(sizes[-1])]
    want = b"auditlog-consistency-proof 1\norigin %s\nsize1 %d\nsize2 %d\n" % (
        c2["note"].split("\n")[0].encode(), sizes[0], sizes[-1])
    want += b"".join(b"proof %s\n" % h.hex().encode() for h in V.proof(sizes[0], leaves))
    want += b"note1 %s\nnote2 %s\n" % (c1["note"].encode().hex().encode(), c2["note"].encode().hex().encode())
    check(c == want, "--prove-consistency wrote the bundle python writes from the spec")
    tampered = {
        "proof": field_edit(c, b"proof", lambda v: flip_hex(v, 3), 1),
        "root1": field_edit(c, b"note1", note_edit(root_flip)),
        "root2": field_edit(c, b"note2", note_edit(root_flip)),
        "signature2": field_edit(c, b"note2", note_edit(sig_flip)),
        "size1": field_edit(c, b"size1", lambda v: str(int(v) + 1).encode()),
        "swapped": c.replace(b"note1 ", b"noteX ").replace(b"note2 ", b"note1 ").replace(b"noteX ", b"note2 "),
    }
    for name, t in tampered.items():
        both(tmp, "consistency-" + name, t, pub, False)
    rc, _, err = run("--prove-consistency", "%d:%d" % (sizes[0] + 1, sizes[1]), log)
    check(rc == 1, "--prove-consistency of a size no checkpoint has is refused (%s)" % err.strip())

    # crash damage: a complete line after the last seal was never acknowledged
    # (19.5); the writer's recovery record then reuses its seq. --prove leaves
    # the damage out and proves the records after it.
    crash = os.path.join(tmp, "crash")
    shutil.copytree(log, crash)
    active = os.path.join(crash, "audit.log")
    with open(active, "rb") as f:
        last = f.read().splitlines(keepends=True)[-1]
    n = json.loads(last)["seq"]
    with open(active, "ab") as f:
        f.write(last.replace(b'"seq":%d,' % n, b'"seq":%d,' % (n + 1)))
    subprocess.run([WRITER, active, os.path.join(keys, "sealing-state"), os.path.join(keys, "signing-key"),
                    "10", "0", "10"], check=True)
    rc, out, _ = run("--json", "--pubkey", pub, crash)
    check(rc == 0 and json.loads(out)["counts"]["recovered"] == 1, "the crashed log was recovered and verifies")
    for seq in (n + 1, n + 4):
        out = os.path.join(tmp, "crash-%d" % seq)
        rc, _, err = run("--prove", str(seq), "--out", out, crash)
        check(rc == 0, "--prove %d after crash damage of the same seq (%s)" % (seq, err.strip()))
        if rc == 0:
            with open(out, "rb") as f:
                bc = f.read()
            check(b'"type":"recovery"' in bc if seq == n + 1 else True, "the recovery record is proved, not the damage")
            both(tmp, "inclusion-crash-%d" % seq, bc, pub, True)

    # usage
    rc, _, _ = run("--check-proof", os.path.join(tmp, "p0"))
    check(rc == 2, "--check-proof without --pubkey is a usage error")
    rc, _, _ = run("--check-proof", os.path.join(tmp, "p0"), "--pubkey", pub, log)
    check(rc == 2, "--check-proof with a log is a usage error")
    rc, _, _ = run("--prove", "x", log)
    check(rc == 2, "--prove x is a usage error")
    rc, _, _ = run("--prove-consistency", "5:3", log)
    check(rc == 2, "--prove-consistency 5:3 is a usage error")

    if FAILED:
        print("%d check(s) failed" % len(FAILED))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

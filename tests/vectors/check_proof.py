#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An independent checker of evidence bundles (docs/format.md 18.4), written
from the spec text, not from the C: the canonical v2 line (3, 12-14), the
chain step (15), the signed checkpoint note (20.2, C2SP signed-note with
Ed25519), RFC 9162 inclusion and consistency verification (18.2, through
gen_v2_vectors.py's helpers, themselves checked against the RFC 6962 vectors).

    check_proof.py BUNDLE PUBKEY     exit 0 valid, 1 invalid (the reason), 2 usage

As a module: check(bundle_bytes, pubkey_path) returns None when valid, else
the reason. Not checked here: a header line's padded length (2.3)."""

import base64
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_keys  # noqa: E402
import gen_v2_vectors as V  # noqa: E402
from gen_vectors import make_str  # noqa: E402

ORIGIN_RE = re.compile(rb"([a-z0-9][a-z0-9.-]{0,62})/auditlog/[0-9a-f]{32}\Z")
DEC_RE = re.compile(rb"(0|[1-9][0-9]*)\Z")
HEX64_RE = re.compile(rb"[0-9a-f]{64}\Z")
TS_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z\Z")
EM = "\u2014 ".encode()


class Invalid(Exception):
    pass


def need(ok, why):
    if not ok:
        raise Invalid(why)


def dec(b, what):
    need(DEC_RE.match(b) is not None and int(b) <= V.INT_MAX, "%s: not a decimal" % what)
    return int(b)


def pubkey(path):
    k = check_keys.read_lines(path, [("auditlog-checkpoint-key", check_keys.literal("2")),
                                     ("host", check_keys.host), ("ed25519", check_keys.hexv(32))])
    return k["host"], k["ed25519"]


def line_hash(line, prev):
    """a canonical v2 line (rebuilt from its members and compared byte for
    byte) and its hash_n from prev (13, 15). Returns (seq, hash_n)."""
    try:
        pairs = json.loads(line.decode("utf-8"), object_pairs_hook=list)
    except (UnicodeDecodeError, ValueError):
        raise Invalid("line: not JSON")
    need(isinstance(pairs, list) and len(pairs) >= 5, "line: not a record")
    (k0, ts), (k1, seq), (k2, v), (k3, rtype) = pairs[:4]
    need([k0, k1, k2, k3] == ["@timestamp", "seq", "v", "type"], "line: members out of order")
    need(isinstance(ts, str) and TS_RE.match(ts), "line: @timestamp")
    need(type(seq) is int and 0 <= seq <= V.INT_MAX, "line: seq")
    need(type(v) is int and v == 2, "line: not v2")
    need(rtype in V.TYPE_CODES, "line: type")
    hk, hv = pairs[-1]
    need(hk == "hash" and isinstance(hv, str) and HEX64_RE.match(hv.encode()), "line: hash")
    members, caller, keys = [], [], []
    for k, val in pairs[4:-1]:
        if k in V.TAGS:
            need(not caller, "line: a fixed member after a caller field")
            kind, _, cap = V.TAGS[k]
            keys.append(k)
            if kind == "int":
                need(type(val) is int and 0 <= val <= V.INT_MAX, "line: %s" % k)
                members.append((k, "int", val, str(val).encode()))
            else:
                need(isinstance(val, str), "line: %s" % k)
                try:
                    raw = val.encode("utf-8")
                except UnicodeEncodeError:
                    raise Invalid("line: %s is not UTF-8" % k)
                if kind == "hex":
                    need(re.match(rb"[0-9a-f]*\Z", raw) is not None or raw.endswith(b"[truncated]"),
                         "line: key_id")
                    esc = raw
                else:
                    s = make_str(raw, cap)
                    need(s is not None and s[1] == raw, "line: %s not canonical" % k)
                    esc = s[0]
                members.append((k, "str", raw, V.jstr(esc)))
        else:
            need(rtype == "event", "line: a caller field outside an event")
            if type(val) is int:
                caller.append((k.encode(), val))
            else:
                need(isinstance(val, str), "line: caller field %s" % k)
                caller.append((k.encode(), val.encode("utf-8", "surrogatepass")))
    need(keys == [k for k in V.ORDER[rtype] if k in keys], "line: members out of order")
    try:
        cf = V.caller_fields(caller) if caller else []
    except V.Refused:
        raise Invalid("line: caller fields break 14")
    out = b'{"@timestamp":"' + ts.encode() + b'","seq":' + str(seq).encode() + \
        b',"v":2,"type":"' + rtype.encode() + b'"'
    for k, _, _, j in members:
        out += b',"' + k.encode() + b'":' + j
    for k, _, j, _ in cf:
        out += b',"' + k + b'":' + j
    out += b',"hash":"' + hv.encode() + b'"}'
    need(out == line, "line: not the canonical bytes of its record (docs/format.md 3, 12-14)")
    body = V.v2_body(rtype, [(k, kd, x) for k, kd, x, _ in members], cf)
    _, h = V.chain_step(prev, seq, ts.encode(), V.H(body))
    need(h.hex() == hv, "line: its hash is not the chain step of prev and the line (15)")
    return seq, h


def note(raw, origin, host, pub, what):
    """a signed checkpoint note (20.2) of `origin`, signed by pub"""
    need(raw.endswith(b"\n"), "%s: no final newline" % what)
    ls = raw[:-1].split(b"\n")
    need(len(ls) >= 8 and ls[6] == b"", "%s: not a checkpoint note" % what)
    o, size, root, sq, head, fs = ls[:6]
    need(o == origin and ORIGIN_RE.match(o) is not None, "%s: origin" % what)
    need(ORIGIN_RE.match(o).group(1) == host, "%s: its origin is not of the key's host" % what)
    size = dec(size, what)
    need(size >= 1, "%s: size 0" % what)
    need(len(root) == 44, "%s: root" % what)
    try:
        r = base64.b64decode(root, validate=True)
    except ValueError:
        raise Invalid("%s: root is not base64" % what)
    need(len(r) == 32 and base64.b64encode(r) == root, "%s: root" % what)
    need(sq.startswith(b"seq ") and head.startswith(b"head ") and fs.startswith(b"first-seq "),
         "%s: extension lines" % what)
    last, first = dec(sq[4:], what), dec(fs[10:], what)
    need(HEX64_RE.match(head[5:]) is not None, "%s: head" % what)
    need(last == first + size - 1, "%s: seq is not first-seq + size - 1" % what)
    text = b"\n".join(ls[:6]) + b"\n"
    kid = V.H(o + b"\n\x01" + pub)[:4]
    ours = 0
    for sl in ls[7:]:
        need(sl.startswith(EM), "%s: a signature line without the em dash" % what)
        name, _, b = sl[len(EM):].partition(b" ")
        try:
            s = base64.b64decode(b, validate=True)
        except ValueError:
            raise Invalid("%s: a signature is not base64" % what)
        if name == o and len(s) == 68 and s[:4] == kid:
            need(V.ed_verify(pub, s[4:], text), "%s: the key's signature does not verify" % what)
            ours += 1
    need(ours > 0, "%s: no signature line of the key" % what)
    return size, r, first


def fields(b):
    need(b.endswith(b"\n"), "bundle: no final newline")
    out = []
    for ln in b[:-1].split(b"\n"):
        k, sp, v = ln.partition(b" ")
        need(sp == b" ", "bundle: a line that is not `name value`")
        out.append((k.decode("ascii", "replace"), v))
    return out


def take(fs, name):
    need(fs and fs[0][0] == name, "bundle: wants a %s line" % name)
    return fs.pop(0)[1]


def hashes(fs, name):
    out = []
    while fs and fs[0][0] == name:
        v = fs.pop(0)[1]
        need(HEX64_RE.match(v) is not None, "%s: not 64 hex" % name)
        out.append(bytes.fromhex(v.decode()))
    return out


def hexnote(v, what):
    need(re.match(rb"([0-9a-f]{2})+\Z", v) is not None, "%s: not hex" % what)
    return bytes.fromhex(v.decode())


def check(bundle, pubkey_path):
    host, pub = pubkey(pubkey_path)
    try:
        fs = fields(bundle)
        kind = fs[0] if fs else None
        fs = fs[1:]
        origin = take(fs, "origin")
        if kind == ("auditlog-inclusion-proof", b"1"):
            index = dec(take(fs, "index"), "index")
            size = dec(take(fs, "tree-size"), "tree-size")
            prev = take(fs, "prev")
            need(HEX64_RE.match(prev) is not None, "prev: not 64 hex")
            line = take(fs, "line")
            path = hashes(fs, "path")
            n = hexnote(take(fs, "note"), "note")
            need(not fs, "bundle: lines after the note")
            seq, leaf = line_hash(line, bytes.fromhex(prev.decode()))
            nsize, root, first = note(n, origin, host, pub, "note")
            need(size == nsize, "tree-size: not the note's")
            need(seq >= first and index == seq - first, "index: not seq - first-seq")
            need(V.verify_inclusion(index, size, leaf, path, root), "path: does not reach the root")
        elif kind == ("auditlog-consistency-proof", b"1"):
            m = dec(take(fs, "size1"), "size1")
            n = dec(take(fs, "size2"), "size2")
            need(1 <= m <= n, "size1/size2")
            proof = hashes(fs, "proof")
            n1 = hexnote(take(fs, "note1"), "note1")
            n2 = hexnote(take(fs, "note2"), "note2")
            need(not fs, "bundle: lines after note2")
            s1, r1, f1 = note(n1, origin, host, pub, "note1")
            s2, r2, f2 = note(n2, origin, host, pub, "note2")
            need(s1 == m and s2 == n, "size1/size2: not the notes'")
            need(f1 == f2, "note2: another tree (first-seq)")
            need(V.verify_consistency(m, n, r1, r2, proof), "proof: does not lead from root 1 to root 2")
        else:
            raise Invalid("bundle: not an evidence bundle")
    except Invalid as e:
        return str(e)
    return None


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: check_proof.py BUNDLE PUBKEY\n")
        return 2
    with open(sys.argv[1], "rb") as f:
        why = check(f.read(), sys.argv[2])
    print("valid" if why is None else "invalid: " + why)
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main())

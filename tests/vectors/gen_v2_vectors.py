#!/usr/bin/env python3
"""Known-answer vectors for auditlog format v2 (docs/format.md, Part II).

Written from docs/format.md alone (sections 12-24 and 27; section 3's string rules
come from gen_vectors.py, itself written from that page), before the C format
layer existed and without reading any C code of this project, so the C is
checked against the specification rather than against itself.

Needs python3 and python3-cryptography (Ed25519).  A missing module is an
error, never a skip: CI installs it (scripts/install-deps.sh).

It first reproduces the external vectors it relies on and asserts each:
  - RFC 8032 section 7.1, Ed25519 TEST 1, 2, 3;
  - RFC 4231, HMAC-SHA-256 test cases 1-7;
  - the RFC 6962 test tree of eight leaves used by certificate-transparency
    implementations (transparency-dev/merkle testonly and proof tests):
    roots of every size, compact ranges, inclusion and consistency proofs;
  - the signed-note example of golang.org/x/mod/sumdb/note (PeterNeumann),
    key id computation included.
Then it prints ours as JSON.

Usage (from the repository root):
    python3 tests/vectors/gen_v2_vectors.py > tests/vectors/v2_vectors.json
The output is deterministic.
"""

import base64
import hashlib
import hmac
import json
import os
import re
import struct
import sys

try:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey, Ed25519PublicKey)
    from cryptography.hazmat.primitives import serialization
except ImportError as e:  # a missing module fails, never skips
    sys.stderr.write("gen_v2_vectors.py: python3-cryptography is required: %s\n" % e)
    sys.exit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_vectors import make_str, make_key_id  # section 3 (strings), key_id hex  # noqa: E402


def H(b):
    return hashlib.sha256(b).digest()


def HMAC(k, m):
    return hmac.new(k, m, hashlib.sha256).digest()


def le32(v):
    return struct.pack("<I", v)


def le64(v):
    return struct.pack("<Q", v)


def b64(b):
    return base64.b64encode(b).decode("ascii")


def ed_pub(seed):
    sk = Ed25519PrivateKey.from_private_bytes(seed)
    return sk.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)


def ed_sign(seed, msg):
    return Ed25519PrivateKey.from_private_bytes(seed).sign(msg)


def ed_verify(pub, sig, msg):
    try:
        Ed25519PublicKey.from_public_bytes(pub).verify(sig, msg)
        return True
    except Exception:
        return False

# ---------------------------------------------------------------------------
# External vectors
# ---------------------------------------------------------------------------

RFC8032 = [  # section 7.1: SECRET KEY, PUBLIC KEY, MESSAGE, SIGNATURE
    ("TEST 1",
     "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
     "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("TEST 2",
     "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
     "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("TEST 3",
     "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
     "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
]

_TC67_KEY = "aa" * 131
RFC4231 = [  # (name, key hex, data hex, HMAC-SHA-256 hex, truncated to bytes)
    ("test case 1", "0b" * 20, b"Hi There".hex(),
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32),
    ("test case 2", b"Jefe".hex(), b"what do ya want for nothing?".hex(),
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32),
    ("test case 3", "aa" * 20, "dd" * 50,
     "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 32),
    ("test case 4", "0102030405060708090a0b0c0d0e0f10111213141516171819", "cd" * 50,
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b", 32),
    ("test case 5", "0c" * 20, b"Test With Truncation".hex(),
     "a3b6167473100ee06e0c796c2955552b", 16),
    ("test case 6", _TC67_KEY, b"Test Using Larger Than Block-Size Key - Hash Key First".hex(),
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32),
    ("test case 7", _TC67_KEY,
     (b"This is a test using a larger than block-size key and a larger than "
      b"block-size data. The key needs to be hashed before being used by the "
      b"HMAC algorithm.").hex(),
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", 32),
]

# The RFC 6962 test tree (leaf inputs; published roots for sizes 1..8, the
# compact ranges, and 1-based-leaf inclusion / consistency proofs).
CT_LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
             "606162636465666768696a6b6c6d6e6f"]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",  # size 0
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_NODES = [  # [level][index]
    ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
     "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
     "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
     "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
     "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
     "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
     "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
     "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"],
    ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
     "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
     "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
     "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"],
    ["d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
     "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    ["5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"],
]
CT_COMPACT = {1: [(0, 0)], 2: [(1, 0)], 3: [(1, 0), (0, 2)], 4: [(2, 0)],
              5: [(2, 0), (0, 4)], 6: [(2, 0), (1, 2)], 7: [(2, 0), (1, 2), (0, 6)],
              8: [(3, 0)]}
CT_INCLUSION = [  # (leaf, 1-based; size; path)
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (2, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
CT_CONSISTENCY = [  # (size1, size2, proof)
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]

# golang.org/x/mod/sumdb/note, note_test.go (TestSign, TestOpen)
NOTE_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
NOTE_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
NOTE_TEXT = ("If you think cryptography is the answer to your problem,\n"
             "then you don't know what your problem is.\n")
NOTE_SIGNED = (NOTE_TEXT + "\n" + "\u2014 PeterNeumann "
               "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n")

# ---------------------------------------------------------------------------
# Section 18: RFC 6962 Merkle tree over leaf hashes
# ---------------------------------------------------------------------------

def node_hash(l, r):
    return H(b"\x01" + l + r)


def leaf_hash(d):
    return H(b"\x00" + d)


def kpow(n):
    """largest power of two < n (n > 1)"""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(hs):
    """MTH over a list of leaf hashes (RFC 6962 2.1); size 0 = SHA-256('')"""
    n = len(hs)
    if n == 0:
        return H(b"")
    if n == 1:
        return hs[0]
    k = kpow(n)
    return node_hash(mth(hs[:k]), mth(hs[k:]))


def path(m, hs):
    """RFC 6962 2.1.1 PATH(m, D[n])"""
    n = len(hs)
    if n == 1:
        return []
    k = kpow(n)
    if m < k:
        return path(m, hs[:k]) + [mth(hs[k:])]
    return path(m - k, hs[k:]) + [mth(hs[:k])]


def subproof(m, hs, b):
    """RFC 6962 2.1.2 SUBPROOF(m, D[n], b)"""
    n = len(hs)
    if m == n:
        return [] if b else [mth(hs)]
    k = kpow(n)
    if m <= k:
        return subproof(m, hs[:k], b) + [mth(hs[k:])]
    return subproof(m - k, hs[k:], False) + [mth(hs[:k])]


def proof(m, hs):
    if m == 0 or m == len(hs):
        return []
    return subproof(m, hs, True)


def verify_inclusion(index, size, leaf, p, root):
    """RFC 9162 2.1.3.2"""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for x in p:
        if sn == 0:
            return False
        if (fn & 1) or fn == sn:
            r = node_hash(x, r)
            if not (fn & 1):
                while not (fn & 1) and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, x)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(m, n, first, second, p):
    """RFC 9162 2.1.4.2, with the trivial cases m = n and m = 0"""
    if m > n:
        return False
    if m == n:
        return len(p) == 0 and first == second
    if m == 0:
        return len(p) == 0
    if len(p) == 0:
        return False
    p = list(p)
    if m & (m - 1) == 0:
        p = [first] + p
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = p[0]
    for c in p[1:]:
        if sn == 0:
            return False
        if (fn & 1) or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not (fn & 1):
                while not (fn & 1) and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first and sr == second


def compact_range(hs):
    """18.3: heads of the perfect subtrees of [0, n), largest first"""
    out, i, n = [], 0, len(hs)
    for bit in range(63, -1, -1):
        if n & (1 << bit):
            out.append(mth(hs[i:i + (1 << bit)]))
            i += 1 << bit
    return out


def range_append(cr, sizes, h):
    """18.3 append: push, merge equal-size neighbours. sizes tracks subtree sizes."""
    cr, sizes = list(cr), list(sizes)
    cr.append(h)
    sizes.append(1)
    while len(sizes) >= 2 and sizes[-1] == sizes[-2]:
        r, l = cr.pop(), cr.pop()
        s = sizes.pop()
        sizes.pop()
        cr.append(node_hash(l, r))
        sizes.append(2 * s)
    return cr, sizes


def range_root(cr):
    r = cr[-1]
    for c in reversed(cr[:-1]):
        r = node_hash(c, r)
    return r


def check_external():
    for name, sk, pk, msg, sig in RFC8032:
        seed, msg_b = bytes.fromhex(sk), bytes.fromhex(msg)
        assert ed_pub(seed).hex() == pk, name
        assert ed_sign(seed, msg_b).hex() == sig, name
        assert ed_verify(bytes.fromhex(pk), bytes.fromhex(sig), msg_b), name
    for name, k, d, mac, t in RFC4231:
        assert HMAC(bytes.fromhex(k), bytes.fromhex(d))[:t].hex() == mac, name
    leaves = [leaf_hash(bytes.fromhex(x)) for x in CT_LEAVES]
    for i, h in enumerate(leaves):
        assert h.hex() == CT_NODES[0][i]
    for n in range(0, 9):
        assert mth(leaves[:n]).hex() == CT_ROOTS[n], n
    for n, idx in CT_COMPACT.items():
        cr = compact_range(leaves[:n])
        assert [c.hex() for c in cr] == [CT_NODES[l][i] for l, i in idx], n
        assert range_root(cr).hex() == CT_ROOTS[n]
    cr, sz = [], []
    for n in range(1, 9):
        cr, sz = range_append(cr, sz, leaves[n - 1])
        assert cr == compact_range(leaves[:n])
    for leaf1, size, p in CT_INCLUSION:
        got = path(leaf1 - 1, leaves[:size])
        assert [x.hex() for x in got] == p, (leaf1, size)
        assert verify_inclusion(leaf1 - 1, size, leaves[leaf1 - 1], got,
                                bytes.fromhex(CT_ROOTS[size]))
    for m, n, p in CT_CONSISTENCY:
        got = proof(m, leaves[:n])
        assert [x.hex() for x in got] == p, (m, n)
        assert verify_consistency(m, n, bytes.fromhex(CT_ROOTS[m]),
                                  bytes.fromhex(CT_ROOTS[n]), got)
    # every (m, n) and every (index, size) of the 8-leaf tree round-trips
    for n in range(1, 9):
        for m in range(0, n + 1):
            assert verify_consistency(m, n, mth(leaves[:m]), mth(leaves[:n]),
                                      proof(m, leaves[:n]))
        for i in range(n):
            assert verify_inclusion(i, n, leaves[i], path(i, leaves[:n]), mth(leaves[:n]))
    # signed note (sumdb): key id and signature
    parts = NOTE_SKEY.split("+", 4)   # base64 may hold "+"
    name, kid = parts[2], parts[3]
    raw = base64.b64decode(parts[4])
    assert raw[0] == 0x01 and len(raw) == 33
    seed = raw[1:]
    vname, vkid, vraw = NOTE_VKEY.split("+", 2)
    vraw = base64.b64decode(vraw)
    assert vname == name and vkid == kid and vraw[0] == 0x01
    pub = ed_pub(seed)
    assert vraw[1:] == pub
    assert H(name.encode() + b"\n" + b"\x01" + pub)[:4].hex() == kid
    sig = ed_sign(seed, NOTE_TEXT.encode())
    line = "\u2014 " + name + " " + b64(bytes.fromhex(kid) + sig) + "\n"
    assert NOTE_TEXT + "\n" + line == NOTE_SIGNED
    return leaves, seed, pub

# ---------------------------------------------------------------------------
# Sections 12-14: members, v2 body, caller fields
# ---------------------------------------------------------------------------

TYPE_CODES = {"event": 1, "header": 2, "recovery": 3, "seal": 4,
              "checkpoint": 5, "tree": 6, "clock": 7}
# key -> (kind, tag, cap) for fixed members (sections 2.2-2.4, 12)
TAGS = {
    "action": ("str", 0x03, 128), "outcome": ("str", 0x04, None), "rv": ("str", 0x05, 64),
    "slot": ("int", 0x06, None), "session": ("int", 0x07, None),
    "mechanism": ("str", 0x08, 64), "key_label": ("str", 0x09, 512),
    "key_id": ("hex", 0x0a, 256), "key2_label": ("str", 0x0d, 256),
    "key2_id": ("hex", 0x0e, 128), "actor": ("str", 0x0b, 128), "detail": ("str", 0x0c, 4096),
    "file_id": ("str", 0x10, None), "chain_id": ("str", 0x11, None),
    "reason": ("str", 0x12, None), "prev_name": ("str", 0x13, 1024),
    "prev_seq": ("int", 0x14, None), "prev_hash": ("str", 0x15, None),
    "prev_size": ("int", 0x16, None), "pad": ("str", 0x17, None),
    "last_seq": ("int", 0x20, None), "damage_offset": ("int", 0x21, None),
    "damage_length": ("int", 0x22, None), "damage_sha256": ("str", 0x23, None),
    "kind": ("str", 0x50, None), "epoch": ("int", 0x51, None),
    "seal_key": ("str", 0x52, None), "prev_seal": ("int", 0x53, None),
    "prev_kind": ("str", 0x54, None), "mac": ("str", 0x55, None),
    "prev_key": ("str", 0x56, None),
    "size": ("int", 0x60, None), "first_seq": ("int", 0x61, None),
    "range": ("str", 0x62, None), "note": ("str", 0x63, None),
    "expected": ("str", 0x70, None), "wall": ("str", 0x71, None),
}
ORDER = {  # section 12 / 2.2-2.4
    "event": ["action", "outcome", "rv", "slot", "session", "mechanism", "key_label",
              "key_id", "key2_label", "key2_id", "actor", "detail"],
    "header": ["file_id", "chain_id", "reason", "prev_name", "prev_seq", "prev_hash",
               "prev_size", "detail", "pad"],
    "recovery": ["last_seq", "damage_offset", "damage_length", "damage_sha256"],
    "seal": ["kind", "epoch", "seal_key", "chain_id", "prev_seal", "prev_kind", "prev_key", "mac"],
    "checkpoint": ["size", "first_seq", "range", "note"],
    "tree": ["size", "first_seq", "range"],
    "clock": ["epoch", "expected", "wall"],
}
RESERVED = set(TAGS) | {"seq", "v", "type", "hash"}
CALLER_RE = re.compile(r"[a-z][a-z0-9_]{0,31}(\.[a-z][a-z0-9_]{0,31}){0,3}\Z")
CALLER_STR, CALLER_INT = 0x80, 0x81
CALLER_CAP, CALLER_MAX, CALLER_JSON_MAX = 256, 16, 2048
INT_MAX = 2 ** 53 - 1


def caller_key_ok(k):
    return isinstance(k, bytes) and CALLER_RE.match(k.decode("latin-1")) is not None \
        and k.decode("latin-1") not in RESERVED


class Refused(Exception):
    pass


def caller_fields(raw):
    """14: raw = list of (key bytes, bytes | int) in the caller's order.
    Returns the canonical list [(key, kind, json bytes, decoded|int)] or raises
    Refused(errno name)."""
    out = []
    keys = [k for k, _ in raw]
    if len(set(keys)) != len(keys):
        raise Refused("EINVAL")
    for k, v in raw:
        if not caller_key_ok(k):
            raise Refused("EINVAL")
        if isinstance(v, int):
            if not 0 <= v <= INT_MAX:
                raise Refused("EINVAL")
            out.append((k, "int", str(v).encode(), v))
        else:
            s = make_str(v, CALLER_CAP)
            if s is None:
                continue  # empty: omitted
            out.append((k, "str", b'"' + s[0] + b'"', s[1]))
    if len(out) > CALLER_MAX:
        raise Refused("EINVAL")
    out.sort(key=lambda f: f[0])
    total = sum(len(b',"' + k + b'":' + j) for k, _, j, _ in out)
    if total > CALLER_JSON_MAX:
        raise Refused("E2BIG")
    return out


def enc_val(kind, val):
    if kind == "int":
        return le64(val)
    return le32(len(val)) + val


def v2_body(rtype, members, cfields):
    """13: members = [(key, kind, decoded|int)] in line order (no ts/seq)"""
    b = bytes([0x02, TYPE_CODES[rtype]])
    for k, kind, val in members:
        b += bytes([TAGS[k][1]]) + enc_val("int" if kind == "int" else "str", val)
    for k, kind, _, val in cfields:
        b += bytes([CALLER_INT if kind == "int" else CALLER_STR, len(k)]) + k + \
            enc_val(kind, val)
    return b


def chain_step(prev, seq, ts, digest):
    """15: returns (E_n, hash_n)"""
    e = prev + le64(seq) + ts + digest
    assert len(e) == 102
    return e, H(b"\x00" + e)

# ---------------------------------------------------------------------------
# Section 16: seal keys
# ---------------------------------------------------------------------------

L_LEFT = b"auditlog-v2 tree left"
L_RIGHT = b"auditlog-v2 tree right"
L_MAC = b"auditlog-v2 seal mac key"
L_KID = b"auditlog-v2 key id"
L_SEAL = b"auditlog-v2 seal"
DEPTH = 32


def node(S, d, i):
    """node(d, i) from the root: d HMACs"""
    n = S
    for lvl in range(d):
        bit = (i >> (d - 1 - lvl)) & 1
        n = HMAC(n, L_RIGHT if bit else L_LEFT)
    return n


def epoch_key(S, e):
    return node(S, DEPTH, e)


def mac_key(S, e):
    return HMAC(epoch_key(S, e), L_MAC)


def covering(e):
    """16.3: C(e) as (depth, index), in ascending epoch order"""
    out = [(DEPTH, e)]
    for d in range(DEPTH, 0, -1):
        if ((e >> (DEPTH - d)) & 1) == 0:
            out.append((d, (e >> (DEPTH - d)) + 1))
    return out


def covering_seeds(S, e):
    return [(d, i, node(S, d, i)) for d, i in covering(e)]


def advance(cset, e2):
    """16.3: from C(e) (list of (d, i, seed)) to C(e2), deriving only from kept nodes"""
    for d, i, seed in cset:
        lo, hi = i << (DEPTH - d), ((i + 1) << (DEPTH - d)) - 1
        if lo <= e2 <= hi:
            break
    else:
        raise ValueError("epoch not covered")
    # descend from (d, i) to e2, keeping right siblings of left turns
    kept = []
    n = seed
    for lvl in range(d, DEPTH):
        bit = (e2 >> (DEPTH - 1 - lvl)) & 1
        idx = e2 >> (DEPTH - 1 - lvl)
        if bit == 0:
            kept.append((lvl + 1, idx + 1, HMAC(n, L_RIGHT)))
            n = HMAC(n, L_LEFT)
        else:
            n = HMAC(n, L_RIGHT)
    later = [(dd, ii, s) for dd, ii, s in cset if (ii << (DEPTH - dd)) > e2]
    return [(DEPTH, e2, n)] + list(reversed(kept)) + later


def key_id(S, host, t0, delta):
    return HMAC(S, L_KID + b"\x00" + bytes([0x01, len(host)]) + host + le64(t0) + le64(delta))[:8]

# ---------------------------------------------------------------------------
# Section 27: attestation statements
# ---------------------------------------------------------------------------

L_ATT_KEY = b"auditlog-v2 attest key"
L_ATT = b"auditlog-v2 attestation"


def attestation(S, host, t0, delta, e, wall, boot_id, boot_time, nonce):
    """27.1 and 27.2: the statement's text, MAC line included"""
    t = ("auditlog-attestation 2\nscheme hmac-sha256-tree32\nhost %s\nkey-id %s\n"
         "t0 %d\ndelta %d\nepoch %d\nwall %d\nboot-id %s\nboot-time %d\nnonce %s\n"
         % (host.decode(), key_id(S, host, t0, delta).hex(), t0, delta, e, wall,
            boot_id.hex(), boot_time, nonce.hex() if nonce is not None else "-")).encode()
    katt = HMAC(epoch_key(S, e), L_ATT_KEY)
    mac = HMAC(katt, L_ATT + b"\x00" + t)
    return (t + b"mac " + mac.hex().encode() + b"\n").decode(), katt


def attest_vectors():
    boot = hashlib.sha256(b"boot").digest()[:16]
    out = []
    for e, nonce in ((6, None), (6, H(b"auditor challenge")), (2 ** 20 + 3, None)):
        wall = T0 + e * DELTA + 3 * 10 ** 9
        text, katt = attestation(SEED, HOST, T0, DELTA, e, wall, boot, 987654321012, nonce)
        out.append({"epoch": e, "wall": wall, "katt": katt.hex(), "text": text})
    # the domain separation of 27.2: the attestation key is not the seal MAC key
    assert all(v["katt"] != mac_key(SEED, v["epoch"]).hex() for v in out)
    return out


# ---------------------------------------------------------------------------
# Records and lines (sections 2, 3, 12-15, 19-21)
# ---------------------------------------------------------------------------

HOST = b"host-1.example"   # matches 16.1's host id rule (host_vectors)
SEED = H(b"auditlog v2 test vectors: epoch-0 seed")
SIGN_SEED = H(b"auditlog v2 test vectors: checkpoint signing key")
T0 = 1796083200 * 10 ** 9            # 2026-12-01T00:00:00Z
DELTA = 10 * 10 ** 9                 # 10 s
MAX_JUMP = 3162240
KEY_ID = key_id(SEED, HOST, T0, DELTA)
SEED2 = H(b"auditlog v2 test vectors: the seed after a re-key")  # 17.4


def ts_text(ns):
    import datetime
    s, frac = divmod(ns, 10 ** 9)
    d = datetime.datetime.fromtimestamp(s, tz=datetime.timezone.utc)
    return (d.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % frac).encode()


assert ts_text(T0) == b"2026-12-01T00:00:00.000000000Z"


def jstr(esc):
    return b'"' + esc + b'"'


class Chain:
    def __init__(self, name, chain_id, prev, seq, origin_host=HOST):
        self.name, self.chain_id, self.prev, self.seq = name, chain_id, prev, seq
        self.first_seq = seq
        self.leaves = []
        self.records = []
        self.last_seal = None   # (seq, kind)
        self.origin = (origin_host + b"/auditlog/" + chain_id).decode()

    def add(self, rname, rtype, ns, fields, caller=(), seal_epoch=None, seal_seed=None):
        """fields: list of (key, raw value) in line order (pad, mac computed)."""
        ts = ts_text(ns)
        seq = self.seq
        members = []   # (key, kind, decoded|int, json value bytes)
        for k, v in fields:
            kind, _, cap = TAGS[k]
            if kind == "int":
                members.append((k, "int", v, str(v).encode()))
            elif kind == "hex":
                s = make_key_id(v, cap)
                members.append((k, "str", s[1], jstr(s[0])))
            else:
                s = make_str(v, cap)
                assert s is not None, k
                members.append((k, "str", s[1], jstr(s[0])))
        cf = caller_fields(list(caller)) if caller else []
        assert rtype == "event" or not cf
        order = ORDER[rtype]
        assert [m[0] for m in members] == [k for k in order if k in dict(fields)], rname

        def line_of(ms, hsh):
            out = b'{"@timestamp":"' + ts + b'","seq":' + str(seq).encode() + \
                b',"v":2,"type":"' + rtype.encode() + b'"'
            for k, _, _, j in ms:
                out += b',"' + k.encode() + b'":' + j
            for k, _, j, _ in cf:
                out += b',"' + k + b'":' + j
            return out + b',"hash":"' + hsh + b'"}\n'

        mac_info = None
        if rtype == "header":
            L = len(line_of(members, b"0" * 64))
            if L < 1024:
                dots = b"." * max(1, 1015 - L)
                members.append(("pad", "str", dots, jstr(dots)))
        if rtype == "seal":
            sbody = v2_body(rtype, [(k, kd, v) for k, kd, v, _ in members], [])
            mac_in = L_SEAL + b"\x00" + self.prev + le64(seq) + ts + sbody
            e = seal_epoch
            mk = mac_key(seal_seed or SEED, e)
            mac = HMAC(mk, mac_in)
            hm = mac.hex().encode()
            members.append(("mac", "str", hm, jstr(hm)))
            mac_info = {"epoch": e, "mac_key": mk.hex(), "mac_input_hex": mac_in.hex(),
                        "mac": mac.hex()}
            if seal_seed:  # another key's seal (17.4): its seed
                mac_info["seed"] = seal_seed.hex()
        body = v2_body(rtype, [(k, kd, v) for k, kd, v, _ in members], cf)
        digest = H(body)
        e_n, hsh = chain_step(self.prev, seq, ts, digest)
        line = line_of(members, hsh.hex().encode())
        assert len(line) <= 8192
        if rtype == "header":
            assert len(line) == 1024 or len(line) > 1024
        # the line is JSON that reads back to the same members, in order
        obj = json.loads(line.decode("utf-8"), object_pairs_hook=list)
        assert [k for k, _ in obj][:4] == ["@timestamp", "seq", "v", "type"]
        assert obj[-1][0] == "hash"
        rec = {
            "name": rname, "chain": self.name, "type": rtype, "seq": seq,
            "timestamp": ts.decode(), "prev": self.prev.hex(),
            "members": [[k, TAGS[k][1], {"int": v} if kd == "int" else {"str_hex": v.hex()}]
                        for k, kd, v, _ in members],
            "caller": [[k.decode(), {"int": v} if kd == "int" else {"str_hex": v.hex()}]
                       for k, kd, _, v in cf],
            "line_hex": line.hex(),
            "body_hex": body.hex(), "digest": digest.hex(),
            "leaf_input_hex": e_n.hex(), "hash": hsh.hex(),
        }
        if mac_info:
            rec["seal"] = mac_info
        self.records.append(rec)
        self.leaves.append(hsh)
        self.prev = hsh
        self.seq += 1
        if rtype == "seal":
            self.last_seal = (seq, dict(fields)["kind"])
        return rec

    def seal(self, rname, kind, ns, epoch, opening=False, seed=None, prev_key=None):
        """seed: another key's S (a re-key, 17.4: t0 and delta stay the test key's);
        prev_key: the key id the chain's previous seal was under"""
        kid = key_id(seed, HOST, T0, DELTA) if seed else KEY_ID
        f = [("kind", kind.encode()), ("epoch", epoch), ("seal_key", kid.hex().encode()),
             ("chain_id", self.chain_id)]
        if opening and self.last_seal:
            f += [("prev_seal", self.last_seal[0]), ("prev_kind", self.last_seal[1])]
            if prev_key:
                f += [("prev_key", prev_key.hex().encode())]
        assert ns >= T0 + epoch * DELTA and ns < T0 + (epoch + 1) * DELTA
        return self.add(rname, "seal", ns, f, seal_epoch=epoch, seal_seed=seed)

    def tree_fields(self):
        n = len(self.leaves)
        cr = compact_range(self.leaves)
        return n, cr, [("size", n), ("first_seq", self.first_seq),
                       ("range", b"".join(c.hex().encode() for c in cr))]

    def note_text(self):
        n = len(self.leaves)
        root = mth(self.leaves)
        return (self.origin + "\n" + str(n) + "\n" + b64(root) + "\n" +
                "seq %d\n" % (self.first_seq + n - 1) +
                "head %s\n" % self.leaves[-1].hex() +
                "first-seq %d\n" % self.first_seq).encode()

    def checkpoint(self, rname, ns):
        text = self.note_text()
        pub = ed_pub(SIGN_SEED)
        kid = H(self.origin.encode() + b"\n\x01" + pub)[:4]
        sig = ed_sign(SIGN_SEED, text)
        note = text + b"\n" + "\u2014 ".encode() + self.origin.encode() + b" " + \
            b64(kid + sig).encode() + b"\n"
        assert ed_verify(pub, sig, text)
        n, cr, f = self.tree_fields()
        rec = self.add(rname, "checkpoint", ns, f + [("note", note)])
        rec["checkpoint"] = {
            "origin": self.origin, "size": n, "root": mth(self.leaves[:n]).hex(),
            "last_seq": self.first_seq + n - 1, "head": self.leaves[n - 1].hex(),
            "first_seq": self.first_seq, "key_id": kid.hex(), "public": pub.hex(),
            "text_hex": text.hex(), "signature": sig.hex(), "note_hex": note.hex(),
            "vkey": "%s+%s+%s" % (self.origin, kid.hex(), b64(b"\x01" + pub)),
        }
        return rec

    def tree(self, rname, ns):
        _, _, f = self.tree_fields()
        return self.add(rname, "tree", ns, f)


def t(epoch, ns_in=1):
    return T0 + epoch * DELTA + ns_in


def build_chains():
    ca = Chain("a", hashlib.sha256(b"chain a").hexdigest()[:32].encode(), bytes(32), 0)
    ca.add("a-header", "header", t(4), [
        ("file_id", hashlib.sha256(b"file a").hexdigest()[:32].encode()),
        ("chain_id", ca.chain_id), ("reason", b"new")])
    ca.seal("a-open", "open", t(4, 2), 4, opening=True)
    ca.add("a-event-plain", "event", t(4, 3), [("action", b"C_Initialize"),
                                               ("outcome", b"success")])
    ca.add("a-event-caller", "event", t(4, 4), [("action", b"login"), ("outcome", b"failure"),
                                                ("actor", b"sshd")],
           caller=[(b"user.name", b"alice \"admin\"\n\x1b"), (b"attempt", 3),
                   (b"client.ip", b"192.0.2.7"), (b"a_b", b"x"), (b"a.b", 0),
                   (b"ab", INT_MAX), (b"empty", b""),
                   (b"geo.city.name.x", "Z\u00fcrich \u2014 \u00e9".encode() + b"\xff"),
                   (b"long", b"L" * 300)])
    # every fixed member of 2.2, the second key's too
    ca.add("a-event-fixed", "event", t(4, 5), [
        ("action", b"C_WrapKey"), ("outcome", b"success"), ("rv", b"CKR_OK"), ("slot", 0),
        ("session", 7), ("mechanism", b"CKM_AES_KEY_WRAP_PAD"), ("key_label", b"payments"),
        ("key_id", b"\x01\xa2"), ("key2_label", "wrapped \u00e9\t".encode()),
        ("key2_id", b"\xab" * 65), ("actor", b"user")], caller=[(b"z", 1)])
    ca.seal("a-seal-batch", "batch", t(4, 6), 4)
    ca.seal("a-seal-idle", "idle", t(5, 7), 5)
    ca.add("a-event-6", "event", t(6, 8), [("action", b"C_Logout"), ("outcome", b"success")])
    ca.tree("a-tree", t(6, 9))
    ca.seal("a-seal-batch-2", "batch", t(6, 10), 6)
    ca.add("a-clock", "clock", t(6, 11), [("epoch", 6), ("expected", ts_text(t(6, 11))),
                                          ("wall", ts_text(t(6, 11) - 3600 * 10 ** 9))])
    ca.add("a-event-11", "event", t(6, 12), [("action", b"C_Finalize"), ("outcome", b"success")])
    ca.checkpoint("a-checkpoint", t(6, 13))
    ca.seal("a-close", "close", t(6, 14), 6)
    ca.seal("a-reopen", "open", t(9, 1), 9, opening=True)
    ca.add("a-event-15", "event", t(9, 2), [("action", b"C_Initialize"), ("outcome", b"success")])
    ca.checkpoint("a-checkpoint-2", t(9, 3))
    ca.seal("a-seal-batch-3", "batch", t(9, 4), 9)

    cb = Chain("b", hashlib.sha256(b"chain b").hexdigest()[:32].encode(),
               H(b"last v1 record of chain b"), 100)
    cb.last_seal = None
    cb.add("b-header", "header", t(20), [
        ("file_id", hashlib.sha256(b"file b").hexdigest()[:32].encode()),
        ("chain_id", cb.chain_id), ("reason", b"rotate"),
        ("prev_name", b"audit.log.20261201T000320.000000001Z-1"), ("prev_seq", 99),
        ("prev_hash", cb.prev.hex().encode()), ("prev_size", 123456)])
    cb.seal("b-open", "open", t(20, 2), 20, opening=True)
    cb.add("b-recovery", "recovery", t(20, 3), [("last_seq", 101), ("damage_offset", 2048),
                                                ("damage_length", 17),
                                                ("damage_sha256", H(b"x" * 17).hex().encode())])
    cb.add("b-event", "event", t(21, 4), [("action", b"C_Login"), ("outcome", b"success")],
           caller=[(b"svc", b"payments")])
    cb.checkpoint("b-checkpoint", t(21, 5))
    cb.seal("b-seal-batch", "batch", t(21, 6), 21)

    # a re-key (17.4): the chain goes on under a second key, whose first seal,
    # an open, names the previous seal's key id in prev_key
    cr = Chain("r", hashlib.sha256(b"chain r").hexdigest()[:32].encode(), bytes(32), 0)
    cr.add("r-header", "header", t(30), [
        ("file_id", hashlib.sha256(b"file r").hexdigest()[:32].encode()),
        ("chain_id", cr.chain_id), ("reason", b"new")])
    cr.seal("r-open", "open", t(30, 2), 30, opening=True)
    cr.add("r-event", "event", t(30, 3), [("action", b"C_Login"), ("outcome", b"success")])
    cr.seal("r-close", "close", t(30, 4), 30)
    cr.seal("r-rekey", "open", t(33, 1), 33, opening=True, seed=SEED2, prev_key=KEY_ID)
    cr.add("r-event-2", "event", t(33, 2), [("action", b"C_Logout"), ("outcome", b"success")])
    cr.seal("r-batch", "batch", t(33, 3), 33, seed=SEED2)
    return [ca, cb, cr]


def tree_vectors(ch):
    hs = ch.leaves
    n = len(hs)
    sizes = []
    cr, sz = [], []
    for m in range(1, n + 1):
        cr, sz = range_append(cr, sz, hs[m - 1])
        assert cr == compact_range(hs[:m])
        assert range_root(cr) == mth(hs[:m])
        sizes.append({"size": m, "root": mth(hs[:m]).hex(), "range": [c.hex() for c in cr]})
    inc = []
    for i, m in [(0, 1), (0, n), (n - 1, n), (3, n), (5, 7), (4, 5), (2, 3)]:
        if i < m <= n:
            p = path(i, hs[:m])
            assert verify_inclusion(i, m, hs[i], p, mth(hs[:m]))
            inc.append({"index": i, "size": m, "path": [x.hex() for x in p]})
    con = []
    for a, b in [(1, n), (4, n), (5, n), (7, 8), (8, n), (n, n), (3, 7), (0, 5)]:
        if a <= b <= n:
            p = proof(a, hs[:b])
            assert verify_consistency(a, b, mth(hs[:a]), mth(hs[:b]), p)
            con.append({"size1": a, "size2": b, "proof": [x.hex() for x in p]})
    return {"chain": ch.name, "first_seq": ch.first_seq, "leaves": [h.hex() for h in hs],
            "sizes": sizes, "inclusion": inc, "consistency": con}


def keytree_vectors():
    epochs = sorted({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21, 255, 256, 65535, 65536,
                     2 ** 31 - 1, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1, 0x5a5a5a5a})
    ek = [{"epoch": e, "key": epoch_key(SEED, e).hex(), "mac_key": mac_key(SEED, e).hex()}
          for e in epochs]
    nodes = [{"depth": d, "index": i, "seed": node(SEED, d, i).hex()}
             for d, i in [(0, 0), (1, 0), (1, 1), (2, 1), (2, 2), (16, 0x1234), (31, 7)]]
    cov = []
    for e in [0, 1, 2, 4, 255, 256, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]:
        cs = covering_seeds(SEED, e)
        assert len(cs) <= 33
        cov.append({"epoch": e, "nodes": [[d, i, s.hex()] for d, i, s in cs]})
    # forward evolution from C(e) reaches C(e') without the root
    adv = []
    for e, e2 in [(0, 1), (1, 2), (3, 4), (0, 2 ** 31), (255, 256), (4, 2 ** 32 - 1),
                  (2 ** 31 - 1, 2 ** 31)]:
        got = advance(covering_seeds(SEED, e), e2)
        assert got == covering_seeds(SEED, e2), (e, e2)
        adv.append({"from": e, "to": e2})
    return {"seed": SEED.hex(), "host": HOST.decode(), "t0": T0, "delta": DELTA,
            "key_id": KEY_ID.hex(), "labels": {
                "left": L_LEFT.decode(), "right": L_RIGHT.decode(), "mac": L_MAC.decode(),
                "key_id": L_KID.decode(), "seal": L_SEAL.decode()},
            "epochs": ek, "nodes": nodes, "covering": cov, "advance": adv}


def files_vectors():
    vk = ("auditlog-verification-key 2\nscheme hmac-sha256-tree32\nhost %s\nkey-id %s\n"
          "t0 %d\ndelta %d\nseed %s\n" % (HOST.decode(), KEY_ID.hex(), T0, DELTA, SEED.hex()))
    e = 6
    st = ("auditlog-sealing-state 2\nscheme hmac-sha256-tree32\nhost %s\nkey-id %s\n"
          "t0 %d\ndelta %d\nmax-jump %d\nepoch %d\nboot-id %s\nboot-start %d\n"
          % (HOST.decode(), KEY_ID.hex(), T0, DELTA, MAX_JUMP, e,
             hashlib.sha256(b"boot").hexdigest()[:32], 12345678901))
    for d, i, s in covering_seeds(SEED, e):
        st += "node %d %d %s\n" % (d, i, s.hex())
    pub = ed_pub(SIGN_SEED)
    ck = "auditlog-checkpoint-key 2\nhost %s\ned25519 %s\n" % (HOST.decode(), pub.hex())
    sk = "auditlog-signing-key 2\nhost %s\ned25519-seed %s\n" % (HOST.decode(), SIGN_SEED.hex())
    return {"verification_key": vk, "sealing_state": st, "sealing_state_epoch": e,
            "checkpoint_key": ck, "signing_key": sk}


def schedule(st, boot_id, b, W):
    """17.2 rules 1-4: returns (epoch, boot_start, expected, clock) or an errno name"""
    if boot_id == st["boot_id"]:
        if b < st["boot_start"]:
            return "EINVAL"
        e = st["epoch"] + (b - st["boot_start"]) // DELTA
        bs = st["boot_start"] + (e - st["epoch"]) * DELTA
    else:
        w = (W - T0) // DELTA if W >= T0 else 0
        e = min(max(w, st["epoch"]), st["epoch"] + st["max_jump"])
        if W >= T0 and e == w:
            bs = max(0, b - (W - T0 - e * DELTA))
        else:
            bs = b
    if e > 2 ** 32 - 1 or T0 + (e + 1) * DELTA > 2 ** 64 - 1:
        return "ERANGE"
    expected = T0 + e * DELTA + (b - bs)
    return e, bs, expected, abs(W - expected) > DELTA


def schedule_vectors():
    A, B = "a" * 32, "b" * 32
    bs0 = 12345678901
    st = {"epoch": 6, "boot_id": A, "boot_start": bs0, "max_jump": MAX_JUMP}
    exp6 = T0 + 6 * DELTA
    cases = [
        ("same-boot-start", st, A, bs0, exp6),
        ("same-boot-25s", st, A, bs0 + 25 * 10 ** 9, exp6 + 25 * 10 ** 9 + 3 * 10 ** 9),
        ("same-boot-wall-stepped-back", st, A, bs0 + 25 * 10 ** 9, exp6 - 3600 * 10 ** 9),
        ("same-boot-wall-stepped-ahead", st, A, bs0 + 1, exp6 + 86400 * 10 ** 9),
        ("same-boot-clock-before-start", st, A, bs0 - 1, exp6),
        ("reboot-wall-later", st, B, 20 * 10 ** 9, T0 + 100 * DELTA + 7 * 10 ** 9),
        ("reboot-early-in-boot", st, B, 10 ** 9, T0 + 100 * DELTA + 7 * 10 ** 9),
        ("reboot-wall-behind", st, B, 5 * 10 ** 9, T0 + 2 * DELTA),
        ("reboot-wall-before-t0", st, B, 5 * 10 ** 9, T0 - 10 ** 12),
        ("reboot-wall-too-far", st, B, 5 * 10 ** 9, T0 + (6 + MAX_JUMP + 5) * DELTA),
        ("reboot-epoch0-wall-before-t0", {"epoch": 0, "boot_id": A, "boot_start": bs0,
                                          "max_jump": MAX_JUMP}, B, 5 * 10 ** 9, T0 - 10 ** 12),
        ("exhausted", {"epoch": 2 ** 32 - 1, "boot_id": A, "boot_start": bs0,
                       "max_jump": MAX_JUMP}, A, bs0 + DELTA, exp6),
        ("ends-after-2554", {"epoch": 2 ** 32 - 2, "boot_id": A, "boot_start": bs0,
                             "max_jump": MAX_JUMP}, A, bs0 + DELTA, exp6),
        ("late-epoch", {"epoch": 700000000, "boot_id": A, "boot_start": bs0,
                        "max_jump": MAX_JUMP}, A, bs0 + 3 * DELTA + 1, exp6),
    ]
    out = []
    for name, s0, bid, b, W in cases:
        r = schedule(s0, bid, b, W)
        ent = {"name": name, "state": dict(s0), "boot_id": bid, "boottime": b, "wall": W}
        if isinstance(r, str):
            ent["error"] = r
        else:
            ent.update({"epoch": r[0], "boot_start": r[1], "expected": r[2], "clock": r[3]})
        out.append(ent)
    assert [c.get("clock") for c in out] == [False, False, True, True, None, False, False,
                                             True, True, True, True, None, None, True]
    return out


HOST_RE = re.compile(r"[a-z0-9][a-z0-9.-]{0,62}\Z")   # 16.1


def host_vectors():
    valid = [b"a", b"0", b"host-1.example", b"a" * 63, b"a.", b"a-", b"1.2.3.4"]
    invalid = [b"", b".a", b"-a", b"A", b"a_b", b"a b", b"a" * 64, b"a+b", b"a/b",
               b"h\xc3\xa9", b"a\n"]
    for h in valid:
        assert HOST_RE.match(h.decode("latin-1")), h
    for h in invalid:
        assert not HOST_RE.match(h.decode("latin-1")), h
    return {"valid": [h.decode() for h in valid], "invalid_hex": [h.hex() for h in invalid]}


def caller_vectors():
    valid = [b"a", b"user.name", b"a" * 32, b".".join([b"a" * 32] * 4), b"x9_.y_0",
             b"labels.env", b"seq2", b"z_"]
    invalid = [b"", b"A", b"1a", b"_a", b"a" * 33, b".".join([b"a"] * 5), b"a..b", b"a.",
               b".a", b"a-b", b"a b", b"a.1", b"\xc3\xa9", b"seq", b"hash", b"actor",
               b"key_id", b"mac", b"range", b"note", b"epoch", b"first_seq", b"v",
               b"type", b"expected", b"wall", b"prev_kind", b"prev_key", b"user.Name",
               b"key2_label", b"key2_id"]
    for k in valid:
        assert caller_key_ok(k), k
    for k in invalid:
        assert not caller_key_ok(k), k
    sets = []

    def one(name, raw, want):
        try:
            cf = caller_fields(raw)
            got = "ok"
        except Refused as r:
            cf, got = None, r.args[0]
        assert got == want, (name, got, want)
        ent = {"name": name, "fields": [[k.decode("latin-1"),
                                          {"int": v} if isinstance(v, int) else
                                          {"str_hex": v.hex()}] for k, v in raw],
               "result": got}
        if cf is not None:
            ent["canonical"] = [[k.decode(), {"int": v} if kd == "int" else
                                 {"str_hex": v.hex()}] for k, kd, _, v in cf]
            ent["json_hex"] = b"".join(b',"' + k + b'":' + j for k, _, j, _ in cf).hex()
            ent["body_hex"] = v2_body("event", [], cf)[2:].hex()
        sets.append(ent)

    one("sorted", [(b"b", 1), (b"a", b"x")], "ok")
    one("dup", [(b"a", 1), (b"a", 2)], "EINVAL")
    one("reserved", [(b"actor", b"x")], "EINVAL")
    one("bad-key", [(b"A", b"x")], "EINVAL")
    one("int-max", [(b"n", INT_MAX)], "ok")
    one("int-over", [(b"n", INT_MAX + 1)], "EINVAL")
    one("sixteen", [(b"k%02d" % i, i) for i in range(16)], "ok")
    one("seventeen", [(b"k%02d" % i, i) for i in range(17)], "EINVAL")
    one("seventeen-one-empty", [(b"k%02d" % i, i) for i in range(16)] + [(b"e", b"")], "ok")
    one("cut", [(b"s", b"\x01" * 100)], "ok")     # 600 escaped bytes: cut at 256
    one("mixed", [(b"user.name", b"alice \"admin\"\n\x1b"), (b"geo.city",
                   "Z\u00fcrich \u2014 \u00e9".encode() + b"\xff\xe2\x82A"),
                  (b"long", b"L" * 300), (b"esc", b"\\" * 200), (b"u", "\u20ac".encode() * 90),
                  (b"e", b"")], "ok")
    # 7 strings of 256 escaped bytes + keys: over 2048
    one("too-big", [(b"s%d" % i, b"y" * 256) for i in range(8)], "E2BIG")
    # exactly 2048: each `,"sN":"…"` is 8 + len; 8 fields of 248 = 2048
    one("exactly-2048", [(b"s%d" % i, b"y" * 248) for i in range(8)], "ok")
    one("over-2048", [(b"s%d" % i, b"y" * 248) for i in range(7)] + [(b"s7", b"y" * 249)],
        "E2BIG")
    return {"valid": [k.decode("latin-1") for k in valid],
            "invalid_hex": [k.hex() for k in invalid], "sets": sets}


def main():
    leaves, note_seed, note_pub = check_external()
    chains = build_chains()
    out = {
        "spec": "docs/format.md Part II (sections 12-24, 27)",
        "external": {
            "ed25519": [{"name": n, "seed": s, "public": p, "message": m, "signature": g}
                        for n, s, p, m, g in RFC8032],
            "hmac_sha256": [{"name": n, "key": k, "data": d, "mac": m, "bytes": b}
                            for n, k, d, m, b in RFC4231],
            "rfc6962": {
                "leaf_inputs": CT_LEAVES, "leaf_hashes": [h.hex() for h in leaves],
                "roots": CT_ROOTS,
                "compact_ranges": [[CT_NODES[l][i] for l, i in CT_COMPACT[n]]
                                   for n in range(1, 9)],
                "inclusion": [{"index": l - 1, "size": s, "path": p}
                              for l, s, p in CT_INCLUSION],
                "consistency": [{"size1": a, "size2": b, "proof": p}
                                for a, b, p in CT_CONSISTENCY]},
            "note": {"skey": NOTE_SKEY, "vkey": NOTE_VKEY, "name": "PeterNeumann",
                     "key_id": "c74f20a3", "seed": note_seed.hex(), "public": note_pub.hex(),
                     "text_hex": NOTE_TEXT.encode().hex(),
                     "signed_hex": NOTE_SIGNED.encode().hex()},
        },
        "keytree": keytree_vectors(),
        "files": files_vectors(),
        "caller": caller_vectors(),
        "schedule": schedule_vectors(),
        "attestations": attest_vectors(),
        "hosts": host_vectors(),
        "records": [r for c in chains for r in c.records],
        "trees": [tree_vectors(c) for c in chains],
        "signing_seed": SIGN_SEED.hex(),
    }
    sys.stdout.write(json.dumps(out, indent=1, sort_keys=False, ensure_ascii=True))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

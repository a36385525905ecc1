#!/usr/bin/env python3
"""Known-answer vectors for the auditlog on-disk format (versions 0 and 1).

Written from docs/format.md alone: no C code of this project was read while
writing it, so that the C implementation is checked against the specification
rather than against itself.  Standard library only.

Usage (from the repository root):
    python3 tests/vectors/gen_vectors.py > tests/vectors/vectors.json

The output is deterministic (same bytes on every run).  Section numbers in the
comments refer to docs/format.md.
"""

# Readings of docs/format.md taken here where the text leaves room (the most
# literal reading each time):
#  - 2.3 pad: L is the complete line without the pad member, hash member and
#    \n included; the pad holds max(1, 1015 - L) dots when L < 1024, so a
#    header with 1015 <= L <= 1023 comes out L + 10 bytes long.
#  - 2.3 pad is a member present in the line, so the v1 body carries it
#    (tag 0x17, str of dots) and the v0 body carries it as text.
#  - 3: the cap is measured on the escaped value; the decoded value of a cut
#    string is the kept units' UTF-8 bytes followed by the marker's 14 bytes.
#  - 3 key_id: hex of the caller's bytes, cut to 242 hex + marker when longer
#    than 256; an empty input is absent (step 4 applied to key_id too).
#  - 4: hex-valued str members (prev_hash, damage_sha256, file_id, ...) are
#    hashed as their ASCII hex characters, like any str.
#  - Members without a stated cap are not capped.
#  - Vectors only use values that satisfy the member rules (timestamps,
#    outcome, reason, hex widths), seq/prev consistent with sections 2.3-5.

import hashlib
import json
import struct
import sys

# ---------------------------------------------------------------------------
# Constants (sections 2, 3, 5)
# ---------------------------------------------------------------------------

MARKER = "\u2026[truncated]".encode("utf-8")   # section 3 step 3: 14 bytes
assert MARKER == b"\xe2\x80\xa6[truncated]" and len(MARKER) == 14

INT_MAX = 2 ** 53 - 1          # section 3, integers
LINE_MAX = 8192                # section 3, a line including its \n
HEADER_LEN = 1024              # section 2.3, pad
ZERO32 = bytes(32)             # section 5, chain input of a chain's first record

TYPE_CODES = {"event": 0x01, "header": 0x02, "recovery": 0x03}   # sections 2.2-2.4

# Member tables, in line order: (key, kind, tag, cap, required).
# kind: "str", "int", "hex" (key_id: the caller's bytes as lowercase hex),
#       "pad" (computed by the writer, section 2.3).
COMMON = [
    ("@timestamp", "str", 0x01, None, True),
    ("seq",        "int", 0x02, None, True),
]
MEMBERS = {
    "event": [                                        # section 2.2
        ("action",    "str", 0x03, 128,  True),
        ("outcome",   "str", 0x04, None, True),
        ("rv",        "str", 0x05, 64,   False),
        ("slot",      "int", 0x06, None, False),
        ("session",   "int", 0x07, None, False),
        ("mechanism", "str", 0x08, 64,   False),
        ("key_label", "str", 0x09, 512,  False),
        ("key_id",    "hex", 0x0a, 256,  False),
        ("key2_label", "str", 0x0d, 256, False),
        ("key2_id",   "hex", 0x0e, 128,  False),
        ("actor",     "str", 0x0b, 128,  False),
        ("detail",    "str", 0x0c, 4096, False),
    ],
    "header": [                                       # section 2.3
        ("file_id",   "str", 0x10, None, True),
        ("chain_id",  "str", 0x11, None, True),
        ("reason",    "str", 0x12, None, True),
        ("prev_name", "str", 0x13, 1024, False),
        ("prev_seq",  "int", 0x14, None, False),
        ("prev_hash", "str", 0x15, None, False),
        ("prev_size", "int", 0x16, None, False),
        ("sealed_name",    "str", 0x18, 1024, False),
        ("sealed_file_id", "str", 0x19, None, False),
        ("detail",    "str", 0x0c, 4096, False),
        ("pad",       "pad", 0x17, None, False),
    ],
    "recovery": [                                     # section 2.4
        ("last_seq",      "int", 0x20, None, True),
        ("damage_offset", "int", 0x21, None, True),
        ("damage_length", "int", 0x22, None, True),
        ("damage_sha256", "str", 0x23, None, True),
    ],
}
PREV_KEYS = ("prev_name", "prev_seq", "prev_hash", "prev_size")

# ---------------------------------------------------------------------------
# Section 3 step 1: UTF-8 repair, U+FFFD substitution of maximal subparts.
# Own state machine over Unicode Table 3-7 (well-formed byte sequences).
# ---------------------------------------------------------------------------

def _second_byte_range(lead):
    """(number of continuation bytes, (lo, hi) allowed for the first one)
    for a valid lead byte, or None when the byte cannot start a sequence."""
    if 0xC2 <= lead <= 0xDF:
        return 1, (0x80, 0xBF)
    if lead == 0xE0:
        return 2, (0xA0, 0xBF)
    if 0xE1 <= lead <= 0xEC or 0xEE <= lead <= 0xEF:
        return 2, (0x80, 0xBF)
    if lead == 0xED:
        return 2, (0x80, 0x9F)
    if lead == 0xF0:
        return 3, (0x90, 0xBF)
    if 0xF1 <= lead <= 0xF3:
        return 3, (0x80, 0xBF)
    if lead == 0xF4:
        return 3, (0x80, 0x8F)
    return None   # 80..BF, C0, C1, F5..FF


def utf8_repair(raw):
    """Decode bytes to a list of code points; every maximal subpart of an
    ill-formed sequence becomes one U+FFFD."""
    out = []
    i, n = 0, len(raw)
    while i < n:
        b0 = raw[i]
        if b0 < 0x80:
            out.append(b0)
            i += 1
            continue
        spec = _second_byte_range(b0)
        if spec is None:
            out.append(0xFFFD)          # a byte that cannot start a sequence
            i += 1
            continue
        need, (lo, hi) = spec
        j = i + 1
        ok = True
        for k in range(need):
            if j >= n:
                ok = False
                break
            c = raw[j]
            lo_k, hi_k = (lo, hi) if k == 0 else (0x80, 0xBF)
            if not (lo_k <= c <= hi_k):
                ok = False
                break
            j += 1
        if ok:
            if need == 1:
                cp = ((b0 & 0x1F) << 6) | (raw[i + 1] & 0x3F)
            elif need == 2:
                cp = ((b0 & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F)
            else:
                cp = (((b0 & 0x07) << 18) | ((raw[i + 1] & 0x3F) << 12)
                      | ((raw[i + 2] & 0x3F) << 6) | (raw[i + 3] & 0x3F))
            out.append(cp)
        else:
            # the lead and the valid continuations seen so far: one subpart;
            # resume at the offending byte (or the end)
            out.append(0xFFFD)
        i = j
    return out


def cp_utf8(cp):
    assert 0 <= cp <= 0x10FFFF and not (0xD800 <= cp <= 0xDFFF)
    return chr(cp).encode("utf-8")

# ---------------------------------------------------------------------------
# Section 3 step 2: escaping (one unit per code point)
# ---------------------------------------------------------------------------

_SHORT = {0x22: b'\\"', 0x5C: b"\\\\", 0x0A: b"\\n", 0x0D: b"\\r",
          0x09: b"\\t", 0x08: b"\\b", 0x0C: b"\\f"}


def escape_cp(cp):
    if cp in _SHORT:
        return _SHORT[cp]
    if cp < 0x20:
        return b"\\u%04x" % cp        # two lowercase hex digits after 00
    return cp_utf8(cp)                # U+007F and all non-ASCII raw

# ---------------------------------------------------------------------------
# Section 3 steps 1-4: a string member -> (escaped value, decoded value) or None
# ---------------------------------------------------------------------------

def make_str(raw, cap):
    units = [(escape_cp(cp), cp_utf8(cp)) for cp in utf8_repair(raw)]
    total = sum(len(e) for e, _ in units)
    if cap is not None and total > cap:
        limit = cap - len(MARKER)
        acc = 0
        keep = 0
        for e, _ in units:
            if acc + len(e) > limit:
                break
            acc += len(e)
            keep += 1
        esc = b"".join(e for e, _ in units[:keep]) + MARKER
        dec = b"".join(d for _, d in units[:keep]) + MARKER
        assert len(esc) <= cap
    else:
        esc = b"".join(e for e, _ in units)
        dec = b"".join(d for _, d in units)
    if not esc:
        return None                   # step 4: empty means absent
    return esc, dec


def make_key_id(raw, cap=256):
    """Section 3, key_id and key2_id: lowercase hex; longer than the cap (256
    for key_id, 128 for key2_id) -> the first cap - 14 hex chars + marker.
    All ASCII / valid UTF-8 without escapes, so the escaped and decoded values
    are the same bytes."""
    h = raw.hex().encode("ascii")
    if len(h) > cap:
        h = h[:cap - 14] + MARKER
    if not h:
        return None
    return h, h

# ---------------------------------------------------------------------------
# Record construction (sections 2, 4, 5)
# ---------------------------------------------------------------------------

HASH_KEY = b',"hash":"'
HASH_MEMBER_LEN = len(HASH_KEY) + 64 + len(b'"')          # 74
PAD_OVERHEAD = len(b',"pad":""')                           # 9


def _int_text(v):
    assert isinstance(v, int) and not isinstance(v, bool)
    assert 0 <= v <= INT_MAX, v
    return str(v).encode("ascii")


class Unpaddable(Exception):
    pass


def build(version, rtype, prev, fields, compute_pad=True):
    """fields: list of (key, value) in line order; str values are bytes (the
    caller's raw bytes), int values are int.  Returns a dict with line, body,
    hash and the unpadded line length."""
    assert version in (0, 1)
    assert rtype in TYPE_CODES
    assert isinstance(prev, bytes) and len(prev) == 32
    schema = COMMON + MEMBERS[rtype]
    order = [m[0] for m in schema]
    keys = [k for k, _ in fields]
    assert len(set(keys)) == len(keys), keys
    for k in keys:
        assert k in order and k != "pad", k
    assert keys == sorted(keys, key=order.index), ("member order", keys)
    given = dict(fields)
    for key, kind, tag, cap, required in schema:
        if required:
            assert key in given, ("missing required", key)
    if rtype == "header":
        present = [k for k in PREV_KEYS if k in given]
        assert len(present) in (0, 4), ("prev_* together", present)

    # members: (key, tag, json value bytes, body value bytes)
    members = []

    def add_str(key, tag, pair):
        esc, dec = pair
        members.append((key, tag, b'"' + esc + b'"',
                        struct.pack("<I", len(dec)) + dec))

    for key, kind, tag, cap, required in schema:
        if key in given:
            val = given[key]
            if kind == "int":
                members.append((key, tag, _int_text(val), struct.pack("<Q", val)))
            elif kind == "str":
                assert isinstance(val, bytes)
                pair = make_str(val, cap)
                # the vectors list only members whose result is non-empty
                assert pair is not None, ("empty result must be absent", key)
                add_str(key, tag, pair)
            elif kind == "hex":
                assert isinstance(val, bytes)
                pair = make_key_id(val, cap)
                assert pair is not None, ("empty result must be absent", key)
                add_str(key, tag, pair)
            else:
                raise AssertionError(kind)
        if key == "seq":
            # v and type follow seq (section 2.1); they have no tag
            members.append(("v", None, _int_text(version), None))
            members.append(("type", None, b'"' + rtype.encode() + b'"', None))

    def prefix_of(ms):
        return b"{" + b",".join(b'"' + k.encode() + b'":' + j for k, _, j, _ in ms)

    unpadded_len = len(prefix_of(members)) + HASH_MEMBER_LEN + len(b"}\n")
    if rtype == "header" and compute_pad and unpadded_len < HEADER_LEN:
        n = max(1, HEADER_LEN - unpadded_len - PAD_OVERHEAD)
        dots = b"." * n
        members.append(("pad", 0x17, b'"' + dots + b'"',
                        struct.pack("<I", len(dots)) + dots))

    prefix = prefix_of(members)
    if version == 1:
        body = bytes([0x01, TYPE_CODES[rtype]]) + b"".join(
            bytes([tag]) + bv for _, tag, _, bv in members if tag is not None)
    else:
        body = prefix + b"}"
    digest = hashlib.sha256(prev + body).digest()
    line = prefix + HASH_KEY + digest.hex().encode("ascii") + b'"}\n'

    # ---- self-checks -----------------------------------------------------
    assert line.endswith(b"}\n") and line.count(b"\n") == 1
    assert b"\r" not in line
    assert len(line) <= LINE_MAX, (len(line), fields[0])
    if rtype == "header" and compute_pad:
        if unpadded_len < HEADER_LEN:
            assert len(line) == max(HEADER_LEN, unpadded_len + PAD_OVERHEAD + 1)
        else:
            assert len(line) == unpadded_len
    # v0 body: everything before ,"hash":" followed by }
    cut = line.index(HASH_KEY)
    assert line.count(HASH_KEY) == 1
    if version == 0:
        assert body == line[:cut] + b"}"
    # the line is JSON whose members are in order and carry the decoded values
    obj = json.loads(line.decode("utf-8"), object_pairs_hook=list)
    assert [k for k, _ in obj] == [k for k, _, _, _ in members] + ["hash"]
    for (k, v), (mk, tag, jv, bv) in zip(obj, members):
        if isinstance(v, int):
            assert jv == str(v).encode()
        else:
            assert v != ""
            if bv is not None:
                assert bv[4:] == v.encode("utf-8")
                assert struct.unpack("<I", bv[:4])[0] == len(bv) - 4
            # re-escaping the decoded value gives back the line's bytes
            assert b"".join(escape_cp(ord(c)) for c in v) == jv[1:-1]
    assert tuple(obj[-1]) == ("hash", digest.hex())
    return {"line": line, "body": body, "hash": digest,
            "unpadded_len": unpadded_len}

# ---------------------------------------------------------------------------
# Vector list
# ---------------------------------------------------------------------------

VECTORS = []
_NAMES = set()


def fake_prev(name):
    """A deterministic stand-in for 'the hash of the record before' when a
    vector is not part of a real chain."""
    return hashlib.sha256(b"auditlog test prev: " + name.encode()).digest()


def hex_id(label, n=32):
    return hashlib.sha256(b"auditlog test id: " + label.encode()).hexdigest()[:n].encode()


def add(name, version, rtype, fields, prev=None):
    assert name not in _NAMES, name
    _NAMES.add(name)
    if prev is None:
        seq = dict(fields)["seq"]
        prev = ZERO32 if seq == 0 else fake_prev(name)
    given = dict(fields)
    if rtype == "header":
        if "prev_hash" in given:        # section 2.3 / 5
            assert prev == bytes.fromhex(given["prev_hash"].decode())
            assert given["seq"] == given["prev_seq"] + 1
        else:
            assert prev == ZERO32 and given["seq"] == 0
    elif rtype == "recovery":           # section 2.4
        assert given["seq"] == given["last_seq"] + 1
    else:
        assert (prev == ZERO32) == (given["seq"] == 0)
    r = build(version, rtype, prev, fields)
    jf = []
    for k, v in fields:
        if isinstance(v, int):
            jf.append([k, {"int": v}])
        else:
            jf.append([k, {"str_hex": v.hex()}])
    VECTORS.append({
        "name": name,
        "version": version,
        "type": rtype,
        "prev": prev.hex(),
        "fields": jf,
        "line_hex": r["line"].hex(),
        "body_hex": r["body"].hex(),
        "hash": r["hash"].hex(),
    })
    return r


def both(name, rtype, fields, prev=None):
    for v in (1, 0):
        add("v%d-%s" % (v, name), v, rtype, fields, prev=prev)


TS = [b"2024-05-01T12:34:56.%09dZ" % i for i in range(0, 100)]


def ev(ts_i, seq, action=b"C_Sign", outcome=b"success", **opt):
    f = [("@timestamp", TS[ts_i]), ("seq", seq), ("action", action), ("outcome", outcome)]
    for key, *_ in MEMBERS["event"][2:]:
        if key in opt:
            f.append((key, opt[key]))
    unknown = set(opt) - {m[0] for m in MEMBERS["event"]}
    assert not unknown, unknown
    return f


def hdr(ts, seq, file_id, chain_id, reason, **opt):
    f = [("@timestamp", ts), ("seq", seq), ("file_id", file_id),
         ("chain_id", chain_id), ("reason", reason)]
    for key, *_ in MEMBERS["header"][3:]:
        if key in opt:
            f.append((key, opt[key]))
    unknown = set(opt) - {m[0] for m in MEMBERS["header"]}
    assert not unknown, unknown
    return f


def rec(ts, seq, last_seq, off, length, damage):
    return [("@timestamp", ts), ("seq", seq), ("last_seq", last_seq),
            ("damage_offset", off), ("damage_length", length),
            ("damage_sha256", hashlib.sha256(damage).hexdigest().encode())]


def gen():
    # ---- events: minimal, all optional, integer limits --------------------
    both("event-minimal", "event",
         [("@timestamp", b"2024-05-01T12:34:56.000000001Z"), ("seq", 1),
          ("action", b"C_Initialize"), ("outcome", b"success")])
    both("event-all-optional", "event",
         ev(2, 7, b"C_Sign", b"success", rv=b"CKR_OK", slot=0, session=0,
            mechanism=b"CKM_SHA256_RSA_PKCS", key_label=b"signing key 2024",
            key_id=bytes.fromhex("0123456789abcdef"), actor=b"user",
            detail=b"signed 32 bytes"))
    both("event-int-max", "event",
         ev(3, INT_MAX, b"C_Verify", b"failure", rv=b"CKR_SIGNATURE_INVALID",
            slot=INT_MAX, session=INT_MAX))
    add("v1-event-large-slot-session", 1, "event",
        ev(4, 4294967296, b"C_Decrypt", b"unknown", rv=b"0x80000001",
           slot=4294967295, session=281474976710655, mechanism=b"0x80000123",
           actor=b"uid:1000"))
    add("v1-event-rv-hex-10-digits", 1, "event",
        ev(5, 12, b"C_GenerateKeyPair", b"failure", rv=b"0x1000000000",
           slot=1, session=2, mechanism=b"CKM_EC_KEY_PAIR_GEN", actor=b"so"))
    add("v1-event-timestamp-extremes-1970", 1, "event",
        [("@timestamp", b"1970-01-01T00:00:00.000000000Z"), ("seq", 1),
         ("action", b"login"), ("outcome", b"success"), ("actor", b"public")])
    add("v0-event-timestamp-extremes-9999", 0, "event",
        [("@timestamp", b"9999-12-31T23:59:59.999999999Z"), ("seq", 9),
         ("action", b"logout"), ("outcome", b"success"), ("actor", b"nginx.service")])

    # ---- escaping ----------------------------------------------------------
    all_ctl = bytes(range(0x20))
    both("esc-all-controls", "event",
         ev(6, 20, b"C_Login", b"failure", detail=b"<" + all_ctl + b">"))
    add("v1-esc-controls-each-once-action", 1, "event",
        ev(7, 21, action=b"".join(bytes([c]) + b"." for c in range(0x20))))
    add("v1-esc-short-forms", 1, "event",
        ev(8, 22, b"C_Sign", b"success",
           key_label=b"tab\there\nnl\rcr\x08bs\x0cff", actor=b"\x1b[31mred\x1b[0m"))
    add("v1-esc-quote-backslash-slash", 1, "event",
         ev(9, 23, b'say "hi"', b"success",
            key_label=b'C:\\keys\\"k"/a/b', detail=b'\\"\\\\/\\/</script>'))
    add("v1-esc-del-and-printable-ascii", 1, "event",
        ev(10, 24, detail=bytes(range(0x20, 0x80))))
    multibyte = ("\u00e9 \u20ac \U0001d11e \u2028 \u2029 \U0001f600 \u0080 \u07ff "
                 "\u0800 \ud7ff \ue000 \ufeff \ufffd \uffff \U00010000 \U0010ffff"
                 ).encode("utf-8")
    both("esc-multibyte-raw", "event",
         ev(11, 25, b"C_Sign", b"success", key_label=multibyte,
            actor="h\u00e9l\u00e8ne".encode(), detail="\U0001f510\U0001f511 ok".encode()))
    add("v1-esc-line-separators", 1, "event",
        ev(12, 26, action="a\u2028b\u2029c".encode(), detail="x\u2028\u2029y".encode()))

    # ---- invalid UTF-8 -----------------------------------------------------
    inv = [
        ("lone-continuation", b"a\x80b\xbfc"),
        ("overlong-2byte", b"\xc0\x80|\xc1\xbf"),
        ("overlong-3byte", b"\xe0\x80\x80"),
        ("overlong-4byte", b"\xf0\x80\x80\x80"),
        ("surrogate", b"\xed\xa0\x80|\xed\xbf\xbf"),
        ("above-10ffff", b"\xf4\x90\x80\x80"),
        ("bytes-f5-ff", bytes(range(0xf5, 0x100))),
        ("truncated-then-ascii", b"\xe2\x82A"),
        ("truncated-at-end", b"ok \xf0\x9f\x98"),
        ("truncated-2byte-at-end", b"x\xc3"),
        ("valid-after-invalid", b"\xe2\x82\xe2\x82\xac\xc3\xc3\xa9\x80\xf0\x9f\x98\x80"),
        ("maximal-subparts-table-3-8", bytes.fromhex("61f18080e180c262806380bf64")),
        ("five-and-six-byte-forms", b"\xf8\x88\x80\x80\x80\xfc\x84\x80\x80\x80\x80"),
        ("invalid-next-to-escapes", b"\"\x80\\\xc2\n\xe0\xa0\t\xf1\x80\x80\x01"),
    ]
    for nm, raw in inv:
        add("v1-utf8-" + nm, 1, "event", ev(13, 30, detail=raw))
    add("v0-utf8-maximal-subparts-table-3-8", 0, "event",
        ev(14, 31, action=bytes.fromhex("61f18080e180c262806380bf64"),
           key_label=b"\xed\xa0\x80\xf4\x90\x80\x80"))
    add("v0-utf8-truncated-and-lone", 0, "event",
        ev(14, 32, detail=b"\xe2\x82A\x80\xbf\xf0\x9f\x98"))

    # ---- cap and cut -------------------------------------------------------
    a = b"a"
    # action, cap 128 (limit for the kept prefix: 114)
    add("v1-cut-action-exact-cap", 1, "event", ev(15, 40, action=a * 126 + b"\n"))
    add("v1-cut-action-cap-plus-1", 1, "event", ev(15, 41, action=a * 129))
    add("v1-cut-action-multibyte-straddle", 1, "event",
        ev(15, 42, action=a * 113 + "\u20ac".encode() + a * 20))
    add("v1-cut-action-u00xx-straddle", 1, "event",
        ev(15, 43, action=a * 110 + b"\x01" + a * 20))
    add("v1-cut-action-quote-straddle", 1, "event",
        ev(15, 44, action=a * 113 + b'"' + a * 20))
    add("v1-cut-action-unit-ends-at-limit", 1, "event",
        ev(15, 45, action=a * 112 + b'"' + a * 20))
    add("v1-cut-action-raw-short-escaped-long", 1, "event",
        ev(15, 46, action=b"\x01" * 100))
    add("v1-cut-action-invalid-expands", 1, "event",
        ev(15, 47, action=b"\x80" * 128))
    add("v0-cut-action-multibyte-straddle", 0, "event",
        ev(15, 48, action=a * 112 + "\U0001f600".encode() + a * 20))
    # key_label, cap 512 (limit 498)
    add("v1-cut-key-label-exact-cap", 1, "event",
        ev(16, 50, key_label="\u20ac".encode() * 170 + b"\\"))
    add("v1-cut-key-label-cap-plus-1", 1, "event", ev(16, 51, key_label=a * 513))
    add("v1-cut-key-label-4byte-straddle", 1, "event",
        ev(16, 52, key_label=a * 497 + "\U0001f600".encode() + a * 30))
    # actor, cap 128
    add("v1-cut-actor-exact-cap", 1, "event", ev(17, 53, actor=b"u" * 128))
    add("v1-cut-actor-cap-plus-1", 1, "event", ev(17, 54, actor=b"u" * 127 + b"\t"))
    # detail, cap 4096 (limit 4082)
    add("v1-cut-detail-exact-cap", 1, "event", ev(18, 55, detail=b"d" * 4090 + b"\x1f"))
    add("v1-cut-detail-cap-plus-1", 1, "event", ev(18, 56, detail=b"d" * 4097))
    add("v1-cut-detail-u00xx-straddle", 1, "event",
        ev(18, 57, detail=b"d" * 4079 + b"\x00" + b"d" * 10))
    pattern = ("Lorem ipsum \u00e9\u20ac\U0001f600 \"q\" \\ /\t".encode() + b"\x80\x00")
    big = (pattern * (102400 // len(pattern) + 1))[:102400]
    assert len(big) == 102400
    both("cut-detail-100kib", "event", ev(18, 58, detail=big))
    add("v1-cut-all-caps-maxed", 1, "event",
        ev(19, 59, action=b"A" * 200, outcome=b"failure", rv=b"CKR_GENERAL_ERROR",
           slot=3, session=4, mechanism=b"CKM_AES_GCM", key_label=b"L" * 600,
           key_id=b"\xab" * 200, actor=b"\x01" * 50, detail=b"\"" * 3000))

    # ---- key_id ------------------------------------------------------------
    add("v1-keyid-empty-absent", 1, "event",
        ev(20, 60, key_label=b"no id"))       # caller gave key_id = "" -> absent
    add("v1-keyid-1-byte", 1, "event", ev(20, 61, key_id=b"\x00"))
    add("v1-keyid-128-bytes", 1, "event", ev(20, 62, key_id=bytes(range(128))))
    add("v1-keyid-129-bytes", 1, "event", ev(20, 63, key_id=bytes(range(129))))
    add("v1-keyid-10kib", 1, "event",
        ev(20, 64, key_id=bytes(i & 0xff for i in range(10240))))

    # ---- key2_label / key2_id: the second key of a derive, wrap, unwrap ----
    both("event-two-keys", "event",
         ev(21, 70, b"C_DeriveKey", b"success", rv=b"CKR_OK", slot=0, session=1,
            mechanism=b"CKM_ECDH1_DERIVE", key_label=b"ec base", key_id=b"\x01",
            key2_label=b"derived aes", key2_id=b"\x02\x03", actor=b"user"))
    add("v1-key2-only-id", 1, "event",
        ev(21, 71, b"C_UnwrapKey", b"success", key_label=b"kek", key2_id=b"\xff"))
    add("v1-key2id-64-bytes", 1, "event", ev(21, 72, key2_id=bytes(range(64))))
    add("v1-key2id-65-bytes", 1, "event", ev(21, 73, key2_id=bytes(range(65))))
    add("v1-key2-label-cap-plus-1", 1, "event",
        ev(21, 74, key2_label=b"w" * 257, key2_id=b"\xab" * 1000))
    add("v1-key2-label-escape-straddle", 1, "event",
        ev(21, 75, key2_label=b"w" * 241 + b"\x01" + b"w" * 20))
    # every member at its cap: the longest event line (section 8)
    add("v1-cut-all-caps-maxed-two-keys", 1, "event",
        ev(22, INT_MAX, action=b"\x01" * 200, outcome=b"unknown", rv=b"\x01" * 64,
           slot=INT_MAX, session=INT_MAX, mechanism=b"\x01" * 64,
           key_label=b"\x01" * 600, key_id=b"\xab" * 200, key2_label=b"\x01" * 300,
           key2_id=b"\xab" * 100, actor=b"\x01" * 50, detail=b"\x01" * 5000))

    # ---- headers -----------------------------------------------------------
    tsh = b"2024-06-01T00:00:00.000000000Z"
    both("header-new", "header",
         hdr(tsh, 0, hex_id("f-new"), hex_id("c-1"), b"new"))
    prev_hash = hashlib.sha256(b"previous record").digest()
    rot = hdr(tsh, 1001, hex_id("f-rot"), hex_id("c-1"), b"rotate",
              prev_name=b"audit.log.20240601T000000.000000000Z-0",
              prev_seq=1000, prev_hash=prev_hash.hex().encode(), prev_size=1048576)
    add("v1-header-rotate", 1, "header", rot, prev=prev_hash)
    add("v0-header-rotate", 0, "header", rot, prev=prev_hash)
    ioe = hdr(tsh, 77, hex_id("f-ioe"), hex_id("c-2"), b"io-error",
              prev_name=b"audit.log.20240601T000000.000000000Z-5",
              prev_seq=76, prev_hash=prev_hash.hex().encode(), prev_size=40960)
    add("v1-header-io-error", 1, "header", ioe, prev=prev_hash)
    # io-error after a file whose first batch (its header) failed: the sealed
    # file is named by sealed_name / sealed_file_id (section 2.3)
    ioes = hdr(tsh, 77, hex_id("f-ioe2"), hex_id("c-2"), b"io-error",
               prev_name=b"audit.log.20240601T000000.000000000Z-5",
               prev_seq=76, prev_hash=prev_hash.hex().encode(), prev_size=40960,
               sealed_name=b"audit.log.20240601T000001.000000000Z-77",
               sealed_file_id=hex_id("f-sealed"),
               detail=b"write or fdatasync failed")
    both("header-io-error-sealed", "header", ioes, prev=prev_hash)
    # untrusted-tail: new chain, seq 0, no prev_*, with a detail
    ut = hdr(tsh, 0, hex_id("f-ut"), hex_id("c-3"), b"untrusted-tail",
             detail=b"last record of audit.log.20240601T000000.000000000Z-9000 is "
                    b"3601 s in the future")
    both("header-untrusted-tail-detail", "header", ut)
    add("v1-header-detail-escapes", 1, "header",
        hdr(tsh, 0, hex_id("f-de"), hex_id("c-4"), b"untrusted-tail",
            detail=b"tail \"x\"\n\x00\x80\xe2\x82 \xe2\x80\xa6 \\ done"))

    # long prev_name: line already >= 1024 bytes, so no pad
    def rot_named(fid, name, detail=None):
        opt = dict(prev_name=name, prev_seq=41, prev_hash=prev_hash.hex().encode(),
                   prev_size=123456)
        if detail is not None:
            opt["detail"] = detail
        return hdr(tsh, 42, hex_id(fid), hex_id("c-5"), b"rotate", **opt)

    longname = b"audit-" + b"n" * 1000 + b".log"
    both("header-long-prev-name-no-pad", "header", rot_named("f-long", longname),
         prev=prev_hash)
    add("v1-header-prev-name-cut", 1, "header",
        rot_named("f-cut", b"p" * 1100), prev=prev_hash)

    # exact boundary cases for the pad: find the prev_name length that gives
    # the wanted unpadded line length
    def name_for(unpadded_target, version):
        for k in range(1, 1100):
            f = rot_named("f-b", b"q" * k)
            u = build(version, "header", prev_hash, f, compute_pad=False)["unpadded_len"]
            if u == unpadded_target:
                return b"q" * k
        raise AssertionError(unpadded_target)

    for v in (1, 0):
        add("v%d-header-exactly-1024-unpadded" % v, v, "header",
            rot_named("f-1024", name_for(HEADER_LEN, v)), prev=prev_hash)
        add("v%d-header-pad-one-dot" % v, v, "header",
            rot_named("f-1014", name_for(HEADER_LEN - PAD_OVERHEAD - 1, v)),
            prev=prev_hash)
        # 1015 <= L <= 1023: one dot, the line comes out L + 10 bytes
        add("v%d-header-pad-gap-1015" % v, v, "header",
            rot_named("f-1015", name_for(HEADER_LEN - PAD_OVERHEAD, v)), prev=prev_hash)
        add("v%d-header-pad-gap-1023" % v, v, "header",
            rot_named("f-1023", name_for(HEADER_LEN - 1, v)), prev=prev_hash)

    # ---- recovery ----------------------------------------------------------
    damage = b'{"@timestamp":"2024-06-02T00:00:00.0000' + bytes(4096)
    both("recovery", "recovery",
         rec(b"2024-06-02T00:00:01.000000000Z", 501, 500, 300000, len(damage), damage))
    add("v1-recovery-after-header", 1, "recovery",
        rec(b"2024-06-02T00:00:01.000000000Z", 1, 0, 1024, 7, b"\x00" * 7))
    add("v1-recovery-large-values", 1, "recovery",
        rec(b"2024-06-02T00:00:01.000000000Z", 9007199254740000, 9007199254739999,
            2 ** 40, 2 * 1048576 + 8192, b"x"))

    # ---- a chain of 4 records (v0 then v1: versions never decrease) -------
    chain_id = hex_id("chain")
    r0 = add("chain-0", 0, "header",
             hdr(b"2024-07-01T08:00:00.000000000Z", 0, hex_id("chain-f1"), chain_id, b"new"),
             prev=ZERO32)
    r1 = add("chain-1", 0, "event",
             [("@timestamp", b"2024-07-01T08:00:01.000000000Z"), ("seq", 1),
              ("action", b"C_OpenSession"), ("outcome", b"success"), ("rv", b"CKR_OK"),
              ("slot", 0), ("session", 1), ("actor", b"user")], prev=r0["hash"])
    r2 = add("chain-2", 1, "event",
             [("@timestamp", b"2024-07-01T08:00:02.000000000Z"), ("seq", 2),
              ("action", b"C_Sign"), ("outcome", b"success"), ("rv", b"CKR_OK"),
              ("slot", 0), ("session", 1), ("mechanism", b"CKM_ECDSA"),
              ("key_label", b"k1"), ("key_id", b"\x01\x02"), ("actor", b"user")],
             prev=r1["hash"])
    # prev_size: the rotated file holds exactly chain-0..chain-2
    size = len(r0["line"]) + len(r1["line"]) + len(r2["line"])
    add("chain-3", 1, "header",
        hdr(b"2024-07-01T08:00:03.000000000Z", 3, hex_id("chain-f2"), chain_id, b"rotate",
            prev_name=b"audit.log.20240701T080003.000000000Z-0",
            prev_seq=2, prev_hash=r2["hash"].hex().encode(), prev_size=size),
        prev=r2["hash"])


def selftest_repair():
    """Known answers for the repair step (section 3 step 1)."""
    F = 0xFFFD
    cases = [
        (b"\x80", [F]), (b"\xbf", [F]),
        (b"\xc0\x80", [F, F]), (b"\xc1\xbf", [F, F]),
        (b"\xe0\x80\x80", [F, F, F]), (b"\xed\xa0\x80", [F, F, F]),
        (b"\xf4\x90\x80\x80", [F, F, F, F]),
        (b"\xe2\x82A", [F, 0x41]), (b"\xf0\x9f\x98", [F]),
        (bytes.fromhex("61f18080e180c262806380bf64"),
         [0x61, F, F, F, 0x62, F, 0x63, F, F, 0x64]),
        (b"\xe0\xa0\x80", [0x800]), (b"\xed\x9f\xbf", [0xD7FF]),
        (b"\xf4\x8f\xbf\xbf", [0x10FFFF]), (b"\xf0\x90\x80\x80", [0x10000]),
        (b"\xc2\x80", [0x80]), (b"\xdf\xbf", [0x7FF]),
    ]
    for raw, want in cases:
        got = utf8_repair(raw)
        assert got == want, (raw, got, want)
    for b in range(0xf5, 0x100):
        assert utf8_repair(bytes([b])) == [F]


def main():
    selftest_repair()
    gen()
    out = {"spec": "docs/format.md", "vectors": VECTORS}
    sys.stdout.write(json.dumps(out, indent=1, sort_keys=False, ensure_ascii=True))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

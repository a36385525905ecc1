#!/usr/bin/env python3
"""Check the key files auditlog-keygen made against docs/format.md 16-17.

Written from docs/format.md (sections 16.1, 16.3, 16.4, 17, 20.2), not from
the C.  The spec's functions (the key tree, the covering set, the key id,
Ed25519, the host id rule) are gen_v2_vectors.py's, imported, so there is one
reading of the spec in python.

Usage:
  check_keys.py --state F --signing-key F --pubkey F --verify-key F
                [--host H] [--delta NS] [--max-jump N] [--t0 NS | --t0-range LO HI]
                [--summary FILE]
      every file exactly as section 17 says, the four consistent with each
      other and with the expected parameters; modes 0600 / 0644; the state
      at epoch 0 of this boot.  --summary: auditlog-keygen's summary agrees.
  check_keys.py --note-key LINE --chain ID --pubkey F
      LINE is the C2SP note verifier key of chain ID (section 20.2).
Exit 0 when everything holds, 1 (with the reasons on stderr) otherwise.
"""

import argparse
import os
import re
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_v2_vectors import (H, b64, covering_seeds, ed_pub, key_id,  # noqa: E402
                            HOST_RE)

U64 = 2 ** 64 - 1
U32 = 2 ** 32 - 1
DAY_NS = 86400 * 10 ** 9

problems = []


def bad(msg):
    problems.append(msg)


# Section 17: "each a name, one space and a value", each line ended by one \n,
# nothing else; decimals without sign or leading zero, <= 2^64-1; hex lowercase.
DEC_RE = re.compile(r"(0|[1-9][0-9]*)\Z")


def dec(v):
    if not DEC_RE.match(v) or int(v) > U64:
        raise ValueError("not a decimal of section 17: %r" % v)
    return int(v)


def hexv(n):
    def conv(v):
        if not re.match(r"[0-9a-f]{%d}\Z" % (2 * n), v):
            raise ValueError("not %d lowercase hex digits: %r" % (2 * n, v))
        return bytes.fromhex(v)
    return conv


def host(v):
    if not HOST_RE.match(v):
        raise ValueError("not a host id (16.1): %r" % v)
    return v.encode()


def literal(want):
    def conv(v):
        if v != want:
            raise ValueError("wants %r, not %r" % (want, v))
        return v
    return conv


def read_lines(path, fields, extra=None):
    """fields: [(name, conv)] in order; extra(lines_left) parses what follows.
    Returns {name: value} (and "extra": extra's result)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError("%s: not ASCII" % path)
    if not text.endswith("\n") or "\r" in text:
        raise ValueError("%s: each line must end in one \\n, no CR" % path)
    lines = text[:-1].split("\n")
    out = {}
    for k, (name, conv) in enumerate(fields):
        if k >= len(lines):
            raise ValueError("%s: ends before its %r line" % (path, name))
        ln = lines[k]
        if not ln.startswith(name + " "):
            raise ValueError("%s: line %d is %r, wants %r first" % (path, k + 1, ln, name))
        try:
            out[name] = conv(ln[len(name) + 1:])
        except ValueError as e:
            raise ValueError("%s: line %d (%s): %s" % (path, k + 1, name, e))
    rest = lines[len(fields):]
    if extra:
        out["extra"] = extra(rest)
    elif rest:
        raise ValueError("%s: lines after the last one section 17 names: %r" % (path, rest[:2]))
    return out


def check_mode(path, want):
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        bad("%s: not a regular file" % path)
    if stat.S_IMODE(st.st_mode) != want:
        bad("%s: mode %04o, wants %04o" % (path, stat.S_IMODE(st.st_mode), want))


def boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return bytes.fromhex(f.read().strip().replace("-", ""))


def check_files(a):
    vk = read_lines(a.verify_key, [
        ("auditlog-verification-key", literal("2")),
        ("scheme", literal("hmac-sha256-tree32")),
        ("host", host), ("key-id", hexv(8)), ("t0", dec), ("delta", dec),
        ("seed", hexv(32))])

    def nodes(rest):
        out = []
        for ln in rest:
            m = re.match(r"node (0|[1-9][0-9]*) (0|[1-9][0-9]*) ([0-9a-f]{64})\Z", ln)
            if not m:
                raise ValueError("%s: not a node line: %r" % (a.state, ln))
            out.append((int(m.group(1)), int(m.group(2)), bytes.fromhex(m.group(3))))
        return out

    st = read_lines(a.state, [
        ("auditlog-sealing-state", literal("2")),
        ("scheme", literal("hmac-sha256-tree32")),
        ("host", host), ("key-id", hexv(8)), ("t0", dec), ("delta", dec),
        ("max-jump", dec), ("epoch", dec), ("boot-id", hexv(16)), ("boot-start", dec)],
        extra=nodes)
    pk = read_lines(a.pubkey, [("auditlog-checkpoint-key", literal("2")), ("host", host),
                               ("ed25519", hexv(32))])
    sk = read_lines(a.signing_key, [("auditlog-signing-key", literal("2")), ("host", host),
                                    ("ed25519-seed", hexv(32))])

    S = vk["seed"]
    # 16.1 and 17: delta and max-jump >= 1, epoch <= 2^32-1
    if vk["delta"] < 1:
        bad("verification key: delta 0")
    if st["max-jump"] < 1:
        bad("sealing state: max-jump 0")
    # 16.4: the key id recomputes from S and the parameters
    if key_id(S, vk["host"], vk["t0"], vk["delta"]) != vk["key-id"]:
        bad("verification key: key-id %s is not HMAC(S, ...)[0:8] of its seed and parameters"
            % vk["key-id"].hex())
    for name in ("host", "key-id", "t0", "delta"):
        if st[name] != vk[name]:
            bad("sealing state: %s %r differs from the verification key's %r"
                % (name, st[name], vk[name]))
    # 17.2 at keygen: epoch 0, exactly C(0) derived from the verification key's S
    if st["epoch"] != 0:
        bad("sealing state: epoch %d, wants 0" % st["epoch"])
    want = covering_seeds(S, 0)
    if st["extra"] != want:
        bad("sealing state: the node lines are not C(0) of the verification key's seed "
            "(%d lines, wants %d)" % (len(st["extra"]), len(want)))
    if any(d == 0 for d, _, _ in st["extra"]):
        bad("sealing state: holds the root S itself")
    # 17.2: this boot's id; boot-start is CLOCK_BOOTTIME when epoch 0 began
    # (t0), so boot clock and wall clock agree on the time since t0
    if st["boot-id"] != boot_id():
        bad("sealing state: boot-id %s is not this boot's %s" % (st["boot-id"].hex(), boot_id().hex()))
    b = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    W = time.time_ns()
    skew = (b - st["boot-start"]) - (W - st["t0"])
    if st["boot-start"] > b or abs(skew) > 10 ** 9:
        bad("sealing state: boot-start %d does not put t0 on this boot's clock (boot clock %d, "
            "wall %d, t0 %d: off by %d ns)" % (st["boot-start"], b, W, st["t0"], skew))
    # 17.3: one host; the public key is the signing seed's (RFC 8032)
    for name, k in (("checkpoint key", pk), ("signing key", sk)):
        if k["host"] != vk["host"]:
            bad("%s: host %r, the verification key's is %r" % (name, k["host"], vk["host"]))
    if ed_pub(sk["ed25519-seed"]) != pk["ed25519"]:
        bad("checkpoint key: ed25519 is not the public key of the signing key's seed")
    if sk["ed25519-seed"] == S:
        bad("the signing seed equals S")
    # expected parameters
    if a.host is not None and vk["host"] != a.host.encode():
        bad("host %r, wants %r" % (vk["host"], a.host))
    if a.delta is not None and vk["delta"] != a.delta:
        bad("delta %d, wants %d" % (vk["delta"], a.delta))
    mj = a.max_jump if a.max_jump is not None else max(1, 366 * DAY_NS // vk["delta"])
    if st["max-jump"] != mj:
        bad("max-jump %d, wants %d" % (st["max-jump"], mj))
    if a.t0 is not None and vk["t0"] != a.t0:
        bad("t0 %d, wants %d" % (vk["t0"], a.t0))
    if a.t0_range and not a.t0_range[0] <= vk["t0"] <= a.t0_range[1]:
        bad("t0 %d outside [%d, %d]" % (vk["t0"], a.t0_range[0], a.t0_range[1]))
    # modes: secrets 0600, the public key 0644 (section 17)
    for p in (a.state, a.signing_key, a.verify_key):
        check_mode(p, 0o600)
    check_mode(a.pubkey, 0o644)
    if a.summary:
        check_summary(a.summary, vk, st, pk["ed25519"])


def check_summary(path, vk, st, pub):
    with open(path) as f:
        lines = f.read().split("\n")

    def value(name):
        got = [ln[len(name) + 1:] for ln in lines if ln.startswith(name + " ")]
        if len(got) != 1:
            bad("summary: %d %r lines" % (len(got), name))
            return ""
        return got[0]

    h = vk["host"].decode()
    if value("host") != h:
        bad("summary: host %r" % value("host"))
    if value("key-id") != vk["key-id"].hex():
        bad("summary: key-id %r, the file's is %s" % (value("key-id"), vk["key-id"].hex()))
    if value("t0").split(" ")[0] != str(vk["t0"]):
        bad("summary: t0 %r" % value("t0"))
    if value("delta").split(" ")[0] != str(vk["delta"]):
        bad("summary: delta %r" % value("delta"))
    if value("max-jump").split(" ")[0] != str(st["max-jump"]):
        bad("summary: max-jump %r" % value("max-jump"))
    if value("origin") != h + "/auditlog/<chain-id>":
        bad("summary: origin %r" % value("origin"))
    want = "%s/auditlog/<chain-id>+<note-key-id>+%s" % (h, b64(b"\x01" + pub))
    if value("note-key") != want:
        bad("summary: note-key %r, wants %r" % (value("note-key"), want))


def check_note_key(a):
    pk = read_lines(a.pubkey, [("auditlog-checkpoint-key", literal("2")), ("host", host),
                               ("ed25519", hexv(32))])
    origin = pk["host"] + b"/auditlog/" + a.chain.encode()
    # 20.2: key id = H(origin || 0x0A || 0x01 || public key)[0:4]
    kid = H(origin + b"\n\x01" + pk["ed25519"])[:4]
    want = "%s+%s+%s" % (origin.decode(), kid.hex(), b64(b"\x01" + pk["ed25519"]))
    if a.note_key != want:
        bad("note key %r, wants %r" % (a.note_key, want))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state")
    ap.add_argument("--signing-key")
    ap.add_argument("--pubkey", required=True)
    ap.add_argument("--verify-key")
    ap.add_argument("--host")
    ap.add_argument("--delta", type=int)
    ap.add_argument("--max-jump", type=int)
    ap.add_argument("--t0", type=int)
    ap.add_argument("--t0-range", type=int, nargs=2)
    ap.add_argument("--summary")
    ap.add_argument("--note-key")
    ap.add_argument("--chain")
    a = ap.parse_args()
    try:
        if a.note_key is not None:
            check_note_key(a)
        else:
            if not (a.state and a.signing_key and a.verify_key):
                ap.error("--state, --signing-key and --verify-key are needed")
            check_files(a)
    except (ValueError, OSError) as e:
        bad(str(e))
    for p in problems:
        sys.stderr.write("check_keys: %s\n" % p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

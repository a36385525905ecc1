#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An independent v2 log writer for the verifier's tests (docs/format.md Part II).

Written from docs/format.md, not from the C: it builds the records with the
spec-derived functions of gen_v2_vectors.py (bodies, chain step, seal keys,
MACs, compact ranges, notes) and shapes chains as the writer decisions of
issue 12 say: a header and a tree, an `open` seal naming the chain's last
seal, batches of events each ended by a `batch` seal (split at an epoch
boundary), `tree` records every max_batch_bytes/2 bytes, checkpoints every N
records and at close, `idle` seals, a `close` seal.

A log is a script of operations; the attacks replay a script with edits and
with what the attacker holds (the sealing state from some epoch on, the
signing key, or neither), so the MACs and signatures an attacker cannot make
stay those of the honest log.

Use as a module (tests/v2_tamper.py), or:
    v2log.py DIR [RECORDS [PER_BATCH [CKPT]]]
        an honest log DIR/audit.log of about RECORDS records (batches of
        PER_BATCH events, default 64; a checkpoint every CKPT records, default
        100000), its key files DIR/vkey and DIR/pubkey, and DIR/witness (its
        checkpoints' notes)
"""
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_v2_vectors as V  # noqa: E402
import gen_vectors as G  # noqa: E402

T0 = V.T0
DELTA = V.DELTA


class Keys:
    """A host's seal key (16) and checkpoint key pair (17.3)."""

    def __init__(self, label, host=V.HOST, t0=T0, delta=DELTA):
        self.S = V.H(b"v2log seal seed " + label)
        self.sign_seed = V.H(b"v2log signing seed " + label)
        self.host, self.t0, self.delta = host, t0, delta
        self.kid = V.key_id(self.S, host, t0, delta)
        self._mk = {}

    def mac_key(self, e):
        if e not in self._mk:
            self._mk[e] = V.mac_key(self.S, e)
        return self._mk[e]

    def epoch(self, ns):
        return (ns - self.t0) // self.delta

    def vkey_text(self):  # 17.1
        return ("auditlog-verification-key 2\nscheme hmac-sha256-tree32\nhost %s\nkey-id %s\n"
                "t0 %d\ndelta %d\nseed %s\n" % (self.host.decode(), self.kid.hex(), self.t0,
                                                self.delta, self.S.hex())).encode()

    def pubkey_text(self):  # 17.3
        return ("auditlog-checkpoint-key 2\nhost %s\ned25519 %s\n"
                % (self.host.decode(), V.ed_pub(self.sign_seed).hex())).encode()


class Holder:
    """What the party writing holds: `seal_from` = the sealing state of that
    epoch (every epoch >= it; 0: all of them, the honest writer), or None;
    `sign` = the checkpoint signing key. What it lacks is taken from `orig`
    (the honest log's record at the same seq), or zeros."""

    def __init__(self, keys, seal_from=0, sign=True, orig=None, sign_keys=None):
        self.keys, self.seal_from, self.sign, self.orig = keys, seal_from, sign, orig
        self.sign_keys = sign_keys or keys  # whose signing key (another: a forger's)


class Log:
    def __init__(self, keys, label=b"a", holder=None, max_batch_bytes=4096, ckpt_records=16, out=None):
        self.k = keys
        self.h = holder or Holder(keys)
        self.chain_id = hashlib.sha256(b"v2log chain " + label).hexdigest()[:32].encode()
        self.file_id = hashlib.sha256(b"v2log file " + label).hexdigest()[:32].encode()
        self.origin = keys.host + b"/auditlog/" + self.chain_id
        self.max_batch_bytes, self.ckpt_records = max_batch_bytes, ckpt_records
        self.lines, self.recs, self.ops = [], [], []
        self.prev, self.seq, self.last_ns = bytes(32), 0, 0
        self.first_seq, self.cr, self.sz = None, [], []
        self.last_seal = None          # (seq, kind)
        self.notes = []                # checkpoint notes written, in order
        self.since_tree = 0            # bytes since the last tree or checkpoint
        self.since_ckpt = 0            # records since the last checkpoint
        self.out = out                 # a file: lines go there, no script or records kept
        self.splits = []               # line indexes where a rotated file starts

    # ---- one record ---------------------------------------------------------

    def add(self, rtype, ns, fields, caller=(), epoch=None, version=2):
        """fields: (key, raw value) in line order. Returns the line."""
        if self.out is None:
            self.ops.append(("add", rtype, ns, list(fields), list(caller), epoch, version))
        ns = max(ns, self.last_ns)
        self.last_ns = ns
        ts = V.ts_text(ns)
        seq = self.seq
        if version < 2:
            r = G.build(version, rtype, self.prev, [("@timestamp", ts), ("seq", seq)] + list(fields))
            return self._put(rtype, seq, ts, r["line"], r["hash"], version, {})
        members = []   # (key, kind, decoded|int, json)
        for k, v in fields:
            kind, _, cap = V.TAGS[k]
            if kind == "int":
                members.append((k, "int", v, str(v).encode()))
            elif kind == "hex":
                s = V.make_key_id(v)
                members.append((k, "str", s[1], V.jstr(s[0])))
            else:
                s = V.make_str(v, cap)
                members.append((k, "str", s[1], V.jstr(s[0])))
        cf = V.caller_fields(list(caller)) if caller else []

        def line_of(ms, hsh):
            out = (b'{"@timestamp":"' + ts + b'","seq":' + str(seq).encode() +
                   b',"v":2,"type":"' + rtype.encode() + b'"')
            for k, _, _, j in ms:
                out += b',"' + k.encode() + b'":' + j
            for k, _, j, _ in cf:
                out += b',"' + k + b'":' + j
            return out + b',"hash":"' + hsh + b'"}\n'

        if rtype == "header":  # 2.3: padded to 1024 bytes
            L = len(line_of(members, b"0" * 64))
            if L < 1024:
                dots = b"." * max(1, 1015 - L)
                members.append(("pad", "str", dots, V.jstr(dots)))
        if rtype == "seal":  # 19.3
            sbody = V.v2_body(rtype, [(k, kd, v) for k, kd, v, _ in members], [])
            mac_in = V.L_SEAL + b"\x00" + self.prev + V.le64(seq) + ts + sbody
            if self.h.seal_from is not None and epoch >= self.h.seal_from:
                mac = V.HMAC(self.h.keys.mac_key(epoch), mac_in).hex().encode()
            else:
                mac = self._orig(seq, "mac") or b"0" * 64
            members.append(("mac", "str", mac, V.jstr(mac)))
        body = V.v2_body(rtype, [(k, kd, v) for k, kd, v, _ in members], cf)
        _, hsh = V.chain_step(self.prev, seq, ts, V.H(body))
        line = line_of(members, hsh.hex().encode())
        assert len(line) <= 8192
        return self._put(rtype, seq, ts, line, hsh, 2, dict((m[0], m[2]) for m in members))

    def _orig(self, seq, key):
        o = self.h.orig
        if o is None or seq >= len(o.recs):
            return None
        return o.recs[seq]["members"].get(key)

    def _put(self, rtype, seq, ts, line, hsh, version, members):
        if self.out is not None:
            self.out.write(line)
        else:
            self.lines.append(line)
            self.recs.append({"type": rtype, "seq": seq, "ts": ts, "hash": hsh, "v": version,
                              "members": members, "line": line})
        if version == 2 and self.first_seq is None:
            self.first_seq = seq
        if self.first_seq is not None:  # (a v1 record after: a downgrade, as a leaf)
            self.cr, self.sz = V.range_append(self.cr, self.sz, hsh)
        self.prev, self.seq = hsh, seq + 1
        self.since_tree += len(line)
        self.since_ckpt += 1
        if rtype == "seal":
            self.last_seal = (seq, members["kind"].decode())
        return line

    # ---- tree, checkpoint, seal (18, 20, 19) -------------------------------

    def tree_fields(self):
        n = self.seq - self.first_seq
        return [("size", n), ("first_seq", self.first_seq),
                ("range", b"".join(c.hex().encode() for c in self.cr))]

    def note_for(self, text):
        """20.2: the signed note, or what the holder cannot sign: the honest one"""
        if self.h.sign:
            seed = self.h.sign_keys.sign_seed
            pub = V.ed_pub(seed)
            kid = V.H(self.origin + b"\n\x01" + pub)[:4]
            return (text + b"\n" + "\u2014 ".encode() + self.origin + b" " +
                    V.b64(kid + V.ed_sign(seed, text)).encode() + b"\n")
        return self._orig(self.seq, "note") or (text + b"\n")

    def tree(self, ns):
        self.since_tree = 0
        return self.add("tree", ns, self.tree_fields())

    def checkpoint(self, ns):
        n = self.seq - self.first_seq
        text = (self.origin + b"\n" + str(n).encode() + b"\n" +
                V.b64(V.range_root(self.cr)).encode() + b"\n" +
                b"seq %d\n" % (self.seq - 1) + b"head " + self.prev.hex().encode() + b"\n" +
                b"first-seq %d\n" % self.first_seq)
        note = self.note_for(text)
        self.since_tree = 0
        line = self.add("checkpoint", ns, self.tree_fields() + [("note", note)])
        self.since_ckpt = 0
        self.notes.append(note)
        return line

    def seal(self, kind, ns, epoch=None, prev=None, keys=None, chain_id=None):
        """prev: (seq, kind) an open seal names; default the chain's last seal"""
        epoch = self.k.epoch(ns) if epoch is None else epoch
        k = keys or self.k
        f = [("kind", kind.encode()), ("epoch", epoch), ("seal_key", k.kid.hex().encode()),
             ("chain_id", chain_id or self.chain_id)]
        prev = self.last_seal if prev is None and kind == "open" else prev
        if kind == "open" and prev:
            f += [("prev_seal", prev[0]), ("prev_kind", prev[1].encode())]
        return self.add("seal", ns, f, epoch=epoch)

    # ---- a writer's life (issue 12 decisions 1-5) -------------------------

    def open(self, ns):
        if self.seq == 0:
            self.add("header", ns, [("file_id", self.file_id), ("chain_id", self.chain_id),
                                    ("reason", b"new")])
            self.tree(ns)
        self.seal("open", ns)

    def event(self, ns, action=b"login", outcome=b"success", caller=((b"user.name", b"alice"),)):
        return self.add("event", ns, [("action", action), ("outcome", outcome),
                                      ("actor", b"sshd")], caller=caller)

    def token_event(self, ns, i):
        """the shape of the benchmarks' events (a token's C_Sign and the like)"""
        k = i % 4
        return self.add("event", ns, [
            ("action", [b"C_Sign", b"C_Verify", b"C_Encrypt", b"C_Decrypt"][k]),
            ("outcome", b"success"), ("rv", b"CKR_OK"), ("slot", 0), ("session", 1 + i % 4),
            ("mechanism", [b"CKM_ECDSA", b"CKM_ECDSA", b"CKM_AES_GCM", b"CKM_AES_GCM"][k]),
            ("key_label", [b"payments-signing-key", b"release-code-signing-rsa3072",
                           b"customer-data-aes256-gcm", b"tls-frontend-ecdsa-p256"][k]),
            ("key_id", bytes([0x7b, 0x42, 0x10, 0xd3, 0x88, 0x05, 0, k])), ("actor", b"user")])

    def batch(self, times, **kw):
        """events at the given times, split at epoch boundaries; tree and
        checkpoint when due; the batch seal"""
        e = None
        for ns in times:
            if e is not None and self.k.epoch(ns) != e:
                self.seal("batch", self.last_ns, e)
            e = self.k.epoch(ns)
            self.event(ns, **kw)
        ns = self.last_ns
        if self.since_ckpt >= self.ckpt_records:
            self.checkpoint(ns)
        elif self.since_tree > self.max_batch_bytes // 2:
            self.tree(ns)
        self.seal("batch", ns, self.k.epoch(ns))

    def idle(self, ns):
        self.seal("idle", ns)

    def close(self, ns):
        self.checkpoint(ns)
        self.seal("close", ns)

    def rotate(self, ns):
        """6: the next file starts here: its header (reason rotate, prev_*
        naming the file before), a tree (decision 2), the batch's seal"""
        start = self.splits[-1] if self.splits else 0
        prev_name = self.file_name(len(self.splits))
        prev_size = len(b"".join(self.lines[start:]))
        self.splits.append(len(self.lines))
        self.add("header", ns, [("file_id", hashlib.sha256(self.file_id + b"%d" % self.seq).hexdigest()[:32]
                                 .encode()), ("chain_id", self.chain_id), ("reason", b"rotate"),
                                ("prev_name", prev_name.encode()), ("prev_seq", self.seq - 1),
                                ("prev_hash", self.prev.hex().encode()), ("prev_size", prev_size)])
        self.tree(ns)
        self.seal("batch", ns)

    def file_name(self, k):
        """the name file k (0: the first) has once the next one exists"""
        start = ([0] + self.splits)[k]
        rec = self.recs[start]
        t = rec["ts"].decode().replace("-", "").replace(":", "")
        return "audit.log.%s-%d" % (t, rec["seq"])

    def write_dir(self, d):
        """the files: rotated ones under their rotated names, the last as audit.log"""
        bounds = [0] + self.splits + [len(self.lines)]
        names = []
        for k in range(len(bounds) - 1):
            name = "audit.log" if k == len(bounds) - 2 else self.file_name(k)
            with open(os.path.join(d, name), "wb") as f:
                f.write(b"".join(self.lines[bounds[k]:bounds[k + 1]]))
            names.append(name)
        return names

    def text(self):
        return b"".join(self.lines)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.text())


def replay(log, holder, edit=None, upto=None, stale_trees=False):
    """The log's script again, as `holder` writes it; edit(i, op) returns the
    op to use (or None to drop it); upto: the number of ops replayed;
    stale_trees: tree records keep the original's members (not recomputed)."""
    out = Log(log.k, holder=holder, max_batch_bytes=log.max_batch_bytes,
              ckpt_records=log.ckpt_records)
    out.chain_id, out.file_id, out.origin = log.chain_id, log.file_id, log.origin
    for i, op in enumerate(log.ops[:upto]):
        op = edit(i, op) if edit else op
        if op is None:
            continue
        _, rtype, ns, fields, caller, epoch, version = op
        if rtype == "seal":   # the fields' chain and key as written
            out.add(rtype, ns, fields, epoch=epoch, version=version)
        elif rtype == "tree" and stale_trees:
            m = log.recs[i]["members"]
            out.add("tree", ns, [("size", m["size"]), ("first_seq", m["first_seq"]),
                                 ("range", m["range"])])
        elif rtype in ("tree", "checkpoint"):  # what the new chain gives
            if rtype == "tree":
                out.tree(ns)
            else:
                out.checkpoint(ns)
        else:
            out.add(rtype, ns, fields, caller, epoch, version)
    return out


def honest(keys=None, label=b"a", lives=2, per_batch=3, batches=6, start_epoch=1):
    """A chain of `lives` writer lives: open, batches (some crossing epoch
    boundaries, with idle seals between), close."""
    keys = keys or Keys(b"host a")
    log = Log(keys, label)
    ns = T0 + start_epoch * DELTA + 1000
    for life in range(lives):
        log.open(ns)
        for b in range(batches):
            times = [ns + i * (DELTA // 4) for i in range(per_batch)]
            log.batch(times)
            ns = times[-1] + DELTA // 3
            if b % 3 == 2:
                ns += DELTA // 2
                log.idle(ns)
        log.close(ns)
        ns += 5 * DELTA
    return log


def main():
    if not 2 <= len(sys.argv) <= 5:
        sys.stderr.write(__doc__)
        return 2
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    per = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    ckpt = int(sys.argv[4]) if len(sys.argv) > 4 else 100000
    keys = Keys(b"host a")
    out = open(os.path.join(d, "audit.log"), "wb")
    log = Log(keys, b"a", max_batch_bytes=1 << 20, ckpt_records=ckpt, out=out)
    ns = T0 + DELTA
    log.open(ns)
    i = 0
    while log.seq < n:  # batches of token-shaped events, 8 batches an epoch
        e = keys.epoch(ns)
        for j in range(per):
            log.token_event(ns + j * 1000, i)
            i += 1
        ns += per * 1000
        if log.since_ckpt >= log.ckpt_records:
            log.checkpoint(ns)
        elif log.since_tree > log.max_batch_bytes // 2:
            log.tree(ns)
        log.seal("batch", ns, e)
        ns += DELTA // 8
    log.close(ns)
    out.close()
    with open(os.path.join(d, "vkey"), "wb") as f:
        f.write(keys.vkey_text())
    with open(os.path.join(d, "pubkey"), "wb") as f:
        f.write(keys.pubkey_text())
    with open(os.path.join(d, "witness"), "wb") as f:
        f.write(b"".join(log.notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())

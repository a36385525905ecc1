#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""auditlog-verify --emit --format raw|ecs|ocsf (issue 14).

Real logs from tests/emit_writer.c (a token-shaped v2 log with auditlog-keygen's
keys: header, seal, tree, checkpoint and event records, caller-defined fields,
hostile strings; a v1 log with a crash's recovery record; a clock record made
by the independent writer of tests/vectors/v2log.py) are emitted in each
format. Every output line must be one JSON object (python's json), and each is
compared, whole, with the object this file builds from the raw line by the
mappings of docs/siem.md 2 (ECS) and 8 (OCSF 1.1.0), written from that text.
raw must be the verified lines, byte for byte. Usage errors exit 2.

Then the same on the real token's trail: libsofttoken.so writing format v2,
driven by pkcs11-tool (init, login, a failed login, key and key pair
generation, a signature, a destroy). Without pkcs11-tool that part is skipped
and the test exits 77 after the rest passed.

Args: auditlog-keygen auditlog-verify emit_writer [libsofttoken.so]
"""
import calendar
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile

KEYGEN, VERIFY, WRITER = sys.argv[1:4]
MODULE = sys.argv[4] if len(sys.argv) > 4 else ""  # libsofttoken.so, when built
HERE = os.path.dirname(os.path.abspath(__file__))
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("cli_emit: FAIL:", msg, file=sys.stderr)


def run(args, want_rc=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if want_rc is not None and p.returncode != want_rc:
        fail("%s: exit %d, want %d: %s" % (" ".join(args[1:]), p.returncode, want_rc,
                                          p.stderr.decode(errors="replace")))
    return p


# ---- the mappings, from docs/siem.md ------------------------------------------

PKCS11 = ["slot", "session", "mechanism", "key_label", "key_id", "key2_label", "key2_id"]
COMMON = ["@timestamp", "seq", "v", "type", "hash"]

# docs/siem.md 2.1: the ECS fields a caller-defined field may fill, and their kinds
ECS_FIELDS = {}
for name in """client.address client.domain cloud.account.id cloud.provider cloud.region
        container.id container.name destination.address destination.domain error.id
        error.message error.type file.name file.path group.domain group.id group.name
        host.hostname host.id host.name http.request.id http.request.method log.level
        log.logger network.protocol network.transport network.type organization.id
        organization.name process.command_line process.executable process.name
        process.title process.working_directory server.address server.domain
        service.environment service.id service.name service.type service.version
        source.address source.domain span.id tls.cipher tls.version trace.id
        transaction.id url.domain url.full url.original url.path url.query url.scheme
        user.domain user.effective.id user.effective.name user.email user.full_name
        user.hash user.id user.target.id user.target.name user_agent.original""".split():
    ECS_FIELDS[name] = "keyword"
for name in "client.ip destination.ip host.ip server.ip source.ip".split():
    ECS_FIELDS[name] = "ip"
for name in """client.port destination.port http.response.status_code process.exit_code
        process.parent.pid process.pid server.port source.port""".split():
    ECS_FIELDS[name] = "long"


def setp(obj, path, value):
    parts = path.split(".")
    for p in parts[:-1]:
        obj = obj.setdefault(p, {})
    obj[parts[-1]] = value


def fits(kind, v):
    if kind == "long":
        return isinstance(v, int)
    if kind == "keyword":
        return True
    if isinstance(v, int):
        return False
    try:
        ipaddress.ip_address(v)
        return True
    except ValueError:
        return False


def fixed_members(rec):
    """The members of the record's type, in line order (format.md 2, 12);
    caller-defined fields are the rest of an event (14)."""
    fixed = {
        "event": ["action", "outcome", "rv", "slot", "session", "mechanism", "key_label", "key_id",
                  "key2_label", "key2_id", "actor", "detail"],
        "header": ["file_id", "chain_id", "reason", "prev_name", "prev_seq", "prev_hash", "prev_size",
                   "sealed_name", "sealed_file_id", "detail", "pad"],
        "recovery": ["last_seq", "damage_offset", "damage_length", "damage_sha256"],
        "seal": ["kind", "epoch", "seal_key", "chain_id", "prev_seal", "prev_kind", "mac"],
        "checkpoint": ["size", "first_seq", "range", "note"],
        "tree": ["size", "first_seq", "range"],
        "clock": ["epoch", "expected", "wall"],
    }[rec["type"]]
    return [k for k in fixed if k in rec]


def callers(rec):
    if rec["type"] != "event" or rec["v"] < 2:
        return []
    known = set(COMMON) | set(fixed_members(rec))
    return [k for k in rec if k not in known]


def other_members(rec, mapped, chain_id):
    out = []
    for k in fixed_members(rec):
        if k in mapped or k == "pad" or (k == "chain_id" and chain_id):
            continue
        out.append(k)
    return out


def ecs(raw, rec, chain_id):
    o = {}
    o["@timestamp"] = rec["@timestamp"]
    setp(o, "ecs.version", "8.11.0")
    setp(o, "event.kind", "event" if rec["type"] == "event" else "state")
    for k in ("action", "outcome"):
        if k in rec:
            setp(o, "event." + k, rec[k])
    setp(o, "event.sequence", rec["seq"])
    setp(o, "event.hash", rec["hash"])
    setp(o, "event.original", raw)
    if "rv" in rec and rec["rv"] != "CKR_OK":
        setp(o, "error.code", rec["rv"])
    if "actor" in rec:
        setp(o, "user.name", rec["actor"])
    if "detail" in rec:
        o["message"] = rec["detail"]
    setp(o, "auditlog.type", rec["type"])
    setp(o, "auditlog.v", rec["v"])
    if chain_id:
        setp(o, "auditlog.chain_id", chain_id)
    for k in other_members(rec, {"action", "outcome", "rv", "actor", "detail"}, chain_id):
        setp(o, "auditlog." + ("pkcs11." if k in PKCS11 else "") + k, rec[k])
    for k in callers(rec):
        v = rec[k]
        if k in ECS_FIELDS and fits(ECS_FIELDS[k], v):
            setp(o, k, str(v) if isinstance(v, int) and ECS_FIELDS[k] == "keyword" else v)
            continue
        labels = o.setdefault("labels", {})
        base = k.replace(".", "_")
        name, n = base, 2
        while name in labels:
            name, n = "%s_%d" % (base, n), n + 1
        labels[name] = str(v) if isinstance(v, int) else v
    return o


KEY_LIFECYCLE = {"C_GenerateKey": 1, "C_GenerateKeyPair": 1, "C_CreateObject": 1, "C_CopyObject": 1,
                 "C_DeriveKey": 1, "C_UnwrapKey": 1, "C_WrapKey": 2, "C_SetAttributeValue": 3,
                 "C_DestroyObject": 4}
API = {"C_OpenSession": 1, "C_InitToken": 3, "C_InitPIN": 3, "C_SetPIN": 3, "C_CloseSession": 4,
       "C_CloseAllSessions": 4}
CRUD = {1: "Create", 2: "Read", 3: "Update", 4: "Delete", 99: "Other"}


def ms(ts):
    sec = calendar.timegm((int(ts[0:4]), int(ts[5:7]), int(ts[8:10]), int(ts[11:13]), int(ts[14:16]),
                           int(ts[17:19])))
    return sec * 1000 + int(ts[20:23])


def key_obj(rec, two):
    p = "key2_" if two else "key_"
    k = {"type": "key"}
    if p + "label" in rec:
        k["name"] = rec[p + "label"]
    if p + "id" in rec:
        k["uid"] = rec[p + "id"]
    if len(k) == 1:
        k["name"] = "unknown"
    return k


def ocsf(raw, rec, chain_id, version):
    o = {}
    a = rec.get("action", "")
    if rec["type"] != "event":
        cls, cat, act, cname, catname, aname = 0, 0, 99, "Base Event", "Uncategorized", "Other"
    elif a in ("C_Login", "C_Logout"):
        cls, cat, act = 3002, 3, 1 if a == "C_Login" else 2
        cname, catname, aname = "Authentication", "Identity & Access Management", ["Logon", "Logoff"][act - 1]
    elif a in KEY_LIFECYCLE:
        cls, cat, act = 3004, 3, KEY_LIFECYCLE[a]
        cname, catname, aname = "Entity Management", "Identity & Access Management", CRUD[act]
    else:
        act = API.get(a, 2 if (a.startswith("C_Get") and len(a) > 5) or
                      (a.startswith("C_Find") and len(a) > 6) else 99)
        cls, cat, cname, catname, aname = 6003, 6, "API Activity", "Application Activity", CRUD[act]
    o["activity_id"] = act
    o["activity_name"] = aname if rec["type"] == "event" else rec["type"]
    o["category_uid"] = cat
    o["category_name"] = catname
    o["class_uid"] = cls
    o["class_name"] = cname
    o["type_uid"] = cls * 100 + act
    o["type_name"] = "%s: %s" % (cname, aname)
    o["time"] = ms(rec["@timestamp"])
    sev = 3 if rec["type"] == "recovery" else 1
    o["severity_id"] = sev
    o["severity"] = "Medium" if sev == 3 else "Informational"
    if "outcome" in rec:
        st = {"success": 1, "failure": 2}.get(rec["outcome"], 0)
        o["status_id"] = st
        o["status"] = {1: "Success", 2: "Failure", 0: "Unknown"}[st]
    if "rv" in rec:
        o["status_code"] = rec["rv"]
    if "detail" in rec:
        o["message"] = rec["detail"]
    o["metadata"] = {"version": "1.1.0",
                     "product": {"name": "auditlog", "vendor_name": "auditlog", "version": version},
                     "uid": rec["hash"], "sequence": rec["seq"], "original_time": rec["@timestamp"]}
    if cls == 6003:
        o["api"] = {"operation": a}
        if a.startswith("C_") and len(a) > 2:
            o["api"]["service"] = {"name": "PKCS#11"}
        o["actor"] = {"user": {"name": rec.get("actor", "unknown")}}
        if "session" in rec:
            o["actor"]["session"] = {"uid": str(rec["session"])}
        o["src_endpoint"] = {"uid": chain_id} if chain_id else {"name": "unknown"}
        if "key_label" in rec or "key_id" in rec:
            o["resources"] = [key_obj(rec, False)]
    elif cls == 3002:
        o["user"] = {"name": rec.get("actor", "unknown")}
        o["service"] = {"name": "PKCS#11"}
        if "slot" in rec:
            o["service"]["uid"] = str(rec["slot"])
        if "session" in rec:
            o["session"] = {"uid": str(rec["session"])}
    elif cls == 3004:
        o["entity"] = key_obj(rec, "key2_label" in rec or "key2_id" in rec)
        if "actor" in rec:
            o.setdefault("actor", {})["user"] = {"name": rec["actor"]}
        if "session" in rec:
            o.setdefault("actor", {})["session"] = {"uid": str(rec["session"])}
    o["raw_data"] = raw
    al = {}
    if chain_id:
        al["chain_id"] = chain_id
    al.update({"seq": rec["seq"], "hash": rec["hash"], "type": rec["type"], "v": rec["v"]})
    for k in other_members(rec, {"outcome", "rv", "detail"}, chain_id):
        setp(al, ("pkcs11." if k in PKCS11 else "") + k, rec[k])
    o["unmapped"] = {"auditlog": al}
    cf = callers(rec)
    if cf:
        o["unmapped"]["fields"] = {k: rec[k] for k in cf}
    return o


# ---- the run ------------------------------------------------------------------

def check_log(path, keys, version, types_wanted):
    extra = ["--verify-key", keys + "/verify-key", "--pubkey", keys + "/pubkey"] if keys else []
    raw = run([VERIFY, "--emit"] + extra + [path], 0).stdout
    raw2 = run([VERIFY, "--emit", "--format", "raw"] + extra + [path], 0).stdout
    if raw != raw2:
        fail("--format raw differs from --emit")
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")[:-1]
    out = raw.split(b"\n")[:-1]
    # every emitted line is a line of the file, in order
    pos = 0
    for ln in out:
        try:
            pos = lines.index(ln, pos) + 1
        except ValueError:
            fail("%s: an emitted line is not in the file: %r" % (path, ln[:80]))
    recs = [json.loads(ln.decode()) for ln in out]
    types = {r["type"] for r in recs}
    if not types_wanted <= types:
        fail("%s: record types %s, want at least %s" % (path, sorted(types), sorted(types_wanted)))
    print("cli_emit: %s: %d verified records (%s)" % (os.path.basename(path), len(recs), " ".join(sorted(types))))
    for fmt in ("ecs", "ocsf"):
        conv = run([VERIFY, "--emit", "--format", fmt] + extra + [path], 0).stdout
        got = conv.split(b"\n")
        if got[-1] != b"" or len(got) - 1 != len(out):
            fail("%s %s: %d lines for %d records" % (path, fmt, len(got) - 1, len(out)))
            continue
        chain_id = ""
        seen = {}
        for ln, rawln, rec in zip(got, out, recs):
            if b"\n" in ln or b"\r" in ln:
                fail("a line break inside a %s object" % fmt)
            try:
                obj = json.loads(ln.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                fail("%s %s seq %d: not JSON: %s" % (path, fmt, rec["seq"], e))
                continue
            if rec["type"] == "header":
                chain_id = rec["chain_id"]
            want = (ecs if fmt == "ecs" else lambda *a: ocsf(*a, version))(rawln.decode(), rec, chain_id)
            if obj != want or list(obj) != list(want):
                bad = sorted(k for k in set(obj) | set(want) if obj.get(k) != want.get(k))
                fail("%s %s seq %d (%s): differs from docs/siem.md in %s:\n got  %s\n want %s" % (
                    path, fmt, rec["seq"], rec.get("action", rec["type"]), bad,
                    json.dumps({k: obj.get(k) for k in bad})[:600],
                    json.dumps({k: want.get(k) for k in bad})[:600]))
            key = rec.get("action", rec["type"])
            seen[key] = obj.get("class_uid", obj.get("event", {}).get("kind"))
        if fmt == "ocsf":
            for a, cls in (("C_Login", 3002), ("C_Logout", 3002), ("C_GenerateKey", 3004),
                           ("C_WrapKey", 3004), ("C_Sign", 6003), ("header", 0)):
                if key_needed(recs, a) and seen.get(a) != cls:
                    fail("%s ocsf: %s is class %s, want %d" % (path, a, seen.get(a), cls))
    return recs


def key_needed(recs, a):
    return any(r.get("action", r["type"]) == a for r in recs)


def token_log(d, version):
    """The token's own trail (docs/token.md "Format v2"), through every
    format. False when pkcs11-tool is missing."""
    if not shutil.which("pkcs11-tool"):
        return False
    keys = d + "/tkeys"
    os.mkdir(keys, 0o700)
    run([KEYGEN, "--dir", keys, "--host", "tok-emit", "--delta", "1"], 0)
    conf = d + "/softtoken.conf"
    with open(conf, "w") as f:
        f.write("token_dir = %s/tokens\naudit_dir = %s/audit\npbkdf2_iterations = 1000\nslots = 1\n"
                "audit_format_version = 2\naudit_seal_state = %s/sealing-state\n"
                "audit_signing_key = %s/signing-key\n" % (d, d, keys, keys))
    env = dict(os.environ, SOFTTOKEN_CONF=conf)
    with open(d + "/in", "wb") as f:
        f.write(b"to be signed\n")
    # a sanitizer build of the module needs its runtime preloaded (token_san.sh)
    p11 = ["bash", "-c", 'MOD=$1; fail() { echo "$*" >&2; exit 1; }; . "$2"; shift 2; '
           'exec "${SAN[@]}" pkcs11-tool --module "$MOD" --slot 0 "$@"', "p11", MODULE, HERE + "/token_san.sh"]
    pin = ["--login", "--pin", "user-pin-5678"]
    steps = [["--init-token", "--label", "emit", "--so-pin", "so-pin-1234"],
             ["--init-pin", "--so-pin", "so-pin-1234", "--pin", "user-pin-5678"],
             pin + ["--keygen", "--key-type", "AES:32", "--label", "aes1", "--id", "01"],
             pin + ["--keypairgen", "--key-type", "EC:prime256v1", "--label", "ec1", "--id", "02"],
             pin + ["--sign", "--mechanism", "ECDSA", "--id", "02", "--input-file", d + "/in",
                    "--output-file", d + "/sig"],
             pin + ["--delete-object", "--type", "secrkey", "--id", "01"]]
    for st in steps:
        p = subprocess.run(p11 + st, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            fail("pkcs11-tool %s: %s" % (" ".join(st), p.stderr.decode(errors="replace")[-300:]))
    subprocess.run(p11 + ["--login", "--pin", "wrong-pin", "-O"], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)  # fails: a C_Login with CKR_PIN_INCORRECT
    recs = check_log(d + "/audit/softtoken-0.log", keys, version, {"header", "seal", "event"})
    acts = {r.get("action") for r in recs}
    for a in ("C_InitToken", "C_Login", "C_GenerateKey", "C_GenerateKeyPair", "C_Sign", "C_DestroyObject"):
        if a not in acts:
            fail("the token's trail has no verified %s record" % a)
    if not any(r.get("action") == "C_Login" and r.get("outcome") == "failure" for r in recs):
        fail("the token's trail has no failed C_Login")
    return True


def main():
    d = tempfile.mkdtemp(prefix="auditlog-emit.", dir=os.environ.get("TMPDIR"))
    try:
        version = run([VERIFY, "--version"], 0).stdout.decode().split()[-1]
        keys = d + "/keys"
        os.mkdir(keys)
        run([KEYGEN, "--delta", "1", "--host", "host-a.example", "--dir", keys], 0)
        v2 = d + "/v2.log"
        run([WRITER, v2, "2", keys + "/sealing-state", keys + "/signing-key"], 0)
        recs = check_log(v2, keys, version, {"header", "seal", "tree", "checkpoint", "event"})
        # the hostile strings reached the objects as the line holds them
        if not any("\x00" in r.get("detail", "") for r in recs):
            fail("no U+0000 in a verified detail")
        if not any("\ufffd" in r.get("key_label", "") for r in recs):
            fail("invalid UTF-8 did not become U+FFFD")
        # the v1 log: a crash's damage and its recovery record
        v1 = d + "/v1.log"
        run([WRITER, v1, "1"], 0)
        with open(v1, "ab") as f:
            f.write(b'{"@timestamp":"2026-1')
        run([WRITER, v1, "1"], 0)
        check_log(v1, None, version, {"header", "recovery", "event"})

        # a clock record (a wall-clock step: not made on demand by the real
        # writer) from the independent writer of tests/vectors/v2log.py
        sys.path.insert(0, os.path.join(HERE, "vectors"))
        import v2log
        import gen_v2_vectors as V
        k = v2log.Keys(b"emit clock")
        log = v2log.honest(k, b"emitclock", lives=1)
        ns = log.last_ns + 1
        e = k.epoch(ns)
        log.add("clock", ns, [("epoch", e), ("expected", V.ts_text(ns)), ("wall", V.ts_text(ns - 3600 * 10**9))])
        log.seal("batch", ns + 1, epoch=e)
        log.write(d + "/clock.log")
        check_log(d + "/clock.log", None, version, {"header", "seal", "tree", "checkpoint", "event", "clock"})

        token_ok = token_log(d, version) if MODULE else True

        # a line made invalid UTF-8 in the file (0xff in a string) fails its
        # check and is never passed on; what is passed on stays JSON
        bad = d + "/bad.log"
        with open(v2, "rb") as f:
            lines = f.read().split(b"\n")
        i = next(n for n, ln in enumerate(lines) if b'"detail":"plain detail"' in ln)
        lines[i] = lines[i].replace(b"plain detail", b"plain \xffetail")
        with open(bad, "wb") as f:
            f.write(b"\n".join(lines))
        for fmt in ("raw", "ecs", "ocsf"):
            p = run([VERIFY, "--emit", "--format", fmt, bad], 1)
            for ln in p.stdout.split(b"\n")[:-1]:
                try:
                    json.loads(ln.decode("utf-8"))
                except (UnicodeDecodeError, ValueError):
                    fail("%s: a line that is not UTF-8 JSON was passed on: %r" % (fmt, ln[:100]))
                    break
            if b"\xff" in p.stdout:
                fail("%s: the altered line was passed on" % fmt)

        # standard output that cannot be written: exit 2, said on stderr
        with open("/dev/full", "wb") as full:
            p = subprocess.run([VERIFY, "--emit", "--format", "ocsf", v2], stdout=full, stderr=subprocess.PIPE)
        if p.returncode != 2 or b"cannot write standard output" not in p.stderr:
            fail("--emit to /dev/full: exit %d, %r" % (p.returncode, p.stderr[:200]))

        # usage
        for args in (["--emit", "--format", "xml", v2], ["--format", "ecs", v2],
                     ["--emit", "--format", "ecs", "--json", v2], ["--emit", "--state", d + "/st", v2],
                     ["--follow", "--state", d + "/st", v2]):
            p = run([VERIFY] + args, 2)
            if p.stdout:
                fail("%s: wrote to stdout" % args)
    finally:
        shutil.rmtree(d)
    if failures:
        sys.exit(1)
    if not token_ok:
        print("cli_emit: SKIP (the token part): pkcs11-tool not found (opensc)", file=sys.stderr)
        sys.exit(77)
    print("cli_emit: ok")


main()

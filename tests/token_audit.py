#!/usr/bin/python3
# The audit checker of the client tests (token_clients.sh, token_clients_ext.sh).
# mark: remember where every audit file ends; step NAME SPEC: the event records
# written since the mark are exactly SPEC, a list of ACTION{field=value,...};
# defaults: outcome/rv success, slot 0 and the step's own session for records
# of a session; "-" means the field is absent; "@slot=N" first sets the slot.
# present NAME SPEC: each item of SPEC matches some record since the mark.
import json, os, re, sys

def files(adir):
    if not os.path.isdir(adir):
        return []
    return sorted(f for f in os.listdir(adir) if f.endswith(".log") or ".log." in f)

def lines(adir):
    out = {}
    for f in files(adir):
        with open(os.path.join(adir, f), "rb") as fh:
            out[f] = fh.read().split(b"\n")[:-1]
    return out

def die(msg):
    print("audit: " + msg, file=sys.stderr)
    sys.exit(1)

def mark(adir, markf):
    with open(markf, "w") as fh:
        json.dump({f: len(l) for f, l in lines(adir).items()}, fh)

def new_events(adir, markf):
    with open(markf) as fh:
        m = json.load(fh)
    evs, touched = [], set()
    for f, ls in lines(adir).items():
        for raw in ls[m.get(f, 0):]:
            r = json.loads(raw)
            touched.add(f)
            if r["type"] == "event":
                evs.append(r)
    if len(touched) > 1:
        die("one process wrote into several files: %s" % sorted(touched))
    return evs

TOK = re.compile(r"(\w+)(?:\{([^}]*)\})?")
BASE = ("action", "outcome", "rv", "slot", "session", "mechanism", "key_label", "key_id", "actor", "detail")

def parse(spec):
    slot, want = 0, []
    for t in spec.split():
        if t.startswith("@slot="):
            slot = int(t[6:])
            continue
        m = TOK.fullmatch(t)
        if not m:
            die("bad spec token " + t)
        f = {}
        for kv in filter(None, (m.group(2) or "").split(",")):
            k, v = kv.split("=", 1)
            f[k] = None if v == "-" else (int(v) if k == "slot" else v)
        want.append((m.group(1), f))
    return slot, want

def expect(a, f, slot):
    e = {"action": a, "outcome": "success", "rv": "CKR_OK"}
    if "rv" in f and f["rv"] != "CKR_OK":
        e["outcome"] = "failure"
    if a in ("C_Initialize", "C_Finalize"):
        e.update(slot=None, session=None, actor="public", detail=None, mechanism=None,
                 key_label=None, key_id=None)
    elif a not in ("C_InitToken", "C_CloseAllSessions"):
        e.update(slot=slot, session="S")
    if a == "C_OpenSession":
        e.update(actor="public", detail="ro")
    if a in ("C_Login", "C_Sign", "C_Verify", "C_Encrypt", "C_Decrypt", "C_GenerateKey",
             "C_GenerateKeyPair", "C_FindObjectsFinal", "C_GenerateRandom"):
        e.setdefault("actor", "user")
    e.update(f)
    return e

def step(adir, markf, name, spec):
    slot, want = parse(spec)
    got = new_events(adir, markf)
    if [r["action"] for r in got] != [a for a, _ in want]:
        die("%s: records %s, expected %s" % (name, [r["action"] for r in got], [a for a, _ in want]))
    sess = [r["session"] for r in got if r["action"] == "C_OpenSession" and "session" in r]
    for r, (a, f) in zip(got, want):
        for k, v in expect(a, f, slot).items():
            if v == "S":
                if r.get("session") not in sess:
                    die("%s: %s seq %d: session %r is not one this step opened %r" %
                        (name, a, r["seq"], r.get("session"), sess))
                continue
            got_v = r.get(k)
            if got_v != v:
                die("%s: %s seq %d: %s is %r, expected %r\n  %s" % (name, a, r["seq"], k, r.get(k), v, r))
    mark(adir, markf)

def loose(adir, markf, name, musts):
    """pkcs11-tool --test: envelope, counts, and every failure an unoffered mechanism."""
    got = new_events(adir, markf)
    acts = [r["action"] for r in got]
    if acts[:3] != ["C_Initialize", "C_OpenSession", "C_Login"] or acts[-2:] != ["C_CloseSession", "C_Finalize"]:
        die("%s: envelope %s ... %s" % (name, acts[:3], acts[-2:]))
    for kv in musts.split():
        a, n = kv.split("=")
        c = acts.count(a)
        if (n.endswith("+") and c < int(n[:-1])) or (not n.endswith("+") and c != int(n)):
            die("%s: %d %s records, expected %s" % (name, c, a, n))
    offered = set(sys.argv[6].split(","))
    for r in got:
        if r["outcome"] != "success" and not (r["action"].endswith("Init") and
                                              r["rv"] == "CKR_MECHANISM_INVALID" and
                                              r.get("mechanism") not in offered):
            die("%s: unexpected failure %s" % (name, r))
    mark(adir, markf)

def final(adir, markf, tokdir, pins):
    if new_events(adir, markf):
        die("records no step accounted for: %s" % [r["action"] for r in new_events(adir, markf)])
    n = 0
    for top in (adir, tokdir):
        for root, _, fs in os.walk(top):
            for f in fs:
                with open(os.path.join(root, f), "rb") as fh:
                    data = fh.read()
                for p in pins:
                    if p.encode() in data:
                        die("PIN %r found in %s" % (p, os.path.join(root, f)))
                n += 1
    for f, ls in lines(adir).items():
        for raw in ls:
            r = json.loads(raw)
            if r["type"] != "event":
                continue
            if (r["outcome"] == "success") != (r.get("rv") == "CKR_OK"):
                die("outcome and rv disagree: %s" % r)
            extra = set(r) - set(BASE) - {"@timestamp", "seq", "v", "type", "hash"}
            if extra:
                die("unexpected keys %s in %s" % (extra, r))
    print("audit: %d files searched for PINs" % n)

def der(tag, body):
    n = len(body)
    if n < 128:
        return bytes([tag, n]) + body
    ln = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(ln)]) + ln + body

def spki(listing, kid, out):
    """SubjectPublicKeyInfo of the public key with CKA_ID kid from `pkcs11-tool -O`."""
    blocks, cur = [], None
    for l in open(listing):
        if l[:1] not in (" ", "\t", ""):
            cur = [l.strip()]
            blocks.append(cur)
        elif cur is not None:
            cur.append(l.strip())
    for b in blocks:
        attrs = dict((x.split(":", 1)[0].strip(), x.split(":", 1)[1].strip()) for x in b[1:] if ":" in x)
        if not b[0].startswith("Public Key Object") or attrs.get("ID") != kid:
            continue
        pt = bytes.fromhex(attrs["EC_POINT"])
        params = bytes.fromhex(attrs["EC_PARAMS"].split()[0])
        if pt[0] != 0x04 or pt[1] != len(pt) - 2:
            die("EC_POINT is not a DER OCTET STRING: %s" % pt.hex())
        raw = pt[2:]
        if "EC_EDWARDS" in b[0]:
            alg = der(0x30, bytes.fromhex("06032b6570"))
        else:
            alg = der(0x30, bytes.fromhex("06072a8648ce3d0201") + params)
        with open(out, "wb") as fh:
            fh.write(der(0x30, alg + der(0x03, b"\0" + raw)))
        return
    die("no public key with ID %s in the listing" % kid)

def present(adir, markf, name, spec):
    """Real clients make calls of their own: each ACTION{field=value,...} of
    spec must match at least one record since the mark, and every record
    must have a consistent outcome."""
    got = new_events(adir, markf)
    for r in got:
        if (r["outcome"] == "success") != (r.get("rv") == "CKR_OK"):
            die("%s: outcome and rv disagree: %s" % (name, r))
    for t in spec.split():
        m = TOK.fullmatch(t)
        if not m:
            die("bad spec token " + t)
        f = {}
        for kv in filter(None, (m.group(2) or "").split(",")):
            k, v = kv.split("=", 1)
            f[k] = None if v == "-" else (int(v) if k == "slot" else v)
        f.setdefault("outcome", "failure" if f.get("rv", "CKR_OK") != "CKR_OK" else "success")
        if not any(r["action"] == m.group(1) and all(r.get(k) == v for k, v in f.items()) for r in got):
            die("%s: no %s record with %s among %s" % (name, m.group(1), f,
                [(r["action"], r.get("rv"), r.get("key_label")) for r in got]))
    mark(adir, markf)

cmd = sys.argv[1]
if cmd == "mark":
    mark(sys.argv[2], sys.argv[3])
elif cmd == "step":
    step(*sys.argv[2:6])
elif cmd == "loose":
    loose(*sys.argv[2:6])
elif cmd == "final":
    final(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
elif cmd == "present":
    present(*sys.argv[2:6])
elif cmd == "spki":
    spki(*sys.argv[2:5])

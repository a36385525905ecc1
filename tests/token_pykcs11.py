#!/usr/bin/python3
"""libsofttoken.so through PyKCS11: every mechanism the module lists is called
(single- and multi-part where the mechanism allows), every object call is made,
results are checked independently (python3-cryptography: without it the test
fails rather than drop its cross-checks; openssl where noted),
and the audit trail must hold exactly one record per audited call made here,
in order, field by field, with no PIN in it.

Usage: /usr/bin/python3 token_pykcs11.py libsofttoken.so auditlog-verify
Exit: 0 passed, 1 failed, 77 skipped (PyKCS11 missing).
TOKEN_TEST_KEEP=1 keeps the work directory.
"""
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import struct
import sys
import tempfile

if len(sys.argv) != 3:
    print("usage: token_pykcs11.py libsofttoken.so auditlog-verify", file=sys.stderr)
    sys.exit(2)
MOD = os.path.realpath(sys.argv[1])
VERIFY = sys.argv[2]


def needed(path, prefixes):
    """The path of the first library path needs whose name starts with one of prefixes."""
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    except OSError:
        return None
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith(prefixes) and len(parts) > 2 and parts[2].startswith("/"):
            return parts[2]
    return None


# A sanitizer build of the module can only be dlopen()ed with its runtime
# loaded first: re-run this interpreter with it preloaded. With ASan, also
# libstdc++ (PyKCS11's SWIG code throws C++ exceptions, and ASan resolves its
# __cxa_throw interceptor only against what is loaded at its start).
rt = needed(MOD, ("libasan.", "libtsan."))
if rt and rt not in os.environ.get("LD_PRELOAD", ""):
    pre = [rt]
    env = dict(os.environ)
    if "libasan" in rt:
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        std = needed(rt, ("libstdc++.",)) or "libstdc++.so.6"
        pre.append(std)
    env["LD_PRELOAD"] = " ".join(pre)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

try:
    import PyKCS11 as P
    from PyKCS11 import LowLevel
except ImportError:
    print("token_pykcs11: SKIP: PyKCS11 not installed in %s (Debian package python3-pykcs11)" % sys.executable,
          file=sys.stderr)
    sys.exit(77)

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import cmac, hashes, keywrap, serialization
    from cryptography.hazmat.primitives.kdf.x963kdf import X963KDF
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    HAVE_CRYPTOGRAPHY = True
except ImportError as e:
    # The independent cross-checks are the point of this test: without them
    # it would pass on the token's word alone, so it fails (CI installs it).
    print("token_pykcs11: FAIL: python3-cryptography is needed for the cross-checks (%s); "
          "scripts/install-deps.sh installs it" % e, file=sys.stderr)
    sys.exit(1)

SO_PIN = "SoPin-4711xyz"
PIN = "UsrPin-0815qz"
NEW_PIN = "NewPin-2342qq"
BAD_PIN = "WrongPin-99q"
PINS = (SO_PIN, PIN, NEW_PIN, BAD_PIN)

work = tempfile.mkdtemp(prefix="token-pykcs11.", dir=os.environ.get("TMPDIR", "/var/tmp"))
AUDIT = os.path.join(work, "audit")
with open(os.path.join(work, "softtoken.conf"), "w") as f:
    f.write("token_dir = %s/tokens\naudit_dir = %s\npbkdf2_iterations = 1000\nslots = 2\n" % (work, AUDIT))
os.mkdir(os.path.join(work, "tokens"))
os.environ["SOFTTOKEN_CONF"] = os.path.join(work, "softtoken.conf")

checks = 0


class Fail(Exception):
    pass


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        raise Fail(what)


def ckr(name):
    return getattr(P, name)


# ---- the records this script expects, in order ------------------------------------------------
EXPECTED = []
SLOT = 0


def expect(action, rv="CKR_OK", **fields):
    f = {"action": action, "rv": rv, "outcome": "success" if rv == "CKR_OK" else "failure"}
    f.update(fields)
    EXPECTED.append(f)


def sid(s):
    return s.session.value()


def in_session(action, s, rv="CKR_OK", actor="user", **fields):
    if fields.get("key_id") == "":
        fields["key_id"] = None  # an empty CKA_ID: the field is omitted
    expect(action, rv, slot=SLOT, session=sid(s), actor=actor, **fields)


def raises(rvname, fn, *args):
    """fn(*args) must fail with exactly CKR rvname."""
    try:
        fn(*args)
    except P.PyKCS11Error as e:
        check(e.value == ckr(rvname), "expected %s, got %s" % (rvname, e))
        return
    raise Fail("expected %s, the call succeeded" % rvname)


def ll(name, *args):
    """A low-level call that must answer CKR_OK."""
    rv = getattr(lib.lib, name)(*args)
    if rv != P.CKR_OK:
        raise Fail("%s: %s" % (name, P.CKR.get(rv, hex(rv))))


def ll_rv(name, *args):
    return getattr(lib.lib, name)(*args)


def buf(n):
    return P.ckbytelist([0] * n)


# ---- independent checks -----------------------------------------------------------------------
def openssl(args, data=None):
    r = subprocess.run(["openssl"] + args, input=data, capture_output=True)
    return r.returncode, r.stdout


def write(name, data):
    p = os.path.join(work, name)
    with open(p, "wb") as fh:
        fh.write(data)
    return p


def der(tag, body):
    n = len(body)
    if n < 128:
        return bytes([tag, n]) + body
    ln = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(ln)]) + ln + body


def der_int(v):
    b = v.to_bytes(v.bit_length() // 8 + 1, "big")
    return der(0x02, b)


class PublicKey:
    """A public key read from the token, as SubjectPublicKeyInfo DER."""

    def __init__(self, kind, spki, curve=None):
        self.kind, self.spki, self.curve = kind, spki, curve
        self.path = write("pub-%d.der" % id(self), spki)
        self.obj = serialization.load_der_public_key(spki) if HAVE_CRYPTOGRAPHY else None

    def verify(self, sig, data, how, digest=None):
        """how: ecdsa (r||s), pkcs1, pss, pss-prehashed, ecdsa-prehashed, eddsa."""
        if HAVE_CRYPTOGRAPHY:
            try:
                if how.startswith("ecdsa"):
                    n = len(sig) // 2
                    d = utils.encode_dss_signature(int.from_bytes(sig[:n], "big"), int.from_bytes(sig[n:], "big"))
                    alg = utils.Prehashed(digest()) if how == "ecdsa-prehashed" else digest()
                    self.obj.verify(d, data, ec.ECDSA(alg))
                elif how == "pkcs1":
                    self.obj.verify(sig, data, padding.PKCS1v15(), digest())
                elif how == "pkcs1-raw":
                    return self.obj.recover_data_from_signature(sig, padding.PKCS1v15(), None) == data
                elif how.startswith("pss"):
                    alg = utils.Prehashed(digest()) if how == "pss-prehashed" else digest()
                    self.obj.verify(sig, data, padding.PSS(padding.MGF1(digest()), digest().digest_size), alg)
                elif how == "eddsa":
                    self.obj.verify(sig, data)
                return True
            except InvalidSignature:
                return False
        # openssl
        md = {None: None, "SHA256": "sha256", "SHA384": "sha384"}[digest.name.upper() if digest else None]
        if how.startswith("ecdsa"):
            n = len(sig) // 2
            sig = der(0x30, der_int(int.from_bytes(sig[:n], "big")) + der_int(int.from_bytes(sig[n:], "big")))
        sp = write("sig.bin", sig)
        dp = write("data.bin", data)
        if how == "pkcs1-raw":
            rc, out = openssl(["pkeyutl", "-verifyrecover", "-pubin", "-inkey", self.path, "-in", sp])
            return rc == 0 and out == data
        if how in ("ecdsa", "pkcs1", "pss"):
            args = ["dgst", "-" + md, "-verify", self.path, "-signature", sp]
            if how == "pss":
                args += ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:-1"]
            return openssl(args + [dp])[0] == 0
        args = ["pkeyutl", "-verify", "-pubin", "-inkey", self.path, "-sigfile", sp, "-in", dp]
        if how == "eddsa":
            args.append("-rawin")
        if how == "pss-prehashed":
            args += ["-pkeyopt", "rsa_padding_mode:pss", "-pkeyopt", "digest:" + md, "-pkeyopt", "rsa_pss_saltlen:-1"]
        return openssl(args)[0] == 0

    def rsa_encrypt(self, data, how, md="sha256", label=None):
        if HAVE_CRYPTOGRAPHY:
            if how == "pkcs1":
                return self.obj.encrypt(data, padding.PKCS1v15())
            h = {"sha1": hashes.SHA1, "sha256": hashes.SHA256}[md]()
            return self.obj.encrypt(data, padding.OAEP(padding.MGF1(h), h, label))
        args = ["pkeyutl", "-encrypt", "-pubin", "-inkey", self.path, "-in", write("plain.bin", data)]
        if how == "pkcs1":
            args += ["-pkeyopt", "rsa_padding_mode:pkcs1"]
        else:
            args += ["-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:" + md,
                     "-pkeyopt", "rsa_mgf1_md:" + md]
            if label:
                args += ["-pkeyopt", "rsa_oaep_label:" + label.hex()]
        rc, out = openssl(args)
        check(rc == 0, "openssl pkeyutl -encrypt")
        return out


def aes_ref(key, mode, data, iv=None, pad=False, decrypt=False):
    """AES-ECB/CBC with OpenSSL's implementation (cryptography or the CLI)."""
    if HAVE_CRYPTOGRAPHY:
        from cryptography.hazmat.primitives import padding as sympad
        m = modes.ECB() if mode == "ecb" else modes.CBC(iv)
        c = Cipher(algorithms.AES(key), m)
        if decrypt:
            d = c.decryptor()
            out = d.update(data) + d.finalize()
            if pad:
                u = sympad.PKCS7(128).unpadder()
                out = u.update(out) + u.finalize()
            return out
        if pad:
            p = sympad.PKCS7(128).padder()
            data = p.update(data) + p.finalize()
        e = c.encryptor()
        return e.update(data) + e.finalize()
    args = ["enc", "-aes-%d-%s" % (len(key) * 8, mode), "-K", key.hex(), "-in", write("aes.in", data)]
    if iv:
        args += ["-iv", iv.hex()]
    if not pad:
        args.append("-nopad")
    if decrypt:
        args.append("-d")
    rc, out = openssl(args)
    check(rc == 0, "openssl enc")
    return out


# ---- the run ------------------------------------------------------------------------------
lib = P.PyKCS11Lib()


def b(x):
    return bytes(x)


def attr(s, h, types):
    return s.getAttributeValue(h, types, allAsBinary=True)


def copy_object(s, h, template):
    """C_CopyObject, which PyKCS11 1.5 does not wrap: through the module's own
    function list (ctypes; the same loaded module, so the same state)."""
    import ctypes

    class Attr(ctypes.Structure):
        _fields_ = [("type", ctypes.c_ulong), ("pValue", ctypes.c_void_p), ("ulValueLen", ctypes.c_ulong)]

    so = ctypes.CDLL(MOD)
    fl = ctypes.c_void_p()
    check(so.C_GetFunctionList(ctypes.byref(fl)) == 0, "C_GetFunctionList")
    fns = ctypes.cast(fl, ctypes.POINTER(ctypes.c_void_p))
    # CK_FUNCTION_LIST: CK_VERSION (padded to a pointer), then C_Initialize ...;
    # C_CopyObject is the 22nd function.
    copy = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.POINTER(Attr), ctypes.c_ulong,
                            ctypes.POINTER(ctypes.c_ulong))(fns[1 + 21])
    bufs = [ctypes.create_string_buffer(v, len(v)) for _, v in template]
    tmpl = (Attr * len(template))(*[Attr(t, ctypes.cast(bb, ctypes.c_void_p), len(v))
                                    for (t, v), bb in zip(template, bufs)])
    out = ctypes.c_ulong()
    rv = copy(sid(s), h.value(), tmpl, len(template), ctypes.byref(out))
    if rv != P.CKR_OK:
        raise P.PyKCS11Error(rv)
    ho = LowLevel.CK_OBJECT_HANDLE()
    ho.assign(out.value)
    return ho


def public_key(s, h):
    kt = s.getAttributeValue(h, [P.CKA_KEY_TYPE])[0]
    if kt == P.CKK_RSA:
        n, e = attr(s, h, [P.CKA_MODULUS, P.CKA_PUBLIC_EXPONENT])
        spki = der(0x30, der(0x30, bytes.fromhex("06092a864886f70d0101010500")) +
                   der(0x03, b"\0" + der(0x30, der_int(int.from_bytes(b(n), "big")) +
                                         der_int(int.from_bytes(b(e), "big")))))
        return PublicKey("rsa", spki)
    params, point = (b(x) for x in attr(s, h, [P.CKA_EC_PARAMS, P.CKA_EC_POINT]))
    check(point[0] == 0x04 and point[1] == len(point) - 2, "CKA_EC_POINT is a DER OCTET STRING")
    raw = point[2:]
    if kt == P.CKK_EC_EDWARDS:
        check(len(raw) == 32, "Ed25519 point is 32 bytes")
        alg = der(0x30, bytes.fromhex("06032b6570"))
    else:
        alg = der(0x30, bytes.fromhex("06072a8648ce3d0201") + params)
    return PublicKey("ec", der(0x30, alg + der(0x03, b"\0" + raw)))


def main():
    global SLOT
    lib.load(MOD)
    expect("C_Initialize", actor="public")

    # -- slots and the token (no records: info calls) --
    slots = lib.getSlotList()
    check(list(slots) == [0, 1], "slots %r" % slots)
    check(not (lib.getTokenInfo(0).flags & P.CKF_TOKEN_INITIALIZED), "slot 0 starts uninitialised")
    # PyKCS11 passes the label as a C string; C_InitToken reads 32 bytes: pad it.
    lib.initToken(0, SO_PIN, "pykcs11".ljust(32))
    expect("C_InitToken", slot=0, actor="so", key_label="pykcs11")
    raises("CKR_PIN_INCORRECT", lib.initToken, 0, BAD_PIN, "pykcs11".ljust(32))
    expect("C_InitToken", "CKR_PIN_INCORRECT", slot=0, actor="so")
    ti = lib.getTokenInfo(0)
    check(ti.label.strip() == "pykcs11", "token label %r" % ti.label)
    check(ti.flags & P.CKF_TOKEN_INITIALIZED and not ti.flags & P.CKF_USER_PIN_INITIALIZED, "token flags")

    s = lib.openSession(0, P.CKF_SERIAL_SESSION | P.CKF_RW_SESSION)
    in_session("C_OpenSession", s, actor="public", detail="rw")
    raises("CKR_USER_PIN_NOT_INITIALIZED", s.login, PIN)
    in_session("C_Login", s, "CKR_USER_PIN_NOT_INITIALIZED")
    s.login(SO_PIN, P.CKU_SO)
    in_session("C_Login", s, actor="so")
    s.initPin(PIN)
    in_session("C_InitPIN", s, actor="so")
    s.logout()
    in_session("C_Logout", s, actor="so")
    check(lib.getTokenInfo(0).flags & P.CKF_USER_PIN_INITIALIZED, "user PIN initialised")
    raises("CKR_PIN_INCORRECT", s.login, BAD_PIN)
    in_session("C_Login", s, "CKR_PIN_INCORRECT")
    s.login(PIN)
    in_session("C_Login", s)
    s.setPin(PIN, NEW_PIN)
    in_session("C_SetPIN", s)
    s.logout()
    in_session("C_Logout", s)
    raises("CKR_PIN_INCORRECT", s.login, PIN)
    in_session("C_Login", s, "CKR_PIN_INCORRECT")
    s.login(NEW_PIN)
    in_session("C_Login", s)
    check(s.getSessionInfo().state == P.CKS_RW_USER_FUNCTIONS, "session state after login")

    # -- mechanisms --
    table = {
        "CKM_AES_KEY_GEN", "CKM_AES_ECB", "CKM_AES_CBC", "CKM_AES_CBC_PAD", "CKM_AES_GCM", "CKM_AES_KEY_WRAP",
        "CKM_AES_KEY_WRAP_PAD", "CKM_GENERIC_SECRET_KEY_GEN", "CKM_SHA256_HMAC", "CKM_SHA_1", "CKM_SHA256",
        "CKM_SHA384", "CKM_SHA512", "CKM_EC_KEY_PAIR_GEN", "CKM_ECDSA", "CKM_ECDSA_SHA256", "CKM_ECDSA_SHA384",
        "CKM_RSA_PKCS_KEY_PAIR_GEN", "CKM_RSA_PKCS", "CKM_SHA256_RSA_PKCS", "CKM_RSA_PKCS_PSS",
        "CKM_SHA256_RSA_PKCS_PSS", "CKM_RSA_PKCS_OAEP", "CKM_EC_EDWARDS_KEY_PAIR_GEN", "CKM_EDDSA",
        "CKM_AES_CTR", "CKM_AES_CMAC", "CKM_SHA384_HMAC", "CKM_SHA512_HMAC", "CKM_SHA224", "CKM_ECDH1_DERIVE"}
    mechs = set(lib.getMechanismList(0))
    check(mechs == table, "mechanism list differs: extra %s, missing %s" % (mechs - table, table - mechs))
    exercised = set()
    info = {m: lib.getMechanismInfo(0, m) for m in mechs}
    check(info["CKM_AES_GCM"].flags & P.CKF_ENCRYPT and info["CKM_EDDSA"].flags & P.CKF_SIGN, "mechanism flags")

    def used(m):
        exercised.add(m)

    # -- key generation --
    T, F = P.CK_TRUE, P.CK_FALSE

    def genkey(mech, label, kid, extra, value_len=32):
        h = s.generateKey([(P.CKA_CLASS, P.CKO_SECRET_KEY), (P.CKA_LABEL, label), (P.CKA_ID, kid),
                           (P.CKA_VALUE_LEN, value_len)] + extra, P.Mechanism(ckr(mech), None))
        in_session("C_GenerateKey", s, mechanism=mech, key_label=label, key_id=kid.hex())
        used(mech)
        return h

    aes = genkey("CKM_AES_KEY_GEN", "py-aes", b"\x01\x02",
                 [(P.CKA_KEY_TYPE, P.CKK_AES), (P.CKA_TOKEN, T), (P.CKA_SENSITIVE, T), (P.CKA_EXTRACTABLE, F),
                  (P.CKA_ENCRYPT, T), (P.CKA_DECRYPT, T), (P.CKA_WRAP, T), (P.CKA_UNWRAP, T)])
    aes128 = genkey("CKM_AES_KEY_GEN", "py-aes128", b"\x03",
                    [(P.CKA_KEY_TYPE, P.CKK_AES), (P.CKA_ENCRYPT, T), (P.CKA_DECRYPT, T), (P.CKA_SENSITIVE, F),
                     (P.CKA_EXTRACTABLE, T)], 16)
    gsec = genkey("CKM_GENERIC_SECRET_KEY_GEN", "py-gsec", b"\x04",
                  [(P.CKA_KEY_TYPE, P.CKK_GENERIC_SECRET), (P.CKA_SIGN, T), (P.CKA_VERIFY, T),
                   (P.CKA_SENSITIVE, T)], 32)

    def genpair(mech, label, kid, pub, priv):
        hp, hk = s.generateKeyPair(
            [(P.CKA_CLASS, P.CKO_PUBLIC_KEY), (P.CKA_LABEL, label), (P.CKA_ID, kid), (P.CKA_TOKEN, T)] + pub,
            [(P.CKA_CLASS, P.CKO_PRIVATE_KEY), (P.CKA_LABEL, label), (P.CKA_ID, kid), (P.CKA_TOKEN, T),
             (P.CKA_PRIVATE, T), (P.CKA_SENSITIVE, T)] + priv, P.Mechanism(ckr(mech), None))
        in_session("C_GenerateKeyPair", s, mechanism=mech, key_label=label, key_id=kid.hex())
        used(mech)
        return hp, hk

    P256 = bytes.fromhex("06082a8648ce3d030107")
    P384 = bytes.fromhex("06052b81040022")
    ED25519 = bytes.fromhex("06032b6570")
    ec_use = ([(P.CKA_VERIFY, T)], [(P.CKA_SIGN, T)])
    ec256 = genpair("CKM_EC_KEY_PAIR_GEN", "py-ec256", b"\xec\x01", [(P.CKA_EC_PARAMS, P256)] + ec_use[0], ec_use[1])
    ec384 = genpair("CKM_EC_KEY_PAIR_GEN", "py-ec384", b"\xec\x02", [(P.CKA_EC_PARAMS, P384)] + ec_use[0], ec_use[1])
    rsak = genpair("CKM_RSA_PKCS_KEY_PAIR_GEN", "py-rsa", b"\x5a",
                   [(P.CKA_MODULUS_BITS, 2048), (P.CKA_PUBLIC_EXPONENT, b"\x01\x00\x01"), (P.CKA_VERIFY, T),
                    (P.CKA_ENCRYPT, T)], [(P.CKA_SIGN, T), (P.CKA_DECRYPT, T)])
    edk = genpair("CKM_EC_EDWARDS_KEY_PAIR_GEN", "py-ed25519", b"\xed",
                  [(P.CKA_EC_PARAMS, ED25519)] + ec_use[0], ec_use[1])

    # Known-value keys (C_CreateObject) for independent checks of symmetric results.
    def create(label, kid, value, kt, extra):
        h = s.createObject([(P.CKA_CLASS, P.CKO_SECRET_KEY), (P.CKA_KEY_TYPE, kt), (P.CKA_LABEL, label),
                            (P.CKA_ID, kid), (P.CKA_VALUE, value)] + extra)
        in_session("C_CreateObject", s, key_label=label, key_id=kid.hex())
        return h

    kaes = os.urandom(32)
    kmac = os.urandom(32)
    kkek = os.urandom(16)
    aesk = create("py-aes-known", b"\x10", kaes, P.CKK_AES,
                  [(P.CKA_ENCRYPT, T), (P.CKA_DECRYPT, T), (P.CKA_SENSITIVE, F), (P.CKA_EXTRACTABLE, T)])
    mack = create("py-hmac-known", b"\x11", kmac, P.CKK_GENERIC_SECRET,
                  [(P.CKA_SIGN, T), (P.CKA_VERIFY, T), (P.CKA_SENSITIVE, F), (P.CKA_EXTRACTABLE, T)])
    kek = create("py-kek", b"\x12", kkek, P.CKK_AES, [(P.CKA_WRAP, T), (P.CKA_UNWRAP, T), (P.CKA_SENSITIVE, T)])

    # -- public keys (public attributes: no records) --
    pub = {name: public_key(s, pair[0]) for name, pair in
           (("ec256", ec256), ("ec384", ec384), ("rsa", rsak), ("ed", edk))}
    check(len(b(attr(s, rsak[0], [P.CKA_MODULUS])[0])) == 256, "RSA modulus is 2048 bits")

    data = os.urandom(3000)
    small = data[:200]

    def sign(key, mech, msg, label, kid, m=None):
        sig = b(s.sign(key, msg, m or P.Mechanism(ckr(mech), None)))
        in_session("C_Sign", s, mechanism=mech, key_label=label, key_id=kid.hex())
        used(mech)
        return sig

    def verify(key, mech, msg, sig, label, kid, m=None, good=True):
        ok = s.verify(key, msg, sig, m or P.Mechanism(ckr(mech), None))
        check(ok == good, "%s: token verify gave %s" % (mech, ok))
        in_session("C_Verify", s, "CKR_OK" if good else "CKR_SIGNATURE_INVALID", mechanism=mech, key_label=label,
                   key_id=kid.hex())

    def sign_parts(key, mech, msg, label, kid, m=None):
        mn = (m or P.Mechanism(ckr(mech), None)).to_native()
        ll("C_SignInit", s.session, mn, key)
        for i in range(0, len(msg), 1000):
            ll("C_SignUpdate", s.session, P.ckbytelist(msg[i:i + 1000]))
        out = buf(512)
        ll("C_SignFinal", s.session, out)
        in_session("C_SignFinal", s, mechanism=mech, key_label=label, key_id=kid.hex())
        return b(out)

    def verify_parts(key, mech, msg, sig, label, kid, m=None, good=True):
        mn = (m or P.Mechanism(ckr(mech), None)).to_native()
        ll("C_VerifyInit", s.session, mn, key)
        for i in range(0, len(msg), 1000):
            ll("C_VerifyUpdate", s.session, P.ckbytelist(msg[i:i + 1000]))
        rv = ll_rv("C_VerifyFinal", s.session, P.ckbytelist(sig))
        want = "CKR_OK" if good else "CKR_SIGNATURE_INVALID"
        check(rv == ckr(want), "%s: VerifyFinal %s, not %s" % (mech, P.CKR.get(rv), want))
        in_session("C_VerifyFinal", s, want, mechanism=mech, key_label=label, key_id=kid.hex())

    def flip(x):
        return x[:len(x) // 2] + bytes([x[len(x) // 2] ^ 1]) + x[len(x) // 2 + 1:]

    sha = {"sha256": hashlib.sha256, "sha384": hashlib.sha384}
    H = {"sha256": hashes.SHA256, "sha384": hashes.SHA384} if HAVE_CRYPTOGRAPHY else \
        {"sha256": type("h", (), {"name": "sha256"}), "sha384": type("h", (), {"name": "sha384"})}

    # -- ECDSA --
    for name, pair, label, kid, hn, mech in (("ec256", ec256, "py-ec256", b"\xec\x01", "sha256", "CKM_ECDSA_SHA256"),
                                             ("ec384", ec384, "py-ec384", b"\xec\x02", "sha384", "CKM_ECDSA_SHA384")):
        hp, hk = pair
        n = 32 if name == "ec256" else 48
        dg = sha[hn](data).digest()
        sig = sign(hk, "CKM_ECDSA", dg, label, kid)
        check(len(sig) == 2 * n, "ECDSA r||s length")
        check(pub[name].verify(sig, dg, "ecdsa-prehashed", H[hn]), "CKM_ECDSA %s: independent verify" % name)
        check(not pub[name].verify(flip(sig), dg, "ecdsa-prehashed", H[hn]), "independent verify of a bad sig")
        verify(hp, "CKM_ECDSA", dg, sig, label, kid)
        verify(hp, "CKM_ECDSA", dg, flip(sig), label, kid, good=False)
        sig = sign(hk, mech, small, label, kid)
        check(pub[name].verify(sig, small, "ecdsa", H[hn]), "%s: independent verify" % mech)
        verify(hp, mech, small, sig, label, kid)
        sig = sign_parts(hk, mech, data, label, kid)
        check(pub[name].verify(sig, data, "ecdsa", H[hn]), "%s multi-part: independent verify" % mech)
        verify_parts(hp, mech, data, sig, label, kid)
        verify_parts(hp, mech, data, flip(sig), label, kid, good=False)
    # raw ECDSA is single-part: C_SignUpdate refused and recorded
    ll("C_SignInit", s.session, P.Mechanism(P.CKM_ECDSA, None).to_native(), ec256[1])
    rv = ll_rv("C_SignUpdate", s.session, P.ckbytelist(small))
    check(rv != P.CKR_OK, "CKM_ECDSA accepted C_SignUpdate")
    in_session("C_SignUpdate", s, P.CKR[rv], mechanism="CKM_ECDSA", key_label="py-ec256", key_id="ec01")

    # -- RSA --
    hp, hk = rsak
    R = dict(label="py-rsa", kid=b"\x5a")
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(small).digest()
    sig = sign(hk, "CKM_RSA_PKCS", digest_info, **R)
    check(pub["rsa"].verify(sig, small, "pkcs1", H["sha256"]), "CKM_RSA_PKCS: independent verify")
    verify(hp, "CKM_RSA_PKCS", digest_info, sig, **R)
    sig = sign(hk, "CKM_SHA256_RSA_PKCS", small, **R)
    check(pub["rsa"].verify(sig, small, "pkcs1", H["sha256"]), "CKM_SHA256_RSA_PKCS: independent verify")
    verify(hp, "CKM_SHA256_RSA_PKCS", small, flip(sig), **R, good=False)
    sig = sign_parts(hk, "CKM_SHA256_RSA_PKCS", data, **R)
    check(pub["rsa"].verify(sig, data, "pkcs1", H["sha256"]), "CKM_SHA256_RSA_PKCS multi-part: independent")
    verify_parts(hp, "CKM_SHA256_RSA_PKCS", data, sig, **R)
    pss = P.RSA_PSS_Mechanism(P.CKM_RSA_PKCS_PSS, P.CKM_SHA256, P.CKG_MGF1_SHA256, 32)
    dg = hashlib.sha256(data).digest()
    sig = sign(hk, "CKM_RSA_PKCS_PSS", dg, **R, m=pss)
    check(pub["rsa"].verify(sig, dg, "pss-prehashed", H["sha256"]), "CKM_RSA_PKCS_PSS: independent verify")
    verify(hp, "CKM_RSA_PKCS_PSS", dg, sig, **R, m=pss)
    pss2 = P.RSA_PSS_Mechanism(P.CKM_SHA256_RSA_PKCS_PSS, P.CKM_SHA256, P.CKG_MGF1_SHA256, 32)
    sig = sign(hk, "CKM_SHA256_RSA_PKCS_PSS", small, **R, m=pss2)
    check(pub["rsa"].verify(sig, small, "pss", H["sha256"]), "CKM_SHA256_RSA_PKCS_PSS: independent verify")
    verify(hp, "CKM_SHA256_RSA_PKCS_PSS", small, sig, **R, m=pss2)
    sig = sign_parts(hk, "CKM_SHA256_RSA_PKCS_PSS", data, **R, m=pss2)
    check(pub["rsa"].verify(sig, data, "pss", H["sha256"]), "CKM_SHA256_RSA_PKCS_PSS multi-part: independent")
    verify_parts(hp, "CKM_SHA256_RSA_PKCS_PSS", data, sig, **R, m=pss2)
    # RSA encryption: OpenSSL encrypts to the token's public key, the token decrypts;
    # the token encrypts and decrypts its own.
    msg = os.urandom(100)

    def dec(key, mech, ct, label, kid, m=None, rv="CKR_OK"):
        mm = m or P.Mechanism(ckr(mech), None)
        if rv != "CKR_OK":
            raises(rv, s.decrypt, key, ct, mm)
            in_session("C_Decrypt", s, rv, mechanism=mech, key_label=label, key_id=kid.hex())
            return None
        out = b(s.decrypt(key, ct, mm))
        in_session("C_Decrypt", s, mechanism=mech, key_label=label, key_id=kid.hex())
        used(mech)
        return out

    def enc(key, mech, pt, label, kid, m=None):
        out = b(s.encrypt(key, pt, m or P.Mechanism(ckr(mech), None)))
        in_session("C_Encrypt", s, mechanism=mech, key_label=label, key_id=kid.hex())
        used(mech)
        return out

    check(dec(hk, "CKM_RSA_PKCS", pub["rsa"].rsa_encrypt(msg, "pkcs1"), **R) == msg, "RSA-PKCS decrypt of OpenSSL's")
    check(dec(hk, "CKM_RSA_PKCS", enc(hp, "CKM_RSA_PKCS", msg, **R), **R) == msg, "RSA-PKCS round trip")
    oaep = P.RSAOAEPMechanism(P.CKM_SHA256, P.CKG_MGF1_SHA256)
    check(dec(hk, "CKM_RSA_PKCS_OAEP", pub["rsa"].rsa_encrypt(msg, "oaep", "sha256"), **R, m=oaep) == msg,
          "RSA-OAEP SHA-256 decrypt of OpenSSL's")
    oaep1 = P.RSAOAEPMechanism(P.CKM_SHA_1, P.CKG_MGF1_SHA1, b"label")
    check(dec(hk, "CKM_RSA_PKCS_OAEP", pub["rsa"].rsa_encrypt(msg, "oaep", "sha1", b"label"), **R, m=oaep1) == msg,
          "RSA-OAEP SHA-1 with a label: decrypt of OpenSSL's")
    check(dec(hk, "CKM_RSA_PKCS_OAEP", enc(hp, "CKM_RSA_PKCS_OAEP", msg, **R, m=oaep), **R, m=oaep) == msg,
          "RSA-OAEP round trip")
    dec(hk, "CKM_RSA_PKCS_OAEP", pub["rsa"].rsa_encrypt(msg, "oaep", "sha256"), **R, m=oaep1,
        rv="CKR_ENCRYPTED_DATA_INVALID")

    # -- Ed25519 --
    hp, hk = edk
    sig = sign(hk, "CKM_EDDSA", data, "py-ed25519", b"\xed")
    check(len(sig) == 64, "Ed25519 signature length")
    check(pub["ed"].verify(sig, data, "eddsa"), "CKM_EDDSA: independent verify")
    check(not pub["ed"].verify(flip(sig), data, "eddsa"), "CKM_EDDSA: independent verify of a bad signature")
    verify(hp, "CKM_EDDSA", data, sig, "py-ed25519", b"\xed")
    verify(hp, "CKM_EDDSA", data, flip(sig), "py-ed25519", b"\xed", good=False)

    # -- HMAC --
    mac = sign(mack, "CKM_SHA256_HMAC", data, "py-hmac-known", b"\x11")
    check(mac == hmac.new(kmac, data, hashlib.sha256).digest(), "HMAC-SHA256 differs from Python's")
    check(sign_parts(mack, "CKM_SHA256_HMAC", data, "py-hmac-known", b"\x11") == mac, "HMAC multi-part")
    verify(mack, "CKM_SHA256_HMAC", data, mac, "py-hmac-known", b"\x11")
    verify_parts(mack, "CKM_SHA256_HMAC", data, flip(mac), "py-hmac-known", b"\x11", good=False)
    mac2 = sign(gsec, "CKM_SHA256_HMAC", small, "py-gsec", b"\x04")
    verify(gsec, "CKM_SHA256_HMAC", small, mac2, "py-gsec", b"\x04")
    for mech, fn in (("CKM_SHA384_HMAC", hashlib.sha384), ("CKM_SHA512_HMAC", hashlib.sha512)):
        m = sign(mack, mech, data, "py-hmac-known", b"\x11")
        check(m == hmac.new(kmac, data, fn).digest(), mech + " differs from Python's")
        check(sign_parts(mack, mech, data, "py-hmac-known", b"\x11") == m, mech + " multi-part")
        verify(mack, mech, data, m, "py-hmac-known", b"\x11")
        verify(mack, mech, data, flip(m), "py-hmac-known", b"\x11", good=False)
    # AES-CMAC (RFC 4493) with a known key
    kcm = os.urandom(16)
    cmk = create("py-cmac-known", b"\x15", kcm, P.CKK_AES, [(P.CKA_SIGN, T), (P.CKA_VERIFY, T)])
    m = sign(cmk, "CKM_AES_CMAC", data, "py-cmac-known", b"\x15")
    c = cmac.CMAC(algorithms.AES(kcm))
    c.update(data)
    check(m == c.finalize(), "AES-CMAC differs from OpenSSL's (cryptography)")
    check(sign_parts(cmk, "CKM_AES_CMAC", data, "py-cmac-known", b"\x15") == m, "AES-CMAC multi-part")
    verify(cmk, "CKM_AES_CMAC", data, m, "py-cmac-known", b"\x15")
    verify(cmk, "CKM_AES_CMAC", data, flip(m), "py-cmac-known", b"\x15", good=False)

    # -- AES --
    A = dict(label="py-aes-known", kid=b"\x10")
    iv = os.urandom(16)
    pt32, pt100 = data[:32], data[:100]
    ct = enc(aesk, "CKM_AES_ECB", pt32, **A)
    check(ct == aes_ref(kaes, "ecb", pt32), "AES-ECB differs from OpenSSL's")
    check(dec(aesk, "CKM_AES_ECB", ct, **A) == pt32, "AES-ECB decrypt")
    cbc = P.Mechanism(P.CKM_AES_CBC, iv)
    ct = enc(aesk, "CKM_AES_CBC", pt32, **A, m=cbc)
    check(ct == aes_ref(kaes, "cbc", pt32, iv), "AES-CBC differs from OpenSSL's")
    check(dec(aesk, "CKM_AES_CBC", ct, **A, m=cbc) == pt32, "AES-CBC decrypt")
    cbcpad = P.Mechanism(P.CKM_AES_CBC_PAD, iv)
    ct = enc(aesk, "CKM_AES_CBC_PAD", pt100, **A, m=cbcpad)
    check(ct == aes_ref(kaes, "cbc", pt100, iv, pad=True), "AES-CBC-PAD differs from OpenSSL's")
    check(dec(aesk, "CKM_AES_CBC_PAD", aes_ref(kaes, "cbc", pt100, iv, pad=True), **A, m=cbcpad) == pt100,
          "AES-CBC-PAD: the token did not decrypt OpenSSL's")
    check(aes_ref(kaes, "cbc", ct, iv, pad=True, decrypt=True) == pt100, "OpenSSL did not decrypt the token's")

    def enc_parts(key, mech, m, pt, chunks, label, kid, decrypt=False):
        n = (P.Mechanism(ckr(mech), None) if m is None else m).to_native()
        ll("C_DecryptInit" if decrypt else "C_EncryptInit", s.session, n, key)
        out, pos = b"", 0
        for c in chunks:
            o = buf(len(pt) + 64)
            ll("C_DecryptUpdate" if decrypt else "C_EncryptUpdate", s.session, P.ckbytelist(pt[pos:pos + c]), o)
            out += b(o)
            pos += c
        o = buf(len(pt) + 64)
        ll("C_DecryptFinal" if decrypt else "C_EncryptFinal", s.session, o)
        in_session("C_DecryptFinal" if decrypt else "C_EncryptFinal", s, mechanism=mech, key_label=label,
                   key_id=kid.hex())
        return out + b(o)

    check(enc_parts(aesk, "CKM_AES_CBC_PAD", cbcpad, pt100, [7, 50, 43], **A) == ct, "AES-CBC-PAD multi-part")
    check(enc_parts(aesk, "CKM_AES_CBC_PAD", cbcpad, ct, [5, 16, 91], **A, decrypt=True) == pt100,
          "AES-CBC-PAD multi-part decrypt")
    check(enc_parts(aesk, "CKM_AES_ECB", None, pt32, [3, 29], **A) == aes_ref(kaes, "ecb", pt32),
          "AES-ECB multi-part")
    check(enc_parts(aesk, "CKM_AES_CBC", cbc, aes_ref(kaes, "cbc", pt32, iv), [16, 16], **A, decrypt=True) == pt32,
          "AES-CBC multi-part decrypt")
    # a generated, sensitive AES key: round trips only
    ct = enc(aes, "CKM_AES_CBC_PAD", pt100, "py-aes", b"\x01\x02", m=cbcpad)
    check(dec(aes, "CKM_AES_CBC_PAD", ct, "py-aes", b"\x01\x02", m=cbcpad) == pt100, "AES-256 round trip")
    ct = enc(aes128, "CKM_AES_ECB", pt32, "py-aes128", b"\x03")
    check(dec(aes128, "CKM_AES_ECB", ct, "py-aes128", b"\x03") == pt32, "AES-128 round trip")
    # GCM
    gn, aad = os.urandom(12), b"header"
    gcm = P.AES_GCM_Mechanism(gn, aad, 128)
    ct = enc(aesk, "CKM_AES_GCM", pt100, **A, m=gcm)
    check(len(ct) == 116, "AES-GCM: ciphertext + 16-byte tag")
    if HAVE_CRYPTOGRAPHY:
        check(ct == AESGCM(kaes).encrypt(gn, pt100, aad), "AES-GCM differs from OpenSSL's")
        check(dec(aesk, "CKM_AES_GCM", AESGCM(kaes).encrypt(gn, pt32, aad), **A, m=gcm) == pt32,
              "AES-GCM: the token did not decrypt OpenSSL's")
    else:
        print("token_pykcs11: no python3-cryptography: AES-GCM checked by round trip only")
    check(dec(aesk, "CKM_AES_GCM", ct, **A, m=gcm) == pt100, "AES-GCM decrypt")
    check(enc_parts(aesk, "CKM_AES_GCM", gcm, pt100, [10, 90], **A) == ct, "AES-GCM multi-part")
    check(enc_parts(aesk, "CKM_AES_GCM", gcm, ct, [60, 56], **A, decrypt=True) == pt100, "AES-GCM multi-part decrypt")
    dec(aesk, "CKM_AES_GCM", flip(ct), **A, m=gcm, rv="CKR_ENCRYPTED_DATA_INVALID")
    dec(aesk, "CKM_AES_GCM", ct, **A, m=P.AES_GCM_Mechanism(gn, b"other", 128), rv="CKR_ENCRYPTED_DATA_INVALID")
    # CTR: CK_AES_CTR_PARAMS { CK_ULONG ulCounterBits; CK_BYTE cb[16]; } (PyKCS11 1.5 has no wrapper)
    cb = os.urandom(12) + b"\x00\x00\x00\x00"
    ctr = P.Mechanism(P.CKM_AES_CTR, struct.pack("@L16s", 32, cb))  # native CK_ULONG
    pt77 = data[:77]
    ct = enc(aesk, "CKM_AES_CTR", pt77, **A, m=ctr)
    e = Cipher(algorithms.AES(kaes), modes.CTR(cb)).encryptor()
    check(ct == e.update(pt77) + e.finalize(), "AES-CTR differs from OpenSSL's (cryptography)")
    check(dec(aesk, "CKM_AES_CTR", ct, **A, m=ctr) == pt77, "AES-CTR decrypt")
    check(enc_parts(aesk, "CKM_AES_CTR", ctr, pt77, [5, 40, 32], **A) == ct, "AES-CTR multi-part")

    # -- digests: no records --
    for mech, fn in (("CKM_SHA_1", hashlib.sha1), ("CKM_SHA224", hashlib.sha224), ("CKM_SHA256", hashlib.sha256),
                     ("CKM_SHA384", hashlib.sha384), ("CKM_SHA512", hashlib.sha512)):
        check(b(s.digest(data, P.Mechanism(ckr(mech), None))) == fn(data).digest(), mech)
        ds = s.digestSession(P.Mechanism(ckr(mech), None))
        for i in range(0, len(data), 999):
            ds.update(data[i:i + 999])
        check(b(ds.final()) == fn(data).digest(), mech + " multi-part")
        used(mech)
    # C_DigestKey: a key's value enters a digest (a durable record)
    ds = s.digestSession(P.Mechanism(P.CKM_SHA256, None))
    ds.update(b"prefix")
    ds.digestKey(mack)
    in_session("C_DigestKey", s, mechanism="CKM_SHA256", key_label="py-hmac-known", key_id="11")
    check(b(ds.final()) == hashlib.sha256(b"prefix" + kmac).digest(), "C_DigestKey")

    # -- wrap / unwrap --
    W = dict(key_label="py-aes128", key_id="03")
    wrapped = b(s.wrapKey(kek, aes128, P.Mechanism(P.CKM_AES_KEY_WRAP, None)))
    # two keys: the wrapping (unwrapping) key, then the wrapped (new) one
    KEK = dict(key_label="py-kek", key_id="12")
    in_session("C_WrapKey", s, mechanism="CKM_AES_KEY_WRAP", key2_label="py-aes128", key2_id="03", **KEK)
    used("CKM_AES_KEY_WRAP")
    check(len(wrapped) == 24, "AES key wrap of a 16-byte key")
    raw128 = b(attr(s, aes128, [P.CKA_VALUE])[0])  # not sensitive: returned, recorded
    in_session("C_GetAttributeValue", s, detail="CKA_VALUE", **W)
    if HAVE_CRYPTOGRAPHY:
        check(keywrap.aes_key_unwrap(kkek, wrapped) == raw128, "AES key wrap differs from RFC 3394")
    uw_t = [(P.CKA_CLASS, P.CKO_SECRET_KEY), (P.CKA_KEY_TYPE, P.CKK_AES), (P.CKA_LABEL, "py-unwrapped"),
            (P.CKA_ID, b"\x13"), (P.CKA_ENCRYPT, T), (P.CKA_DECRYPT, T)]
    uw = s.unwrapKey(kek, wrapped, uw_t, P.Mechanism(P.CKM_AES_KEY_WRAP, None))
    in_session("C_UnwrapKey", s, mechanism="CKM_AES_KEY_WRAP", key2_label="py-unwrapped", key2_id="13", **KEK)
    check(enc(uw, "CKM_AES_ECB", pt32, "py-unwrapped", b"\x13") == aes_ref(raw128, "ecb", pt32),
          "the unwrapped key is not the wrapped one")
    raises("CKR_WRAPPED_KEY_INVALID", s.unwrapKey, kek, flip(wrapped), uw_t, P.Mechanism(P.CKM_AES_KEY_WRAP, None))
    in_session("C_UnwrapKey", s, "CKR_WRAPPED_KEY_INVALID", mechanism="CKM_AES_KEY_WRAP", **KEK)
    raises("CKR_KEY_UNEXTRACTABLE", s.wrapKey, kek, aes, P.Mechanism(P.CKM_AES_KEY_WRAP, None))
    in_session("C_WrapKey", s, "CKR_KEY_UNEXTRACTABLE", mechanism="CKM_AES_KEY_WRAP", key2_label="py-aes",
               key2_id="0102", **KEK)
    # _PAD: a 32-byte secret and an (extractable) EC private key as PKCS#8
    wrapped = b(s.wrapKey(kek, mack, P.Mechanism(P.CKM_AES_KEY_WRAP_PAD, None)))
    in_session("C_WrapKey", s, mechanism="CKM_AES_KEY_WRAP_PAD", key2_label="py-hmac-known", key2_id="11", **KEK)
    used("CKM_AES_KEY_WRAP_PAD")
    if HAVE_CRYPTOGRAPHY:
        check(keywrap.aes_key_unwrap_with_padding(kkek, wrapped) == kmac, "AES key wrap with padding (RFC 5649)")
    uw = s.unwrapKey(kek, wrapped, [(P.CKA_CLASS, P.CKO_SECRET_KEY), (P.CKA_KEY_TYPE, P.CKK_GENERIC_SECRET),
                                     (P.CKA_LABEL, "py-unwrapped-mac"), (P.CKA_SIGN, T)],
                     P.Mechanism(P.CKM_AES_KEY_WRAP_PAD, None))
    in_session("C_UnwrapKey", s, mechanism="CKM_AES_KEY_WRAP_PAD", key2_label="py-unwrapped-mac", key2_id=None,
               **KEK)
    check(sign(uw, "CKM_SHA256_HMAC", data, "py-unwrapped-mac", b"") == mac, "unwrapped HMAC key")
    ecx = genpair("CKM_EC_KEY_PAIR_GEN", "py-ec-x", b"\xec\x03", [(P.CKA_EC_PARAMS, P256), (P.CKA_VERIFY, T)],
                  [(P.CKA_SIGN, T), (P.CKA_EXTRACTABLE, T)])
    wrapped = b(s.wrapKey(kek, ecx[1], P.Mechanism(P.CKM_AES_KEY_WRAP_PAD, None)))
    in_session("C_WrapKey", s, mechanism="CKM_AES_KEY_WRAP_PAD", key2_label="py-ec-x", key2_id="ec03", **KEK)
    if HAVE_CRYPTOGRAPHY:
        pk = serialization.load_der_private_key(keywrap.aes_key_unwrap_with_padding(kkek, wrapped), None)
        check(pk.public_key().public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo) ==
              public_key(s, ecx[0]).spki, "the wrapped PKCS#8 is not the key pair's private key")
    uw = s.unwrapKey(kek, wrapped, [(P.CKA_CLASS, P.CKO_PRIVATE_KEY), (P.CKA_KEY_TYPE, P.CKK_EC),
                                     (P.CKA_LABEL, "py-ec-unwrapped"), (P.CKA_ID, b"\xec\x04"), (P.CKA_SIGN, T),
                                     (P.CKA_PRIVATE, T)], P.Mechanism(P.CKM_AES_KEY_WRAP_PAD, None))
    in_session("C_UnwrapKey", s, mechanism="CKM_AES_KEY_WRAP_PAD", key2_label="py-ec-unwrapped", key2_id="ec04",
               **KEK)
    sig = sign(uw, "CKM_ECDSA_SHA256", small, "py-ec-unwrapped", b"\xec\x04")
    check(public_key(s, ecx[0]).verify(sig, small, "ecdsa", H["sha256"]), "the unwrapped EC key signs as the original")

    # -- attributes --
    def get_rv(h, t):
        tmpl = LowLevel.ckattrlist(1)
        tmpl[0].SetType(t)
        return ll_rv("C_GetAttributeValue", s.session, h, tmpl)

    for h, t, what in ((aes, P.CKA_VALUE, "sensitive AES key"), (gsec, P.CKA_VALUE, "sensitive secret"),
                       (ec256[1], P.CKA_VALUE, "EC private key"), (rsak[1], P.CKA_PRIVATE_EXPONENT, "RSA d"),
                       (rsak[1], P.CKA_PRIME_1, "RSA p"), (edk[1], P.CKA_VALUE, "Ed25519 private key"),
                       (kek, P.CKA_VALUE, "sensitive known key")):
        rv = get_rv(h, t)
        check(rv == P.CKR_ATTRIBUTE_SENSITIVE, "%s: C_GetAttributeValue gave %s" % (what, P.CKR.get(rv, rv)))
    v = s.getAttributeValue(mack, [P.CKA_VALUE], allAsBinary=True)[0]
    check(b(v) == kmac, "CKA_VALUE of a non-sensitive key")
    in_session("C_GetAttributeValue", s, detail="CKA_VALUE", key_label="py-hmac-known", key_id="11")
    lab, loc, asens, nex, kgm = s.getAttributeValue(aes, [P.CKA_LABEL, P.CKA_LOCAL, P.CKA_ALWAYS_SENSITIVE,
                                                          P.CKA_NEVER_EXTRACTABLE, P.CKA_KEY_GEN_MECHANISM])
    check((lab, loc, asens, nex, kgm) == ("py-aes", True, True, True, P.CKM_AES_KEY_GEN),
          "attributes of a generated key: %r" % ((lab, loc, asens, nex, kgm),))
    check(s.getAttributeValue(aesk, [P.CKA_LOCAL])[0] is False, "an imported key is not CKA_LOCAL")
    raises("CKR_ATTRIBUTE_READ_ONLY", s.setAttributeValue, aes, [(P.CKA_SENSITIVE, F)])
    in_session("C_SetAttributeValue", s, "CKR_ATTRIBUTE_READ_ONLY", key_label="py-aes", key_id="0102")
    raises("CKR_ATTRIBUTE_READ_ONLY", s.setAttributeValue, aes, [(P.CKA_EXTRACTABLE, T)])
    in_session("C_SetAttributeValue", s, "CKR_ATTRIBUTE_READ_ONLY", key_label="py-aes", key_id="0102")
    s.setAttributeValue(aes, [(P.CKA_LABEL, "py-aes-renamed")])
    in_session("C_SetAttributeValue", s, key_label="py-aes-renamed", key_id="0102")
    check(s.getAttributeValue(aes, [P.CKA_LABEL])[0] == "py-aes-renamed", "C_SetAttributeValue of CKA_LABEL")
    s.setAttributeValue(aesk, [(P.CKA_SENSITIVE, T)])
    in_session("C_SetAttributeValue", s, key_label="py-aes-known", key_id="10")
    check(get_rv(aesk, P.CKA_VALUE) == P.CKR_ATTRIBUTE_SENSITIVE, "CKA_SENSITIVE set: value refused")
    ct = enc(aes, "CKM_AES_CBC_PAD", pt32, "py-aes-renamed", b"\x01\x02", m=cbcpad)

    # -- copy / destroy / find --
    cp = copy_object(s, mack, [(P.CKA_LABEL, b"py-hmac-copy"), (P.CKA_ID, b"\x14")])
    in_session("C_CopyObject", s, key_label="py-hmac-copy", key_id="14")
    check(sign(cp, "CKM_SHA256_HMAC", data, "py-hmac-copy", b"\x14") == mac, "the copy signs as the original")

    def find(tmpl, n, actor="user"):
        found = s.findObjects(tmpl)
        check(len(found) == n, "C_FindObjects %r: %d objects, not %d" % (tmpl, len(found), n))
        in_session("C_FindObjectsFinal", s, detail="matched=%d" % n, actor=actor)
        return found

    find([(P.CKA_LABEL, "py-hmac-copy")], 1)
    # secret keys: 3 generated, 3 created, 2 unwrapped, the copy; private
    # keys: 5 generated, 1 unwrapped
    find([(P.CKA_CLASS, P.CKO_SECRET_KEY)], 10)
    find([(P.CKA_CLASS, P.CKO_PRIVATE_KEY)], 6)
    find([(P.CKA_ID, b"\xec\x01")], 2)
    find([(P.CKA_LABEL, "nothing")], 0)
    s.destroyObject(cp)
    in_session("C_DestroyObject", s, key_label="py-hmac-copy", key_id="14")
    find([(P.CKA_LABEL, "py-hmac-copy")], 0)
    raises("CKR_KEY_HANDLE_INVALID", s.sign, cp, data, P.Mechanism(P.CKM_SHA256_HMAC, None))
    in_session("C_SignInit", s, "CKR_KEY_HANDLE_INVALID", mechanism="CKM_SHA256_HMAC")
    raises("CKR_OBJECT_HANDLE_INVALID", s.destroyObject, cp)
    in_session("C_DestroyObject", s, "CKR_OBJECT_HANDLE_INVALID")
    # -- ECDH (CKM_ECDH1_DERIVE): the token's Z and KDF output == cryptography's --
    peer = ec.generate_private_key(ec.SECP256R1())
    peer_pt = peer.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    raises("CKR_KEY_FUNCTION_NOT_PERMITTED", s.deriveKey, ec256[1], [(P.CKA_CLASS, P.CKO_SECRET_KEY)],
           P.ECDH1_DERIVE_Mechanism(peer_pt))  # no CKA_DERIVE
    in_session("C_DeriveKey", s, "CKR_KEY_FUNCTION_NOT_PERMITTED", mechanism="CKM_ECDH1_DERIVE",
               key_label="py-ec256", key_id="ec01")
    dhp, dhk = genpair("CKM_EC_KEY_PAIR_GEN", "py-ecdh", b"\xdd", [(P.CKA_EC_PARAMS, P256)], [(P.CKA_DERIVE, T)])
    dh_pub = public_key(s, dhp)
    z = peer.exchange(ec.ECDH(), dh_pub.obj)
    out_t = [(P.CKA_CLASS, P.CKO_SECRET_KEY), (P.CKA_KEY_TYPE, P.CKK_GENERIC_SECRET), (P.CKA_SENSITIVE, F),
             (P.CKA_EXTRACTABLE, T), (P.CKA_LABEL, "py-ecdh-z"), (P.CKA_ID, b"\xd1")]
    zk = s.deriveKey(dhk, out_t, P.ECDH1_DERIVE_Mechanism(peer_pt, P.CKD_NULL))
    # two keys: the base key, then the derived one
    in_session("C_DeriveKey", s, mechanism="CKM_ECDH1_DERIVE", key_label="py-ecdh", key_id="dd",
               key2_label="py-ecdh-z", key2_id="d1")
    used("CKM_ECDH1_DERIVE")
    check(b(attr(s, zk, [P.CKA_VALUE])[0]) == z, "ECDH (CKD_NULL): Z differs from cryptography's")
    in_session("C_GetAttributeValue", s, detail="CKA_VALUE", key_label="py-ecdh-z", key_id="d1")
    kdf_t = [(P.CKA_CLASS, P.CKO_SECRET_KEY), (P.CKA_KEY_TYPE, P.CKK_AES), (P.CKA_VALUE_LEN, 32),
             (P.CKA_SENSITIVE, F), (P.CKA_EXTRACTABLE, T), (P.CKA_LABEL, "py-ecdh-kdf"), (P.CKA_ID, b"\xd2")]
    kk = s.deriveKey(dhk, kdf_t, P.ECDH1_DERIVE_Mechanism(peer_pt, P.CKD_SHA256_KDF, b"py shared info"))
    in_session("C_DeriveKey", s, mechanism="CKM_ECDH1_DERIVE", key_label="py-ecdh", key_id="dd",
               key2_label="py-ecdh-kdf", key2_id="d2")
    want = X963KDF(algorithm=hashes.SHA256(), length=32, sharedinfo=b"py shared info").derive(z)
    check(b(attr(s, kk, [P.CKA_VALUE])[0]) == want, "ECDH (CKD_SHA256_KDF) differs from X9.63 KDF (cryptography)")
    in_session("C_GetAttributeValue", s, detail="CKA_VALUE", key_label="py-ecdh-kdf", key_id="d2")

    # -- random --
    r = b(s.generateRandom(48))
    check(len(r) == 48 and r != bytes(48), "C_GenerateRandom")
    in_session("C_GenerateRandom", s, detail="bytes=48")
    s.seedRandom(os.urandom(32))
    in_session("C_SeedRandom", s, detail="bytes=32")

    # -- every listed mechanism was called --
    check(exercised == table, "mechanisms listed but not exercised: %s" % (table - exercised))

    # -- logout: private objects disappear; close --
    s.logout()
    in_session("C_Logout", s)
    find([(P.CKA_CLASS, P.CKO_PRIVATE_KEY)], 0, actor="public")
    raises("CKR_USER_NOT_LOGGED_IN", s.logout)
    in_session("C_Logout", s, "CKR_USER_NOT_LOGGED_IN", actor="public")
    s2 = lib.openSession(0)
    in_session("C_OpenSession", s2, actor="public", detail="ro")
    s.closeSession()
    in_session("C_CloseSession", s, actor="public")
    lib.closeAllSessions(0)
    expect("C_CloseAllSessions", slot=0, actor="public")
    lib.lib.Unload()
    expect("C_Finalize", actor="public")


def check_trail():
    r = subprocess.run([VERIFY, AUDIT], capture_output=True, text=True)
    check(r.returncode == 0, "auditlog-verify exited %d:\n%s%s" % (r.returncode, r.stdout, r.stderr))
    check(r.stdout.startswith("intact"), "auditlog-verify: %s" % r.stdout)
    events = []
    for fn in sorted(os.listdir(AUDIT)):
        with open(os.path.join(AUDIT, fn), "rb") as fh:
            raw = fh.read()
        for p in PINS:
            check(p.encode() not in raw, "PIN %r in %s" % (p, fn))
        for line in raw.decode().splitlines():
            rec = json.loads(line)
            if rec["type"] == "event":
                events.append(rec)
    for root, _, fs in os.walk(os.path.join(work, "tokens")):
        for fn in fs:
            with open(os.path.join(root, fn), "rb") as fh:
                raw = fh.read()
            for p in PINS:
                check(p.encode() not in raw, "PIN %r in the token store %s" % (p, fn))
    # per action: the count of records equals the count of audited calls made
    count = {}
    for e in EXPECTED:
        count.setdefault(e["action"], [0, 0])[0] += 1
    for e in events:
        count.setdefault(e["action"], [0, 0])[1] += 1
    bad = {a: c for a, c in count.items() if c[0] != c[1]}
    check(not bad, "records per action (made, logged) differ: %s" % bad)
    # and field by field, in order
    check(len(events) == len(EXPECTED), "%d records, %d expected" % (len(events), len(EXPECTED)))
    keys = ("action", "outcome", "rv", "slot", "session", "mechanism", "key_label", "key_id", "key2_label",
            "key2_id", "actor", "detail")
    for i, (got, want) in enumerate(zip(events, EXPECTED)):
        for k in keys:
            if k not in want:
                if k in ("slot", "session", "mechanism", "key_label", "key_id", "key2_label", "key2_id") and k in got:
                    raise Fail("record %d (%s): unexpected %s=%r" % (i, want["action"], k, got[k]))
                continue
            g = got.get(k)
            check(g == want[k], "record %d seq %d (%s): %s is %r, expected %r" %
                  (i, got["seq"], want["action"], k, g, want[k]))
    return len(events), count


try:
    main()
    n, count = check_trail()
    print("token_pykcs11: all %d checks passed; %d audit records, one per audited call:" % (checks, n))
    print("  " + ", ".join("%s %d" % (a, c[0]) for a, c in sorted(count.items())))
    if not HAVE_CRYPTOGRAPHY:
        print("token_pykcs11: note: python3-cryptography missing, openssl checked what it can")
    rc = 0
except Exception as e:
    import traceback
    traceback.print_exc()
    print("token_pykcs11: FAIL: %s" % e, file=sys.stderr)
    rc = 1
finally:
    if os.environ.get("TOKEN_TEST_KEEP"):
        print("token_pykcs11: kept %s" % work, file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
sys.exit(rc)

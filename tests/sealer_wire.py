#!/usr/bin/env python3
"""auditlog-sealer's protocol from docs/sealer.md section 3 (written from that
text, not from the C): a real sealer on a temporary socket, raw SOCK_SEQPACKET
messages. Checks the header rules (version, status field, short message ->
-EPROTO; unknown operation -> -EOPNOTSUPP), exact body lengths (-EINVAL), HELLO's
answer against the key files, NOW's fields, a SEAL's answer (epoch never below the
request's, the sealer's key id), the binding of a connection to one chain
(another chain id -> -EPERM), SIGN only for the bound chain's origin (-EPERM
otherwise) and its signed note, CHECK_TAIL (-ESTALE above the state's epoch).
Args: auditlog-keygen auditlog-sealer"""
import errno, os, shutil, signal, socket, struct, subprocess, sys, tempfile, time

KEYGEN, SEALER = sys.argv[1], sys.argv[2]
OP_HELLO, OP_NOW, OP_SEAL, OP_SIGN, OP_CHECK = 1, 2, 3, 4, 5


def fail(msg):
    print("sealer_wire: " + msg, file=sys.stderr)
    sys.exit(1)


def call(s, op, body=b"", version=1, status=0, raw=None):
    s.send(raw if raw is not None else struct.pack("<HHi", version, op, status) + body)
    a = s.recv(4096)
    if len(a) < 8:
        fail("answer of %d bytes" % len(a))
    v, aop, st = struct.unpack("<HHi", a[:8])
    if v != 1:
        fail("answer version %d" % v)
    if st < 0 and len(a) != 8:
        fail("an error answer with a body")
    return st, a[8:]


def expect(st, want, what):
    if st != want:
        fail("%s: status %d, want %d" % (what, st, want))


def conn(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    s.connect(path)
    return s


def ts():
    t = time.time_ns()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 10**9)).encode() + \
        b".%09dZ" % (t % 10**9)


def seal_req(kind, epoch, seq, chain, has_prev=0, prev_kind=0, prev_seal=0, prev=b"\x11" * 32):
    b = struct.pack("<BBBBIQQ", kind, has_prev, prev_kind, 0, epoch, seq, prev_seal) + chain + prev + ts() + b"\0\0"
    assert len(b) == 120
    return b


def keyfile(path):
    d = {}
    for line in open(path):
        k, _, v = line.rstrip("\n").partition(" ")
        d.setdefault(k, v)
    return d


def main():
    d = tempfile.mkdtemp(prefix="auditlog-sealer-wire.")
    p = None
    try:
        k = os.path.join(d, "k")
        os.mkdir(k, 0o700)
        subprocess.run([KEYGEN, "--host", "wire-test", "--delta", "1", "--dir", k], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        st = keyfile(os.path.join(k, "sealing-state"))
        sock = os.path.join(d, "sock")
        p = subprocess.Popen([SEALER, "--state", os.path.join(k, "sealing-state"), "--signing-key",
                              os.path.join(k, "signing-key"), "--socket", sock],
                             stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        else:
            fail("no socket")

        # a second sealer on the same path is refused, and leaves it alone
        q = subprocess.run([SEALER, "--state", os.path.join(k, "sealing-state"), "--signing-key",
                            os.path.join(k, "signing-key"), "--socket", sock],
                           stderr=subprocess.PIPE, timeout=10)
        if q.returncode != 1 or b"File exists" not in q.stderr or not os.path.exists(sock):
            fail("second sealer on the socket: exit %d, %r" % (q.returncode, q.stderr))
        s = conn(sock)
        # header rules
        expect(call(s, OP_NOW, version=2)[0], -errno.EPROTO, "version 2")
        expect(call(s, OP_NOW, status=1)[0], -errno.EPROTO, "non-zero status field")
        expect(call(s, 0, raw=b"\1\0\2\0")[0], -errno.EPROTO, "4-byte message")
        expect(call(s, 99)[0], -errno.EOPNOTSUPP, "operation 99")
        # exact lengths
        expect(call(s, OP_HELLO, b"\0" * 39)[0], -errno.EINVAL, "HELLO of 39 bytes")
        expect(call(s, OP_NOW, b"\0")[0], -errno.EINVAL, "NOW with a body")
        expect(call(s, OP_CHECK, b"\0" * 13)[0], -errno.EINVAL, "CHECK_TAIL of 13 bytes")
        # HELLO
        r, a = call(s, OP_HELLO, b"\0" * 40)
        expect(r, 0, "HELLO")
        if len(a) != 88:
            fail("HELLO answer of %d bytes" % len(a))
        kid, t0, delta, hl = struct.unpack("<8sQQB", a[:25])
        if kid.hex() != st["key-id"] or t0 != int(st["t0"]) or delta != int(st["delta"]) or \
                a[25:25 + hl] != b"wire-test" or a[25 + hl:] != b"\0" * (63 - hl):
            fail("HELLO answer %r does not match the state" % a)
        expect(call(s, OP_HELLO, b"\0" * 32 + b"\x01" * 8)[0], -errno.ESTALE, "HELLO, another key id")
        # NOW
        r, a = call(s, OP_NOW)
        expect(r, 0, "NOW")
        if len(a) != 48:
            fail("NOW answer of %d bytes" % len(a))
        epoch, flags, bnow, bstart, bend, wall, expected = struct.unpack("<IIQQQQQ", a)
        if not (bstart <= bnow < bend and bend - bstart == delta and flags & ~1 == 0):
            fail("NOW answer %r" % (struct.unpack("<IIQQQQQ", a),))
        if abs(wall - time.time_ns()) > 5 * 10**9 or abs(wall - expected) > delta:
            fail("NOW: wall %d expected %d" % (wall, expected))
        # SEAL: bad fields, then a good one (epoch 0 asked: sealed with the current one)
        chain = b"0123456789abcdef0123456789abcdef"
        expect(call(s, OP_SEAL, seal_req(4, 0, 5, chain))[0], -errno.EINVAL, "SEAL kind 4")
        expect(call(s, OP_SEAL, seal_req(0, 0, 5, chain, has_prev=1))[0], -errno.EINVAL,
               "SEAL has_prev on a batch seal")
        expect(call(s, OP_SEAL, seal_req(0, 0, 5, b"0123456789ABCDEF0123456789abcdef"))[0],
               -errno.EINVAL, "SEAL, upper-case chain id")
        expect(call(s, OP_SEAL, seal_req(0, 0, 5, chain)[:-1])[0], -errno.EINVAL, "SEAL of 119 bytes")
        # a future epoch is refused (it would move the state past every writer)
        expect(call(s, OP_SEAL, seal_req(0, epoch + 1000, 5, chain))[0], -errno.EINVAL,
               "SEAL, an epoch 1000 ahead")
        r, a = call(s, OP_SEAL, seal_req(0, 0, 5, chain))
        expect(r, 0, "SEAL")
        if len(a) != 44:
            fail("SEAL answer of %d bytes" % len(a))
        sepoch, skid = struct.unpack("<I8s", a[:12])
        if not epoch <= sepoch <= epoch + 1 or skid.hex() != st["key-id"]:
            fail("SEAL answer: epoch %d (now %d), key id %s" % (sepoch, epoch, skid.hex()))
        # bound: another chain is refused on this connection
        other = b"fedcba9876543210fedcba9876543210"
        expect(call(s, OP_SEAL, seal_req(0, sepoch, 6, other))[0], -errno.EPERM, "SEAL, another chain")
        # SIGN: only the bound chain's origin
        origin = b"wire-test/auditlog/" + chain
        text = origin + b"\n1\n" + b"A" * 44 + b"\n"
        sign = lambda name, t: struct.pack("<HH", len(name), len(t)) + name + t
        other_origin = b"wire-test/auditlog/" + other
        expect(call(s, OP_SIGN, sign(other_origin, other_origin + b"\n1\n"))[0], -errno.EPERM,
               "SIGN, another chain's origin")
        expect(call(s, OP_SIGN, sign(origin, other_origin + b"\n1\n"))[0], -errno.EPERM,
               "SIGN, a text of another origin")
        expect(call(s, OP_SIGN, sign(other_origin, text))[0], -errno.EPERM,
               "SIGN, this chain's text under another chain's key name")
        expect(call(s, OP_SIGN, sign(origin, text)[:-1])[0], -errno.EINVAL, "SIGN, short")
        r, a = call(s, OP_SIGN, sign(origin, text))
        expect(r, 0, "SIGN")
        if not a.startswith(text + b"\n\xe2\x80\x94 " + origin + b" ") or not a.endswith(b"\n"):
            fail("SIGN answer %r" % a)
        # CHECK_TAIL
        expect(call(s, OP_CHECK, skid + struct.pack("<I", sepoch))[0], 0, "CHECK_TAIL at the epoch")
        expect(call(s, OP_CHECK, skid + struct.pack("<I", sepoch + 1000))[0], -errno.ESTALE,
               "CHECK_TAIL above the state")
        expect(call(s, OP_CHECK, b"\x01" * 8 + struct.pack("<I", 10**6))[0], 0,
               "CHECK_TAIL, another key")
        s.close()
        # a fresh connection with no chain cannot sign
        s = conn(sock)
        expect(call(s, OP_SIGN, sign(origin, text))[0], -errno.EPERM, "SIGN unbound")
        s.close()
        p.send_signal(signal.SIGTERM)
        if p.wait(10) != 0 or os.path.exists(sock):
            fail("SIGTERM: exit %s, socket %s" % (p.returncode, os.path.exists(sock)))
        p = None
        print("sealer_wire: ok")
    finally:
        if p:
            p.kill()
            p.wait()
        shutil.rmtree(d)


main()

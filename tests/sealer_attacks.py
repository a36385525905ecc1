#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""DESIGN.md's attacker table, the "with a sealer" case, on real processes.

One auditlog-sealer running as a user of its own (the keys in its 0700
directory, its clock moved through AUDITLOG_SEALER_TEST_CLOCK), writers of two
other users at once, the token (libsofttoken.so in token_mp_helper, format v2
through audit_sealer_socket) as one of them, and a fourth user the sealer does
not serve. Each row is shown and checked:

  refused    a peer of a user not allowed gets nothing (writer and token)
  no key     the application's user cannot read the sealing state or key
  writers    two users' writers and the token at once: every chain verifies
  epoch      the test clock moved one epoch: the sealer's timer advances the
             state with no request, the token's next seals use the new epoch
  restart    the sealer killed under the token: it fails closed
             (CKR_DEVICE_ERROR); a new session after the restart continues
             the chain, and everything verifies with both keys
  forge      the application rewrites a record of its own chain with what it
             holds (no key): a plain chain check passes, the seals say
             bad-seal, its self-signed checkpoints bad-checkpoint
  die        a writer killed with queued (unsynced) records: only those are
             lost, everything before them verifies

Needs root (useradd, and processes of several users): exits 77 otherwise.
Args: auditlog-keygen auditlog-sealer auditlog-verify sealer_writer
      token_mp_helper libsofttoken.so
"""
import atexit
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT_ATTACK = os.path.join(HERE, "..", "scripts", "root-attack.py")
CKR_OK, CKR_GENERAL_ERROR, CKR_DEVICE_ERROR = 0, 5, 0x30
DELTA = 60  # seconds: real time rarely crosses an epoch, the test clock does

if len(sys.argv) != 7:
    sys.exit(__doc__)
KEYGEN, SEALER, VERIFY, WRITER, HELPER, MODULE = sys.argv[1:]
if os.geteuid() != 0:
    print("sealer_attacks: not root: it needs useradd and processes of several users (CI runs it as root)")
    sys.exit(77)
if not shutil.which("useradd") or not shutil.which("userdel"):
    print("sealer_attacks: no useradd/userdel (package passwd): cannot make the test's users")
    sys.exit(77)

os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # never write into the source tree
tag = "%x" % (os.getpid() & 0xffffff)
names = {k: "alsa%s%s" % (k, tag) for k in "sabx"}  # sealer, app a, writer b, not allowed x
made = []
procs = []


def world_reachable(p):
    """can every user walk down to p (o+x on it and each directory above)?"""
    p = os.path.abspath(p)
    while True:
        if not os.stat(p).st_mode & 0o001:
            return False
        if p == "/":
            return True
        p = os.path.dirname(p)


# The test's users must reach its directory and run its programs: a package
# build's TMPDIR and build tree may lie in a 0700 directory (dpkg-buildpackage),
# so the directory goes to /var/tmp then, and the programs are run from copies.
base = os.environ.get("TMPDIR", "/var/tmp")
d = tempfile.mkdtemp(prefix="auditlog-sealer-attacks.", dir=base if world_reachable(base) else "/var/tmp")
sealer = None
failed = False
bindir = os.path.join(d, "bin")
os.mkdir(bindir)
os.chmod(bindir, 0o755)


def copy_exe(path, name=None):
    dst = os.path.join(bindir, name or os.path.basename(path))
    shutil.copyfile(path, dst)
    os.chmod(dst, 0o755)
    return dst


# the writer finds libauditlog.so in the build tree (its RUNPATH): a copy
# beside the programs, found first through LD_LIBRARY_PATH
for ln in subprocess.run(["ldd", WRITER], capture_output=True, text=True).stdout.splitlines():
    parts = ln.split()
    if len(parts) >= 3 and parts[0].startswith("libauditlog") and parts[1] == "=>":
        copy_exe(parts[2], parts[0])
KEYGEN, SEALER, VERIFY, WRITER, HELPER, MODULE = map(copy_exe, (KEYGEN, SEALER, VERIFY, WRITER, HELPER, MODULE))
os.environ["LD_LIBRARY_PATH"] = bindir + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")


def cleanup():
    global sealer
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if sealer and sealer.poll() is None:
        sealer.kill()
        sealer.wait()
    sealer = None
    shutil.rmtree(d, ignore_errors=True)
    while made:
        subprocess.run(["userdel", made.pop()], stderr=subprocess.DEVNULL)


atexit.register(cleanup)  # also after an unexpected exception: no process, user or file left


def fail(msg):
    print("sealer_attacks: FAIL: " + msg, file=sys.stderr)
    try:
        with open(os.path.join(d, "sealer.err")) as f:
            sys.stderr.write("".join("  sealer: " + ln for ln in f))
    except OSError:
        pass
    cleanup()
    sys.exit(1)


def ok(row, msg):
    print("%-8s %s" % (row, msg))


try:
    for n in names.values():
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", "--user-group", n],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("useradd %s: %s" % (n, r.stderr.strip()))
        made.append(n)
    U = {k: pwd.getpwnam(n) for k, n in names.items()}
except SystemExit:
    raise
except BaseException as e:  # noqa: B902
    fail("making the users: %r" % e)


def as_user(k):
    return {"user": U[k].pw_uid, "group": U[k].pw_gid, "extra_groups": []}


def mkdir(path, owner, mode):
    os.mkdir(path)
    os.chown(path, U[owner].pw_uid if owner else 0, U[owner].pw_gid if owner else 0)
    os.chmod(path, mode)
    return path


os.chmod(d, 0o711)
sdir = mkdir(os.path.join(d, "sealer"), "s", 0o700)
run = mkdir(os.path.join(d, "run"), "s", 0o755)
aud = mkdir(os.path.join(d, "auditor"), None, 0o700)
pub = mkdir(os.path.join(d, "pub"), None, 0o755)
home = {k: mkdir(os.path.join(d, k), k, 0o700) for k in "abx"}
sock = os.path.join(run, "sock")
clock = os.path.join(d, "clock")
STATE, SKEY = os.path.join(sdir, "sealing-state"), os.path.join(sdir, "signing-key")
VK, PK = os.path.join(aud, "verify-key"), os.path.join(pub, "pubkey")


def set_clock(seconds):
    with open(clock + ".tmp", "w") as f:
        f.write("%d\n" % seconds)
    os.chmod(clock + ".tmp", 0o644)
    os.rename(clock + ".tmp", clock)


def state_epoch():
    with open(STATE) as f:
        return int(re.search(r"^epoch (\d+)$", f.read(), re.M).group(1))


r = subprocess.run([KEYGEN, "--host", "attack-test", "--delta", str(DELTA), "--state", STATE,
                    "--signing-key", SKEY, "--pubkey", PK, "--verify-key", VK], capture_output=True)
if r.returncode != 0:
    fail("keygen: %s" % r.stderr.decode())
for f in (STATE, SKEY):
    os.chown(f, U["s"].pw_uid, U["s"].pw_gid)
set_clock(0)


def start_sealer():
    global sealer
    err = open(os.path.join(d, "sealer.err"), "a")
    env = dict(os.environ, AUDITLOG_SEALER_TEST_CLOCK=clock)
    sealer = subprocess.Popen([SEALER, "--state", STATE, "--signing-key", SKEY, "--socket", sock,
                               "--allow-uid", str(U["a"].pw_uid), "--allow-uid", str(U["b"].pw_uid)],
                              stderr=err, env=env, **as_user("s"))
    err.close()
    for _ in range(200):
        if os.path.exists(sock):
            return
        if sealer.poll() is not None:
            fail("the sealer exited %d" % sealer.returncode)
        time.sleep(0.05)
    fail("no socket after 10 s")


def kill_sealer():
    global sealer
    sealer.kill()
    sealer.wait()
    sealer = None
    os.unlink(sock)  # a killed sealer leaves its socket (docs/sealer.md)


def verify(*args):
    r = subprocess.run([VERIFY] + list(args), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def verify_intact(what, path):
    rc, out = verify("--verify-key", VK, "--pubkey", PK, path)
    if rc != 0 or not re.search(r"^intact: ", out, re.M):
        fail("%s: not intact with both keys (exit %d):\n%s" % (what, rc, out))
    return out


def events(path, action):
    n = 0
    for name in os.listdir(path) if os.path.isdir(path) else [os.path.basename(path)]:
        p = os.path.join(path, name) if os.path.isdir(path) else path
        with open(p, "rb") as f:
            n += f.read().count(b'"action":"%s"' % action.encode())
    return n


class Token:
    """one application process of user k holding the token (token_mp_helper)"""

    def __init__(self, k, conf):
        self.err = os.path.join(d, "token-%s-%d.err" % (k, len(procs)))
        self.p = subprocess.Popen([HELPER, MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(self.err, "w"), text=True,
                                  env=dict(os.environ, SOFTTOKEN_CONF=conf), **as_user(k))
        procs.append(self.p)

    def __call__(self, cmd, want=CKR_OK):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline().split()
        if not line:
            fail("token: no answer to %r: %s" % (cmd, open(self.err).read()))
        if want is not None and int(line[0]) != want:
            fail("token: %r answered 0x%x, want 0x%x: %s" % (cmd, int(line[0]), want, open(self.err).read()))
        return line

    def quit(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        self.p.wait()


def token_conf(k):
    conf = os.path.join(home[k], "softtoken.conf")
    with open(conf, "w") as f:
        f.write("token_dir = %s/tokens\naudit_dir = %s/audit\npbkdf2_iterations = 1000\nslots = 1\n"
                "audit_format_version = 2\naudit_sealer_socket = %s\n" % (home[k], home[k], sock))
    os.chown(conf, U[k].pw_uid, U[k].pw_gid)
    return conf


start_sealer()

# -- refused: the sealer serves users a and b only
r = subprocess.run([WRITER, os.path.join(home["x"], "x.log"), sock, "10", "0"], capture_output=True,
                   text=True, **as_user("x"))
if r.returncode == 0 or "open: Permission denied" not in r.stderr:
    fail("refused: a writer of a user not allowed was served (exit %d: %s)" % (r.returncode, r.stderr))
if os.path.exists(os.path.join(home["x"], "x.log")) and os.path.getsize(os.path.join(home["x"], "x.log")):
    fail("refused: the refused writer wrote a log")
tx = Token("x", token_conf("x"))
tx("init", CKR_GENERAL_ERROR)
tx.quit()
if "the sealer at %s refuses this process (uid %d" % (sock, U["x"].pw_uid) not in open(tx.err).read():
    fail("refused: the token's message: %s" % open(tx.err).read())
time.sleep(0.1)
seen = open(os.path.join(d, "sealer.err")).read()
if not re.search(r"refused pid \d+ uid %d " % U["x"].pw_uid, seen):
    fail("refused: the sealer did not log the refusal")
ok("refused", "user x (uid %d): writer and token refused (-EACCES, C_Initialize CKR_GENERAL_ERROR)"
   % U["x"].pw_uid)

# -- no key: the application's user cannot read what the sealer holds
for f in (STATE, SKEY):
    r = subprocess.run(["cat", f], capture_output=True, **as_user("a"))
    if r.returncode == 0:
        fail("no key: user a read %s" % f)
ok("no key", "user a cannot read the sealing state or the signing key")

# -- writers: two users' writers and the token at once
ta = Token("a", token_conf("a"))
for cmd in ("init", "inittoken so-pin attacks", "open", "login so so-pin", "initpin user-pin", "logout",
            "login u user-pin"):
    ta(cmd)
key = ta("gen k1")[1]
wa = subprocess.Popen([WRITER, os.path.join(home["a"], "a.log"), sock, "300", "0"], stderr=subprocess.PIPE,
                      **as_user("a"))
wb = subprocess.Popen([WRITER, os.path.join(home["b"], "b.log"), sock, "300", "0"], stderr=subprocess.PIPE,
                      **as_user("b"))
procs += [wa, wb]
for _ in range(20):
    ta("use " + key)
for w, n in ((wa, "a"), (wb, "b")):
    if w.wait() != 0:
        fail("writers: writer %s: %s" % (n, w.stderr.read().decode()))
for n in "ab":
    verify_intact("writers: %s.log" % n, os.path.join(home[n], n + ".log"))
    if events(os.path.join(home[n], n + ".log"), "write") != 300:
        fail("writers: %s.log does not hold 300 events" % n)
ok("writers", "users a and b (300 events each) and the token (user a) at once: both logs intact")

# -- epoch: the test clock moves one epoch
e0 = state_epoch()
set_clock(DELTA)
for _ in range(100):
    if state_epoch() >= e0 + 1:
        break
    time.sleep(0.02)
else:
    fail("epoch: the state stayed at epoch %d after the test clock moved %d s" % (e0, DELTA))
ta("gen k2")
ok("epoch", "test clock +%d s: the state went %d -> %d with no request, the token sealed on"
   % (DELTA, e0, state_epoch()))

# -- restart: the sealer killed under the token, which fails closed
kill_sealer()
ta("gen k3", CKR_DEVICE_ERROR)
ta("use " + key, CKR_DEVICE_ERROR)
ta.quit()
start_sealer()
tb = Token("a", token_conf("a"))
tb("init")
tb("open")
tb("login u user-pin")
k1 = tb("find k1")
if k1[1] != "1":
    fail("restart: key k1 not found after the restart: %r" % k1)
tb("use " + k1[2])
tb("gen k4")
tb("fini")
tb.quit()
tdir = os.path.join(home["a"], "audit")
logs = sorted(n for n in os.listdir(tdir))
out = verify_intact("restart: the token's trail", tdir)
if logs != ["softtoken-0.log"]:
    fail("restart: the new session did not continue the chain: %r" % logs)
with open(os.path.join(tdir, "softtoken-0.log"), "rb") as f:
    text = f.read()
inits = text.count(b'"action":"C_Initialize"')
epochs = sorted({int(e) for e in re.findall(rb'"type":"seal".*?"epoch":(\d+)', text)})
if inits < 2:
    fail("restart: %d C_Initialize records in softtoken-0.log, want 2" % inits)
if e0 not in epochs or e0 + 1 not in epochs:
    fail("epoch: the token's seals are of epochs %r, want %d and %d" % (epochs, e0, e0 + 1))
if re.search(rb'"outcome":"success"[^\n]*"key_label":"k3"', text):
    fail("restart: the refused C_GenerateKey (k3) is in the trail as a success")
ok("restart", "sealer killed: C_GenerateKey and C_Encrypt CKR_DEVICE_ERROR; restarted: the next session "
   "continued softtoken-0.log (%d C_Initialize, seal epochs %r), intact" % (inits, epochs))

# -- forge: the application's best rewrite of its own chain (it holds no key:
#    "no key" above; the rewrite is given the log alone, so it runs as root
#    here, where the test's interpreter is sure to be reachable). First with
#    the checkpoints left as they were, then signed with a key of its own.
said = []
for variant in ([], ["own-key"]):
    forged = os.path.join(home["a"], "forged" + "-".join([""] + variant))
    r = subprocess.run([sys.executable, ROOT_ATTACK, "app-rewrite", tdir, "softtoken-0.log", forged] + variant,
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("forge: app-rewrite: %s" % r.stderr)
    said.append(r.stdout.strip())
    plain = verify(forged)
    seals = verify("--verify-key", VK, forged)
    ckpts = verify("--pubkey", PK, forged)
    if plain[0] != 0:
        fail("forge: the rewritten chain fails a plain check (the attack is not the best one):\n" + plain[1])
    if seals[0] != 1 or not re.search(r": bad-seal: ", seals[1]):
        fail("forge: the seals did not catch the rewrite (exit %d):\n%s" % (seals[0], seals[1]))
    if ckpts[0] != 1 or not re.search(r": bad-checkpoint: ", ckpts[1]):
        fail("forge: the checkpoints were not bad-checkpoint (exit %d):\n%s" % (ckpts[0], ckpts[1]))
ok("forge", "; ".join(said) + ": each time plain chain check exit 0, seals bad-seal, checkpoints "
   "bad-checkpoint")

# -- die: a writer killed with queued records
dlog = os.path.join(home["b"], "d.log")
w = subprocess.run([WRITER, dlog, sock, "50", "0", "die"], capture_output=True, text=True, **as_user("b"))
if w.returncode != -signal.SIGKILL or "dying" not in w.stdout:
    fail("die: the writer did not kill itself (status %d): %s" % (w.returncode, w.stderr))
verify_intact("die: d.log", dlog)
if events(dlog, "write") != 50 or events(dlog, "unsynced") != 0:
    fail("die: %d of 50 flushed events and %d of the 20 unsynced ones in the log (want 50, 0)"
         % (events(dlog, "write"), events(dlog, "unsynced")))
ok("die", "writer killed with 20 queued records: those lost, the 50 before them intact")

sealer.send_signal(signal.SIGTERM)
if sealer.wait() != 0:
    fail("the sealer's exit status on SIGTERM: %d" % sealer.returncode)
sealer = None
# the sanitizer presets: a report in any process's stderr fails the test
for name in sorted(os.listdir(d)):
    if name.endswith(".err"):
        with open(os.path.join(d, name), errors="replace") as f:
            text = f.read()
        if re.search(r"ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|WARNING: ThreadSanitizer", text):
            fail("a sanitizer report in %s:\n%s" % (name, text[:4000]))
cleanup()
print("sealer_attacks: ok")

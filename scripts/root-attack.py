#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Play root on a host that writes a v2 trail, for the demo (scripts/demo.sh).

Root at time t holds what the host holds then: the sealing state as it is now
(epoch e: the MAC keys of epochs >= e only, docs/format.md 16.3) and the
checkpoint signing key. It rewrites one record sealed before e, recomputes the
whole plain chain, the Merkle tree and every checkpoint (re-signed), re-seals
what its state can (epochs >= e) and keeps the old MACs where it cannot.

  root-attack.py rewrite LOGDIR BASE STATE SIGNING_KEY OUTDIR
      the first event whose seal is of an epoch below the state's: its
      outcome becomes "failure"; the chain as root rebuilds it, in OUTDIR
  root-attack.py app-rewrite LOGDIR BASE OUTDIR [own-key]
      the application that loads the token with a sealer (DESIGN.md's last
      row): no sealing state, no signing key. It rewrites the latest event
      the same way and keeps the MACs and checkpoint notes it cannot make;
      with own-key it signs the checkpoints with a key it made itself
  root-attack.py cut LOGDIR BASE OUTDIR
      the chain cut right after its next-to-last batch seal (what root does
      to make the last operations disappear), in OUTDIR

Prints what it did. The attacker's building blocks are the test suite's
independent model of the format (tests/vectors/v2log.py, via tests/v2_e2e.py).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "vectors"))
import check_keys  # noqa: E402
import v2_e2e as E  # noqa: E402
from v2log import Holder  # noqa: E402
import v2log  # noqa: E402


class StolenKeys(v2log.Keys):
    """the sealing state file as root finds it (17.2) and the signing key
    (17.3): no seed S, so no MAC key of an epoch before the state's"""

    def __init__(self, state_path, signing_path):
        st = E.read_state(state_path)
        sk = check_keys.read_lines(signing_path, [
            ("auditlog-signing-key", str), ("host", check_keys.host),
            ("ed25519-seed", check_keys.hexv(32))])
        self.S, self.sign_seed = None, sk["ed25519-seed"]
        self.host, self.t0, self.delta, self.kid = st["host"], st["t0"], st["delta"], st["key-id"]
        self.state_epoch, self.nodes, self._mk = st["epoch"], st["extra"], {}

    mac_key = E.StateKeys.mac_key  # only epochs >= the state's


def write(outdir, lines):
    E.write_dir(outdir, lines)
    for name in os.listdir(outdir):
        os.chmod(os.path.join(outdir, name), 0o600)


def rewrite(logdir, base, state, signing, outdir):
    recs = E.parse(logdir, base)
    keys = StolenKeys(state, signing)
    e = keys.state_epoch
    old = [r for r in recs if r.type == "event" and E.seal_after(recs, r.seq).members["epoch"] < e]
    # the latest operation out of its reach, a key operation when there is one
    ops = [r for r in old if r.members.get("action") in (b"C_Sign", b"C_GenerateKeyPair", b"C_Login")]
    target = (ops or old or [None])[-1]
    if target is None:
        sys.exit("root-attack: no event sealed before epoch %d yet" % e)

    def edit(r):
        if r.seq != target.seq:
            return r.type, r.fixed, r.caller, 2
        return r.type, [(k, b"failure" if k == "outcome" else v) for k, v in r.fixed], r.caller, 2
    holder = Holder(keys, seal_from=e, sign=True, orig=E.Orig(recs))
    write(outdir, E.rebuild(recs, keys, holder, edit))
    print("root (sealing state at epoch %d, signing key) rewrote seq %d (%s, sealed in epoch %d): "
          "outcome success -> failure; chain, tree and %d checkpoints recomputed and re-signed" % (
              e, target.seq, target.members.get("action", b"?").decode(),
              E.seal_after(recs, target.seq).members["epoch"], sum(r.type == "checkpoint" for r in recs)))


class NoKeys:
    """what the application knows: the host (the checkpoints' origin), no
    MAC key; its signing key is one it made itself"""

    def __init__(self, recs):
        notes = [r.members["note"] for r in recs if r.type == "checkpoint"]
        if not notes:
            sys.exit("root-attack: no checkpoint to take the host from")
        self.host = notes[0].split(b"\n")[0].split(b"/auditlog/")[0]
        self.S, self.sign_seed = None, v2log.V.H(b"the application's own signing key")

    def mac_key(self, e):
        raise AssertionError("the application holds no MAC key")


def app_rewrite(logdir, base, outdir, own_key=False):
    recs = E.parse(logdir, base)
    keys = NoKeys(recs)
    target = ([r for r in recs if r.type == "event"] or [None])[-1]
    if target is None:
        sys.exit("root-attack: no event to rewrite")

    def edit(r):
        if r.seq != target.seq:
            return r.type, r.fixed, r.caller, 2
        return r.type, [(k, b"failure" if k == "outcome" else v) for k, v in r.fixed], r.caller, 2
    holder = Holder(keys, seal_from=None, sign=own_key, orig=E.Orig(recs))
    write(outdir, E.rebuild(recs, keys, holder, edit))
    print("the application (no key) rewrote seq %d (%s): outcome success -> failure; chain and tree "
          "recomputed, %d checkpoint(s) %s" % (
              target.seq, target.members.get("action", b"?").decode(),
              sum(r.type == "checkpoint" for r in recs),
              "signed with its own key" if own_key else "left as they were"))


def cut(logdir, base, outdir):
    recs = E.parse(logdir, base)
    seals = [r.seq for r in recs if r.type == "seal" and r.members["kind"] in (b"batch", b"idle")]
    if len(seals) < 2:
        sys.exit("root-attack: too few seals to cut at")
    at = seals[-2]
    write(outdir, [(r.file, r.line) for r in recs[:at + 1]])
    print("root cut the chain after the seal at seq %d: %d records gone" % (at, len(recs) - at - 1))


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 6 and a[0] == "rewrite":
        rewrite(*a[1:])
    elif len(a) in (4, 5) and a[0] == "app-rewrite" and a[4:] in ([], ["own-key"]):
        app_rewrite(*a[1:4], own_key=len(a) == 5)
    elif len(a) == 4 and a[0] == "cut":
        cut(*a[1:])
    else:
        sys.exit(__doc__)

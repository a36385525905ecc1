#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""siem_attack.py VERIFY LOGDIR KEYDIR WITNESS_FILE WITNESS_PUBKEY WORKDIR (tests/siem_rsyslog.sh)

After the witness cosigned a host's checkpoints, an attacker holding the
host's keys (its signing key and sealing state: root on the host) rewrites
the host's own files: one event of the first half changed, every hash, tree
and checkpoint recomputed and re-signed (tests/v2_e2e.py's rebuild, written
from docs/format.md). The copy passes `auditlog-verify --pubkey` alone, and
is `rewritten` with --witness --witness-key. Then a truncated host: its
files cut before its last checkpoint: `truncated`. Exit 0 when all holds."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "vectors"))
import v2_e2e as E  # noqa: E402

VERIFY, LOG, KEYS, WFILE, WPUB, WORK = sys.argv[1:7]
FAILED = []


def check(ok, what):
    print("siem_attack: %s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        FAILED.append(what)


def verify(d, witness=True):
    args = [VERIFY, "--json", "--pubkey", os.path.join(KEYS, "pubkey")]
    if witness:
        args += ["--witness", WFILE, "--witness-key", WPUB]
    p = subprocess.run(args + [d], capture_output=True)
    try:
        j = json.loads(p.stdout)
    except ValueError:
        j = {}
    return p.returncode, j.get("counts", {}), j


def main():
    recs = E.parse(LOG)
    rc, counts, j = verify(LOG)
    check(rc == 0 and len(j.get("cosigned", [])) >= 1 and not counts.get("bad-checkpoint"),
          "%s: the host's own files verify with the witness file, cosigned %s (rc %d)"
          % (LOG, [c["size"] for c in j.get("cosigned", [])], rc))
    ka = E.RealKeys(KEYS)
    target = next(r for r in recs if r.caller and r.seq > len(recs) // 4)
    att = E.rebuild(recs, ka, E.Holder(ka, orig=E.Orig(recs)),
                    E.replace_caller(target.seq, target.caller[0][0], b"mallory"))
    d = E.write_dir(os.path.join(WORK, "rewritten"), att)
    rc, counts, _ = verify(d, witness=False)
    check(rc == 0, "the rewritten files (re-signed with the host's key) verify with --pubkey alone (rc %d)" % rc)
    rc, counts, _ = verify(d)
    check(rc == 1 and counts.get("rewritten", 0) >= 1,
          "with --witness --witness-key they are rewritten (seq %d changed): %s" % (target.seq, counts))
    # truncated: the host's files cut before its last checkpoint, at a line
    last_ck = max(r.seq for r in recs if r.type == "checkpoint")
    keep = [(r.file, r.line) for r in recs if r.seq < last_ck - 50]
    d = E.write_dir(os.path.join(WORK, "truncated"), keep)
    rc, counts, _ = verify(d)
    check(rc == 1 and counts.get("truncated", 0) >= 1,
          "the host's files cut at seq %d (its last checkpoint %d was cosigned): truncated %s"
          % (last_ck - 50, last_ck, counts))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A v2 writer's crash, verified as files and as a stream (issue 14: a SIEM's
central copy is verified with `auditlog-verify -`).

tests/v2_e2e_writer (the library, auditlog-keygen's keys) is killed with
SIGKILL while it writes; the log is then cut as a power loss leaves it, inside
the last write (docs/format.md 19.5: the complete records after the last seal
were never acknowledged), and the writer is run again: its open writes the
recovery record, then it logs on and closes. Cuts:
  torn      one or more complete records after the last seal, then a torn one
  boundary  complete records after the last seal, cut at a line's end
  rotated   as torn, with rotation: the crash is in the last of several files,
            so the stream is the set concatenated (offsets of its second file on)
  rotated-first  with rotation, the crash in the active file's first batch:
            the damage starts right after its header, and the writer's open
            takes the tree and the last seal from the file before it
            (file.c's prev_file_v2, which now gets the header's prev_* copied
            out before scan_tail reuses the buffer they were decoded into; this
            case passed before that fix too, so it covers the path, it does not
            reproduce the -EBADMSG seen once under gdb)
For each: `auditlog-verify --json DIR` and `cat FILES | auditlog-verify --json -`
(without keys, with --verify-key, with both keys) must give the same verdict,
exit code, counts, records and findings (class, seq, and the line and offset
translated to the stream's), `recovered` and nothing else but the notice
`unsigned-tail`; and `auditlog-verify --emit -` (no key, --verify-key) must
pass on exactly the log's lines without the crash damage.
Usage: v2_stream_crash.py AUDITLOG_KEYGEN AUDITLOG_VERIFY V2_E2E_WRITER
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

KEYGEN, VERIFY, WRITER = sys.argv[1:4] if len(sys.argv) == 4 else (None,) * 3
FAILED = []


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        FAILED.append(what)
    return ok


def chain_files(d, base="audit.log"):
    """rotated files by the first seq of their name, the active file last"""
    rot = sorted((int(n.rsplit("-", 1)[1]), n) for n in os.listdir(d) if n.startswith(base + "."))
    return [n for _, n in rot] + [base]


def read(d, n):
    with open(os.path.join(d, n), "rb") as f:
        return f.read()


def rtype(line):
    return json.loads(line)["type"]


def crashed_log(tmp, ka, name, rotate, cut, after):
    """a killed writer's log, cut inside its last batch that holds at least
    three lines and follows a record of type `after` (seal, or header: the
    active file's first batch), cut: "torn" or "boundary"; reopened by the
    writer"""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    path = os.path.join(d, "audit.log")
    p = subprocess.Popen([WRITER, path, os.path.join(ka, "sealing-state"), os.path.join(ka, "signing-key"),
                          "0", str(rotate), "0", "crash"], stdout=subprocess.PIPE)
    for _ in range(4):
        p.stdout.readline()
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdout.close()
    lines = read(d, "audit.log").splitlines(keepends=True)
    # A SIGKILL can stop a buffered write between two pages (the kernel checks
    # for a fatal signal there), so the file may end in a torn line: the cut
    # below lies before it, inside a batch that ends with its seal.
    if lines and not lines[-1].endswith(b"\n"):
        lines.pop()
    # Two batches are in flight: the kill may stop the earlier one's copy
    # while the later one's completed, leaving zeros inside the file. Nothing
    # from the first such line on is a line the writer finished.
    nul = next((i for i, ln in enumerate(lines) if b"\0" in ln), None)
    if nul is not None:
        del lines[nul:]
    # A kill just after a rotation can leave the new active file before its
    # header's write completed: nothing to cut there, a kill to make again
    # (it happened under tsan, where the writer runs several times slower).
    if not lines:
        return None
    # the last batch of the active file with at least 3 lines: after a seal
    # (or the header), records, its seal
    ends = [i for i, ln in enumerate(lines) if rtype(ln) in ("seal", "header")]
    pick = next(((a, b) for a, b in reversed(list(zip(ends, ends[1:])))
                 if b - a >= 3 and rtype(lines[a]) == after), None)
    if pick is None:
        return None
    a, b = pick
    keep = sum(len(ln) for ln in lines[:a + 2])  # the seal (or header), one complete record
    if cut == "torn":
        keep += len(lines[a + 2]) // 2
    os.truncate(path, keep)
    r = subprocess.run([WRITER, path, os.path.join(ka, "sealing-state"), os.path.join(ka, "signing-key"),
                        "30", "0", "0"], capture_output=True)
    if not check(r.returncode == 0, "%s: the writer reopens the crashed log (%s)" % (name, r.stderr.decode().strip())):
        return None
    rec = [json.loads(ln) for ln in read(d, "audit.log").splitlines() if ln.startswith(b'{"@t') and
           b'"type":"recovery"' in ln[:96]]
    check(len(rec) == 1 and rec[0]["damage_offset"] == sum(len(ln) for ln in lines[:a + 1]),
          "%s: one recovery record, its damage from right after the %s at line %d" % (name, rtype(lines[a]), a + 1))
    return d, rec[0] if rec else None


def verify(args, stdin=None):
    p = subprocess.run([VERIFY] + args, input=stdin, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode()


def compare(name, d, files, opts, label):
    rc, out, err = verify(["--json"] + opts + [d])
    fj = json.loads(out) if out else None
    whole = b"".join(read(d, n) for n in files)
    src, sout, serr = verify(["--json"] + opts + ["-"], whole)
    sj = json.loads(sout) if sout else None
    if not check(fj is not None and sj is not None, "%s %s: both reports (%s%s)" % (name, label, err, serr)):
        return
    # the files' coordinates in the stream
    base, at = {}, [0, 0]
    for n in files:
        data = read(d, n)
        base[os.path.join(d, n)] = tuple(at)
        at = [at[0] + data.count(b"\n"), at[1] + len(data)]
    want = [(f["class"], f["seq"], f["line"] + base[f["file"]][0], f["offset"] + base[f["file"]][1])
            for f in fj["findings"]]
    got = [(f["class"], f["seq"], f["line"], f["offset"]) for f in sj["findings"]]
    fc = {k: v for k, v in fj["counts"].items() if v}
    sc = {k: v for k, v in sj["counts"].items() if v}
    check(set(fc) <= {"recovered", "unsigned-tail"} and fc.get("recovered") == 1 and rc == 0,
          "%s %s: the files: %s, exit %d" % (name, label, fc, rc))
    ok = (src, sj["verdict"], sc, sj["records"], got) == (rc, fj["verdict"], fc, fj["records"], want)
    check(ok, "%s %s: the stream says what the files say (%s, %d records, exit %d)"
          % (name, label, sc, sj["records"], src))
    if not ok:
        print("  files:  exit %d %s %s records %d" % (rc, fj["verdict"], fc, fj["records"]))
        print("  stream: exit %d %s %s records %d" % (src, sj["verdict"], sc, sj["records"]))
        for f in fj["findings"][:8]:
            print("  file   %s %s:%s off %s seq %s: %s" % (f["class"], os.path.basename(f["file"]), f["line"],
                                                         f["offset"], f["seq"], f["message"]))
        for f in sj["findings"][:8]:
            print("  stream %s %s off %s seq %s: %s" % (f["class"], f["line"], f["offset"], f["seq"], f["message"]))


def emit_check(name, d, files, rec, opts, label):
    """--emit - passes on the lines of the log, in order, but none of the
    damage the recovery record names"""
    whole = b"".join(read(d, n) for n in files)
    active = read(d, "audit.log")
    start = len(whole) - len(active)
    a, b = start + rec["damage_offset"], start + rec["damage_offset"] + rec["damage_length"]
    want = b"".join(ln for ln, off in lines_at(whole) if not a <= off < b)
    rc, out, err = verify(["--emit"] + opts + ["-"], whole)
    check(rc == 0 and out == want, "%s --emit %s -: exactly the log's %d lines without the damage (got %d lines, "
          "exit %d)" % (name, label, want.count(b"\n"), out.count(b"\n"), rc))


def tail_notice(d, PK, VK):
    """the log closed cleanly after the crash: its one unsigned record is the
    close seal, and the notice says so (docs/format.md 23)"""
    for opts, says in ((PK, "covered by its MAC, which only a verification key checks (--verify-key)"),
                       (VK + PK, "its MAC verified with the verification key")):
        rc, out, err = verify(["--json"] + opts + [d])
        tails = [f for f in json.loads(out)["findings"] if f["class"] == "unsigned-tail"]
        want = "1 record after the chain's last checkpoint: the close seal (seq %d), not covered by a " \
               "signature; %s" % (tails[0]["seq"] if tails else -1, says)
        check(rc == 0 and len(tails) == 1 and tails[0]["message"] == want,
              "unsigned-tail %s: names the close seal (%s)" % (" ".join(o for o in opts if o.startswith("--")),
                                                            tails[0]["message"] if tails else "none"))


def lines_at(data):
    off = 0
    for ln in data.splitlines(keepends=True):
        yield ln, off
        off += len(ln)


def main():
    if not WRITER:
        print(__doc__)
        return 2
    tmp = tempfile.mkdtemp(prefix="auditlog-v2-stream-crash.", dir=os.environ.get("TMPDIR", "/var/tmp"))
    try:
        ka = os.path.join(tmp, "keys")
        os.makedirs(ka)
        subprocess.run([KEYGEN, "--host", "crash-host", "--delta", "1", "--dir", ka], check=True,
                       stdout=subprocess.DEVNULL)
        VK = ["--verify-key", os.path.join(ka, "verify-key")]
        PK = ["--pubkey", os.path.join(ka, "pubkey")]
        for name, rotate, cut, after in (("torn", 0, "torn", "seal"), ("boundary", 0, "boundary", "seal"),
                                         ("rotated", 65536, "torn", "seal"),
                                         ("rotated-first", 65536, "torn", "header")):
            made = None
            for _ in range(5):  # (a kill that left no such batch: again)
                made = crashed_log(tmp, ka, name, rotate, cut, after)
                if made:
                    break
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
            if not check(made is not None and made[1] is not None, "%s: a crashed log" % name):
                continue
            d, rec = made
            files = chain_files(d)
            if rotate:
                check(len(files) >= 2, "%s: %d files, the crash in the last" % (name, len(files)))
            for opts, label in (([], "(no key)"), (VK, "--verify-key"), (VK + PK, "--verify-key --pubkey")):
                compare(name, d, files, opts, label)
            for opts, label in (([], ""), (VK, "--verify-key")):
                emit_check(name, d, files, rec, opts, label)
            if name == "torn":
                tail_notice(d, PK, VK)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILED:
        print("%d check(s) failed" % len(FAILED))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

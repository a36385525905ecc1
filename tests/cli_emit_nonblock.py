#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""auditlog-verify --emit into an O_NONBLOCK pipe (a reader that set its
pipe so, and reads slower than the verifier writes): every line arrives,
whole and once, and the run exits 0. The one-chain --emit and
--follow --each-chain --emit write through the same cli_write_all, which
waits for the pipe to take more on EAGAIN; before 2026-12-07 the one-chain
--emit gave up with exit 2 after the first 64 KiB or so.

Args: follow_writer auditlog-verify
"""
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WRITER, VERIFY = sys.argv[1:3]
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("cli_emit_nonblock: FAIL:", msg, file=sys.stderr)


def slow_pipe_run(args, want, stop=False):
    """Run args with stdout an O_NONBLOCK pipe read 64 KiB at a time with a
    pause between reads, until want bytes came (then SIGTERM when stop) or
    the pipe closed. (exit status, bytes read, stderr)."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    err = tempfile.TemporaryFile()
    p = subprocess.Popen(args, stdout=w, stderr=err)
    os.close(w)
    data = b""
    deadline = time.monotonic() + 60
    time.sleep(0.3)  # the writer fills the pipe and meets EAGAIN
    while time.monotonic() < deadline:
        if stop and len(data) >= len(want):
            p.send_signal(signal.SIGTERM)
            stop = False
        b = os.read(r, 65536)
        if not b:
            break
        data += b
        time.sleep(0.01)
    os.close(r)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    err.seek(0)
    return p.returncode, data, err.read().decode(errors="replace")


tmp = tempfile.mkdtemp(prefix="auditlog-emit-nonblock.")
try:
    log = os.path.join(tmp, "a.log")
    subprocess.run([WRITER, log, "3000", "0"], check=True)
    with open(log, "rb") as f:
        want = f.read()
    if len(want) < 4 * 65536:
        fail(f"the log is {len(want)} bytes: too short to fill a pipe")
    nl = want.count(b"\n")
    for what, args, stop in (("--emit", [VERIFY, "--emit", log], False),
                             ("--each-chain", [VERIFY, "--follow", "--emit", "--each-chain", tmp], True)):
        rc, data, err = slow_pipe_run(args, want, stop)
        got = data.count(b"\n")
        if rc != 0 or data != want:
            fail(f"{what}: exit {rc}, {got} of {nl} lines: {err[-400:]}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    sys.exit(1)
print("cli_emit_nonblock: ok")

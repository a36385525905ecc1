#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""siem_lag.py STOPFILE DISTURBFILE OUT FILE...: the pipeline's figures (tests/siem_rsyslog.sh).

Tails the central copies FILE... (every 10 ms, whole lines only) until
STOPFILE exists, then reads them to their end once more and writes OUT: per
record (the first arrival of each (file, seq)) the lag from its
@timestamp (the writer's clock when the record was made) to the moment this
poller saw it at the centre, and the end-to-end rate: distinct records over
the time from the earliest @timestamp to the last first arrival. The poll
adds up to 10 ms to each lag. The lag is given twice: over every record,
and over the records made more than 1 s before DISTURBFILE first existed
(the test creates it just before it stops the first daemon), which no
restart delayed."""

import calendar
import os
import re
import sys
import time

STOP, DISTURB, OUT, FILES = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
TS = re.compile(rb'"@timestamp":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{9})Z".*?"seq":(\d+)')


def ts_of(date, frac):
    return calendar.timegm(time.strptime(date.decode(), "%Y-%m-%dT%H:%M:%S")) + int(frac) / 1e9


def main():
    off = {f: 0 for f in FILES}
    part = {f: b"" for f in FILES}
    seen = {}  # (file, seq) -> (made, arrived)
    last = False
    disturbed = None
    while True:
        stop = os.path.exists(STOP)
        now = time.time()
        if disturbed is None and os.path.exists(DISTURB):
            disturbed = now
        for f in FILES:
            try:
                with open(f, "rb") as fh:
                    fh.seek(off[f])
                    data = fh.read()
            except FileNotFoundError:
                continue
            off[f] += len(data)
            data = part[f] + data
            lines = data.split(b"\n")
            part[f] = lines.pop()
            for ln in lines:
                m = TS.search(ln)
                if m and (f, m.group(3)) not in seen:
                    seen[(f, m.group(3))] = (ts_of(m.group(1), m.group(2)), now)
        if last:
            break
        last = stop
        if not stop:
            time.sleep(0.01)
    lags = sorted(a - w for w, a in seen.values())
    quiet = sorted(a - w for w, a in seen.values() if disturbed is not None and w < disturbed - 1)
    with open(OUT, "w") as o:
        if not lags or not quiet:
            o.write("no records (%d, %d undisturbed)\n" % (len(lags), len(quiet)))
            return 1
        span = max(a for _, a in seen.values()) - min(w for w, _ in seen.values())

        def q(v, p):
            return v[min(len(v) - 1, int(p * len(v)))] * 1000
        o.write("records %d span %.2f s rate %.0f records/s; lag p50 %.0f ms p99 %.0f ms max %.0f ms;"
                " undisturbed (%d records) p50 %.0f ms p99 %.0f ms\n"
                % (len(lags), span, len(lags) / span, q(lags, 0.5), q(lags, 0.99), lags[-1] * 1000,
                   len(quiet), q(quiet, 0.5), q(quiet, 0.99)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

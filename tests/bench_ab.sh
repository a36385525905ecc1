#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench/ab with p11-bench on one module as both arms: bad arguments exit 2,
# and a key generation's rows carry its ops/s and, lower being better, its p50,
# its p50 beyond its own fdatasync and (RSA, a search) its p50 outside
# EVP_PKEY_generate, in the table and in --json. Timings are never asserted.
#
#   bench_ab.sh P11_BENCH SOFTTOKEN_SO
#
# Exit 77 (skip) when /usr/bin/python3 is missing or the scratch directory is
# in memory (p11-bench refuses tmpfs).
set -euo pipefail

P11=${1:?usage: bench_ab.sh P11_BENCH SOFTTOKEN_SO}
MOD=${2:?usage: bench_ab.sh P11_BENCH SOFTTOKEN_SO}
SRC=$(cd "$(dirname "$0")/.." && pwd)
AB="$SRC/bench/ab"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: $PY is missing"; exit 77; }

. "$(dirname "$0")/bench_lib.sh"
bench_scratch bench-ab-test "p11-bench"

# --- bad arguments: exit 2 ---------------------------------------------------
for bad in "--pairs 0 $MOD $MOD" "--cooldown -1 $MOD $MOD" "$MOD" "--bench p11-bench $MOD $tmp/none.so"; do
	rc=0
	# shellcheck disable=SC2086
	"$AB" --p11-bench "$P11" $bad >/dev/null 2>&1 || rc=$?
	[ "$rc" -eq 2 ] || fail "bench/ab $bad exited $rc, not 2"
done

# --- one pair, the same module as A and B ------------------------------------
"$AB" --bench p11-bench --p11-bench "$P11" --pairs 1 --cooldown 0 --json "$tmp/ab.json" \
	"$MOD" "$MOD" -- --dir "$tmp" --only 'keygen-ec-p256,keygen-rsa2048,sha256' --iterations 2 \
	--warmup 0 --threads 1 --data-sizes 256 --no-raw --no-audit-off >"$tmp/out.txt" 2>"$tmp/err.txt" ||
	{ cat "$tmp/err.txt" >&2; fail "bench/ab failed"; }
# beyond_own_fdatasync_p50_us is absent from a run where no call made its own
# fdatasync (each handed its record to the worker): checked below when present
for row in "softtoken/keygen-ec-p256/0B/x1 " "softtoken/keygen-ec-p256/0B/x1/p50_us " \
	"softtoken/keygen-rsa2048/0B/x1/outside_keygen_p50_us "; do
	grep -qF "$row" "$tmp/out.txt" || { cat "$tmp/out.txt"; fail "no row '$row'"; }
done
"$PY" - "$tmp/ab.json" <<'PYEOF' || fail "--json: the key generation figures are not lower-is-better, or missing"
import json, sys
m = {r["metric"]: r for r in json.load(open(sys.argv[1]))["metrics"]}
ops = m["softtoken/keygen-ec-p256/0B/x1"]
assert ops["higher_is_better"] is True, ops
for k in ("softtoken/keygen-ec-p256/0B/x1/p50_us", "softtoken/keygen-rsa2048/0B/x1/outside_keygen_p50_us"):
    r = m[k]  # in every run: A, B and the control
    assert r["higher_is_better"] is False and r["median_a"] > 0 and len(r["control"]) == 1, r
for k, r in m.items():
    if k.endswith("/beyond_own_fdatasync_p50_us"):
        assert r["higher_is_better"] is False and r["median_a"] > 0, r
# not a key generation: its ops/s only
assert m["softtoken/sha256/256B/x1"]["higher_is_better"] is True, m
assert not [k for k in m if k.startswith("softtoken/sha256/") and k != "softtoken/sha256/256B/x1"], m
PYEOF
echo "PASS"

#!/bin/bash
# The token writing format v2 as an operator sets it up (docs/token.md
# "Format v2"): auditlog-keygen makes the keys, pkcs11-tool drives the token
# in several processes, auditlog-verify checks the trail with the auditor's
# verification key and the public key; after a re-key the next process's
# chain goes on under the new key (both keys: intact; the old one alone:
# unknown-key, "re-keyed here"); a flipped byte in an old record fails
# that check; a key file open to the group stops C_Initialize.
#
# Usage: token_v2_cli.sh libsofttoken.so auditlog-keygen auditlog-verify
# Exit: 0 passed, 1 failed, 77 skipped (pkcs11-tool missing).
set -u
[ $# -eq 3 ] || { echo "usage: $0 libsofttoken.so auditlog-keygen auditlog-verify" >&2; exit 2; }
MOD=$(realpath "$1")
KEYGEN=$2
VERIFY=$3
HERE=$(cd "$(dirname "$0")" && pwd)

command -v pkcs11-tool >/dev/null 2>&1 || { echo "token_v2_cli: SKIP: pkcs11-tool not found (opensc)" >&2; exit 77; }
d=$(mktemp -d "${TMPDIR:-/var/tmp}/token-v2-cli.XXXXXX")
trap 'rm -rf "$d"' EXIT
fail() {
	echo "token_v2_cli: FAIL: $*" >&2
	[ -s "$d/out" ] && { echo "--- output:" >&2; tail -n 20 "$d/out" >&2; }
	exit 1
}
. "$HERE/token_san.sh" # SAN: the preload a sanitizer build of the module needs

install -d -m 0700 "$d/keys"
"$KEYGEN" --dir "$d/keys" --host tok-cli --delta 1 >"$d/out" 2>&1 || fail "auditlog-keygen"
cat >"$d/softtoken.conf" <<CONF
token_dir = $d/tokens
audit_dir = $d/audit
pbkdf2_iterations = 1000
slots = 1
audit_format_version = 2
audit_seal_state = $d/keys/sealing-state
audit_signing_key = $d/keys/signing-key
CONF
export SOFTTOKEN_CONF=$d/softtoken.conf
p11() { "${SAN[@]}" pkcs11-tool --module "$MOD" "$@" >"$d/out" 2>&1 || fail "pkcs11-tool $*"; }

p11 --slot 0 --init-token --label v2 --so-pin so-pin-1234
p11 --slot 0 --init-pin --so-pin so-pin-1234 --pin user-pin-5678
p11 --slot 0 --login --pin user-pin-5678 --keygen --key-type AES:32 --label aes1 --id 01
# two processes at once, one state
p11 --slot 0 --login --pin user-pin-5678 --keygen --key-type AES:16 --label aes2 --id 02 &
p1=$!
"${SAN[@]}" pkcs11-tool --module "$MOD" --slot 0 --login --pin user-pin-5678 --list-objects >"$d/out2" 2>&1 &
p2=$!
wait $p1 || fail "the first concurrent pkcs11-tool"
wait $p2 || fail "the second concurrent pkcs11-tool: $(cat "$d/out2")"

log=$d/audit/softtoken-0.log
grep -q '"v":2,"type":"seal"' "$log" || fail "no seal in $log"
grep -q '"action":"C_GenerateKey"' "$log" || fail "no C_GenerateKey record"
vk=(--verify-key "$d/keys/verify-key" --pubkey "$d/keys/pubkey")
"$VERIFY" "${vk[@]}" "$d/audit" >"$d/out" 2>&1 || fail "auditlog-verify of the intact trail exited $?"

# a re-key (docs/keys.md): the next process that loads the token opens its
# chain under the new key, marked with the old one; the auditor with both
# verification keys says intact, with the old one alone is told to get the new
"$KEYGEN" --rekey --state "$d/keys/sealing-state" --verify-key "$d/keys/verify-key.2" >"$d/out" 2>&1 ||
	fail "auditlog-keygen --rekey"
p11 --slot 0 --login --pin user-pin-5678 --keygen --key-type AES:32 --label aes3 --id 03
grep -q '"kind":"open".*"prev_key":' "$log" || fail "no open seal with prev_key after the re-key"
vk=(--verify-key "$d/keys/verify-key" --verify-key "$d/keys/verify-key.2" --pubkey "$d/keys/pubkey")
"$VERIFY" "${vk[@]}" "$d/audit" >"$d/out" 2>&1 || fail "auditlog-verify with both keys after the re-key exited $?"
if "$VERIFY" --verify-key "$d/keys/verify-key" --pubkey "$d/keys/pubkey" "$d/audit" >"$d/out" 2>&1; then
	fail "auditlog-verify with the old key only passed a re-keyed chain"
fi
grep -q "unknown-key" "$d/out" || fail "the old key alone did not report unknown-key"
grep -q "re-keyed here" "$d/out" || fail "the old key alone did not say the chain is re-keyed"

# a flipped byte in the first C_InitToken record
python3 - "$log" <<'PY' || fail "could not edit the log"
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
i = b.index(b'"action":"C_InitToken"') + 10
b[i] ^= 1
open(p, 'wb').write(b)
PY
if "$VERIFY" "${vk[@]}" "$d/audit" >"$d/out" 2>&1; then fail "auditlog-verify passed an edited record"; fi

# a key file open to the group: C_Initialize fails, naming it
chmod 0640 "$d/keys/signing-key"
if "${SAN[@]}" pkcs11-tool --module "$MOD" -L >"$d/out" 2>&1; then fail "-L with a 0640 signing key succeeded"; fi
grep -q "audit_signing_key $d/keys/signing-key has mode 0640" "$d/out" || fail "no message naming the signing key"
echo "token_v2_cli: ok"

#!/bin/bash
# The main job on built-in defaults: build (release), make a fresh token in a
# temporary directory, drive it with a real PKCS#11 client (pkcs11-tool) and
# check its results with OpenSSL, run a short head-to-head with SoftHSMv2
# (p11-bench), then verify the token's audit trail with auditlog-verify and
# print what it holds.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build build/release --target softtoken softtoken-util auditlog-verify p11-bench >/dev/null

b=build/release
mod=$PWD/$b/token/libsofttoken.so
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/softtoken-demo.XXXXXX")
mkdir -p "$dir/tokens"
cat >"$dir/softtoken.conf" <<EOF
# demo configuration (docs/token.md lists every key)
token_dir = $dir/tokens
audit_dir = $dir/audit
EOF
export SOFTTOKEN_CONF=$dir/softtoken.conf
umask 077
printf 'demo-so-pin\n' >"$dir/so.pin"
printf 'demo-user-pin\n' >"$dir/user.pin"
pin=demo-user-pin

echo "== a fresh token in $dir (PBKDF2 600000 iterations per PIN: a second or two)"
$b/token/softtoken-util --module "$mod" init --slot 0 --label demo --so-pin-file "$dir/so.pin" --pin-file "$dir/user.pin"
$b/token/softtoken-util --module "$mod" show

# pkcs11-tool, logged in; its chatter filtered, its failure fatal
p11() {
	local out rc=0
	out=$(pkcs11-tool --module "$mod" --login --pin "$pin" "$@" 2>&1) || rc=$?
	printf '%s\n' "$out" | grep -vE '^Using slot|^Logging in|^warning: PKCS11 function C_GetAttributeValue' || true
	return $rc
}

echo
echo "== pkcs11-tool: keys, signatures, encryption"
p11 --keypairgen --key-type EC:prime256v1 --label signer --id 01 | head -1
p11 --keypairgen --key-type rsa:2048 --label rsa-signer --id 02 | head -1
p11 --keygen --key-type AES:32 --label data-key --id 03 | head -1
head -c 10000 /dev/urandom >"$dir/message"
p11 --sign -m ECDSA-SHA256 --id 01 --signature-format openssl -i "$dir/message" -o "$dir/ec.sig"
p11 --sign -m SHA256-RSA-PKCS --id 02 -i "$dir/message" -o "$dir/rsa.sig"
p11 --read-object --type pubkey --id 01 -o "$dir/ec.pub.der" >/dev/null
p11 --read-object --type pubkey --id 02 -o "$dir/rsa.pub.der" >/dev/null
for k in ec rsa; do
	openssl pkey -pubin -inform DER -in "$dir/$k.pub.der" -out "$dir/$k.pub.pem"
	printf 'openssl checks the %s signature the token made: ' "$k"
	openssl dgst -sha256 -verify "$dir/$k.pub.pem" -signature "$dir/$k.sig" "$dir/message"
done
iv=000102030405060708090a0b0c0d0e0f
p11 --encrypt -m AES-CBC-PAD --id 03 --iv $iv -i "$dir/message" -o "$dir/message.enc"
p11 --decrypt -m AES-CBC-PAD --id 03 --iv $iv -i "$dir/message.enc" -o "$dir/message.dec"
cmp "$dir/message" "$dir/message.dec" && echo "AES-CBC-PAD: the token decrypts what it encrypted"
if pkcs11-tool --module "$mod" --login --pin wrong-pin -O >/dev/null 2>&1; then
	echo "a wrong PIN was accepted" >&2
	exit 1
fi
echo "a wrong PIN is refused (and recorded)"

echo
echo "== figures: p11-bench, our token (audit on) vs SoftHSMv2 vs raw OpenSSL, same run"
# (docs/benchmarks.md has the full run: every operation, sizes, 1-8 threads)
$b/bench/p11-bench --iterations 1000 --data-sizes 4K --threads 1 --no-audit-off \
	--only 'aes-gcm-encrypt,ecdsa-p256-sign,rsa2048-verify,keygen-aes256,find-1-of-257' \
	| sed -n '/^targets/,$p'


echo
echo "== the audit trail: $dir/audit"
$b/verifier/auditlog-verify "$dir/audit"
echo
echo "records by action:"
cat "$dir/audit"/softtoken-*.log | grep -o '"action":"[A-Za-z_]*"' | cut -d'"' -f4 | sort | uniq -c | sort -rn
echo
echo "(left in $dir; remove it when done)"

#!/bin/bash
# The main job on built-in defaults: build (release), make a fresh token in a
# temporary directory, drive it with a real PKCS#11 client (pkcs11-tool) and
# check its results with OpenSSL, run a short head-to-head with SoftHSMv2
# (p11-bench), then verify the token's audit trail with auditlog-verify and
# print what it holds. Then the same token on format v2 through a real
# auditlog-sealer (started unprivileged in the temporary directory, 1 s
# epochs): the auditor's verification proves its trail; root rewrites an
# operation of an earlier epoch with the keys the host holds now (caught by
# the seals, not by a plain chain or the re-signed checkpoints); root cutting
# the tail shows as a `gap`, the honest limit.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build build/release --target softtoken softtoken-util auditlog-verify auditlog-keygen auditlog-sealer p11-bench >/dev/null

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
echo "== format v2 through auditlog-sealer: a trail whoever owns the host cannot rewrite unseen"
# auditlog-sealer holds the sealing state and the checkpoint signing key in a
# directory of its own (docs/sealer.md); the token only knows its socket; the
# verification key goes to the auditor, the public key to anyone (docs/keys.md)
mkdir -p "$dir/sealer" "$dir/run" "$dir/auditor" "$dir/public" "$dir/tokens-v2"
chmod 0700 "$dir/sealer"
$b/keygen/auditlog-keygen --host demo.example --delta 1 --state "$dir/sealer/sealing-state" \
	--signing-key "$dir/sealer/signing-key" --pubkey "$dir/public/pubkey" \
	--verify-key "$dir/auditor/verify-key" | grep -E '^(host|key-id|delta) '
as_sealer=()
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
	# root runs it as nobody: the sealer never needs privileges
	chmod 0711 "$dir"
	chmod 0755 "$dir/run" "$dir/public"
	chown -R nobody "$dir/sealer" "$dir/run"
	as_sealer=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
fi
"${as_sealer[@]}" $b/sealer/auditlog-sealer --state "$dir/sealer/sealing-state" \
	--signing-key "$dir/sealer/signing-key" --socket "$dir/run/sock" --allow-uid "$(id -u)" \
	2>"$dir/sealer.log" &
spid=$!
trap 'kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null' EXIT
for _ in $(seq 100); do [ -S "$dir/run/sock" ] && break; sleep 0.05; done
[ -S "$dir/run/sock" ] || { cat "$dir/sealer.log" >&2; exit 1; }
echo "auditlog-sealer (pid $spid, uid $(stat -c %u "$dir/sealer/sealing-state")) listens on $dir/run/sock"
printf '%s\n' "token_dir = $dir/tokens-v2" "audit_dir = $dir/audit-v2" "audit_format_version = 2" \
	"audit_sealer_socket = $dir/run/sock" >"$dir/softtoken-v2.conf"
export SOFTTOKEN_CONF=$dir/softtoken-v2.conf
$b/token/softtoken-util --module "$mod" init --slot 0 --label demo-v2 --so-pin-file "$dir/so.pin" --pin-file "$dir/user.pin" >/dev/null
p11 --keypairgen --key-type EC:prime256v1 --label v2-signer --id 11 | head -1
p11 --sign -m ECDSA-SHA256 --id 11 -i "$dir/message" -o "$dir/v2a.sig"
sleep 2.2 # two epochs pass: the sealer has erased the keys that sealed what came before
p11 --sign -m ECDSA-SHA256 --id 11 -i "$dir/message" -o "$dir/v2b.sig"
VK=(--verify-key "$dir/auditor/verify-key")
PK=(--pubkey "$dir/public/pubkey")
v2=$dir/audit-v2
verdict() { # expected exit, what, auditlog-verify arguments... (its output left in $out)
	local want=$1 what=$2 rc=0
	shift 2
	out=$($b/verifier/auditlog-verify "$@" 2>&1) || rc=$?
	printf '%s: exit %d\n' "$what" "$rc"
	# the first two findings, how many more, and the summary
	printf '%s\n' "$out" | awk '/: offset [0-9]+, seq/ { if (++n <= 2) print "    " $0; next }
		/^(intact|findings|v2):/ { s = s "    " $0 "\n" }
		END { if (n > 2) print "    ... and " n - 2 " more"; printf "%s", s }'
	[ "$rc" = "$want" ] || { echo "expected exit $want" >&2; exit 1; }
}
verdict 0 "the auditor: seals (verification key) and checkpoints (public key)" "${VK[@]}" "${PK[@]}" "$v2"

echo
echo "-- root, now: takes the sealer's state and signing key and rewrites an earlier operation"
python3 scripts/root-attack.py rewrite "$v2" softtoken-0.log "$dir/sealer/sealing-state" \
	"$dir/sealer/signing-key" "$dir/attacked"
verdict 0 "a plain chain check (all that v1 offers)" "$dir/attacked"
verdict 0 "checkpoints alone (root holds the signing key)" "${PK[@]}" "$dir/attacked"
verdict 1 "the auditor's seals" "${VK[@]}" "${PK[@]}" "$dir/attacked"
grep -q ': bad-seal: ' <<<"$out" || { echo "the rewrite was not reported as bad-seal" >&2; exit 1; }

echo
echo "-- root cuts the tail at a seal and lets the token go on: a gap, the honest limit"
python3 scripts/root-attack.py cut "$v2" softtoken-0.log "$dir/cut"
cp "$dir/cut/softtoken-0.log" "$v2/softtoken-0.log"
sleep 2.2
p11 --sign -m ECDSA-SHA256 --id 11 -i "$dir/message" -o "$dir/v2c.sig"
verdict 0 "the auditor (a gap is reported, not an integrity failure)" "${VK[@]}" "${PK[@]}" "$v2"
grep -q ': gap: ' <<<"$out" || { echo "no gap reported" >&2; exit 1; }
verdict 1 "the auditor with --strict" --strict "${VK[@]}" "${PK[@]}" "$v2"

kill "$spid"; wait "$spid" || true
trap - EXIT
echo
echo "(auditlog-sealer stopped; left in $dir; remove it when done)"

#!/bin/bash
# libsofttoken.so driven by a real client: OpenSC's pkcs11-tool initialises
# the token, makes keys, signs, verifies, encrypts and decrypts; openssl checks
# every result on its own (the token's public keys, known AES keys); and the
# audit trail must hold exactly the records of what was done, verified by
# auditlog-verify, with no PIN in it.
#
# Usage: token_clients.sh libsofttoken.so softtoken-util auditlog-verify
# Exit: 0 passed, 1 failed, 77 skipped (pkcs11-tool or openssl missing).
# TOKEN_TEST_KEEP=1 keeps the work directory.
set -u
[ $# -eq 3 ] || { echo "usage: $0 libsofttoken.so softtoken-util auditlog-verify" >&2; exit 2; }
MOD=$(realpath "$1")
UTIL=$2
VERIFY=$3
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)

skip() { echo "token_clients: SKIP: $*" >&2; exit 77; }
command -v pkcs11-tool >/dev/null 2>&1 || skip "pkcs11-tool not found (Debian package opensc)"
command -v openssl >/dev/null 2>&1 || skip "openssl not found"
[ -x "$PY" ] || skip "$PY not found"

d=$(mktemp -d "${TMPDIR:-/var/tmp}/token-clients.XXXXXX")
cleanup() { if [ -n "${TOKEN_TEST_KEEP:-}" ]; then echo "token_clients: kept $d" >&2; else rm -rf "$d"; fi; }
trap cleanup EXIT
fail() {
	echo "token_clients: FAIL: $*" >&2
	[ -s "$d/out" ] && { echo "--- output:" >&2; tail -n 40 "$d/out" >&2; }
	exit 1
}

# PINs with characters no hex digest or base64 id can hold by chance, so a
# search for them in the trail finds only a leak.
SO_PIN='SoPin-4711xyz'
PIN='UsrPin-0815qz'
BAD_PIN='WrongPin-99q'
AUDIT=$d/audit
cat >"$d/softtoken.conf" <<EOF
token_dir = $d/tokens
audit_dir = $AUDIT
pbkdf2_iterations = 1000
slots = 2
EOF
export SOFTTOKEN_CONF=$d/softtoken.conf

. "$HERE/token_san.sh" # SAN: the preload a sanitizer build of the module needs

# ---- the audit checker -------------------------------------------------------
# mark: remember where every audit file ends; step NAME SPEC: the event records
# written since the mark are exactly SPEC, a list of ACTION{field=value,...};
# defaults: outcome/rv success, slot 0 and the step's own session for records
# of a session; "-" means the field is absent; "@slot=N" first sets the slot.
# (tests/token_audit.py: mark, step, loose, final, present, spki)
AUDIT_PY=$HERE/token_audit.py

mark() { "$PY" "$AUDIT_PY" mark "$AUDIT" "$d/mark" || fail "audit mark"; }
step() { "$PY" "$AUDIT_PY" step "$AUDIT" "$d/mark" "$1" "$2" || fail "audit records of: $1"; }

# p11 NAME SPEC ARGS...: pkcs11-tool must succeed; then its records must be SPEC.
p11() {
	local name=$1 spec=$2
	shift 2
	"${SAN[@]}" pkcs11-tool --module "$MOD" "$@" >"$d/out" 2>&1 || fail "$name: pkcs11-tool $* exited $?"
	step "$name" "$spec"
}
# p11_fails NAME SPEC PATTERN ARGS...: pkcs11-tool must fail saying PATTERN.
p11_fails() {
	local name=$1 spec=$2 pat=$3
	shift 3
	if "${SAN[@]}" pkcs11-tool --module "$MOD" "$@" >"$d/out" 2>&1; then
		fail "$name: pkcs11-tool $* succeeded"
	fi
	grep -q -- "$pat" "$d/out" || fail "$name: no '$pat' in the output"
	step "$name" "$spec"
}
# The wrapper of every command run inside a logged-in session: open, login, ...
U="--slot 0 --login --pin $PIN"
IN='C_Initialize C_OpenSession C_Login'
IN_RW='C_Initialize C_OpenSession{detail=rw} C_Login'
OUT='C_CloseSession C_Finalize'
found() { echo "C_FindObjectsFinal{detail=matched=$1${2:+,actor=$2}}"; }

mkdir -p "$d/tokens"
cd "$d" || fail "cd $d"
mark

# ---- token setup ----------------------------------------------------------------
p11 "list slots" 'C_Initialize C_Finalize' -L
grep -q '^Slot 0 (0x0)' out && grep -q '^Slot 1 (0x1)' out || fail "-L does not list slots 0 and 1"
[ "$(grep -c 'token state:   uninitialized' out)" = 2 ] || fail "-L: the new slots are not both uninitialised"
p11 "init token" 'C_Initialize C_InitToken{slot=0,actor=so,key_label=test} C_Finalize' \
	--slot 0 --init-token --label test --so-pin "$SO_PIN"
p11 "init pin" 'C_Initialize C_OpenSession{detail=rw} C_Login{actor=so} C_InitPIN{actor=so} C_CloseSession{actor=so} C_Finalize' \
	--slot 0 --init-pin --so-pin "$SO_PIN" --pin "$PIN"
p11 "list slots again" 'C_Initialize C_Finalize' -L
grep -q 'token label        : test' out || fail "-L: no label 'test'"
grep -q 'PIN initialized' out || fail "-L: the user PIN is not initialised"
grep -q 'token initialized' out || fail "-L: the token is not initialised"

# softtoken-util initialises slot 1 through the same module; PINs from files.
printf '%s\n' "$SO_PIN" >so.pin
printf '%s\n' "$PIN" >user.pin
printf '%s\n' "$BAD_PIN" >bad.pin
"$UTIL" --module "$MOD" init --slot 1 --label util --so-pin-file so.pin --pin-file user.pin >out 2>&1 ||
	fail "softtoken-util init exited $?"
step "softtoken-util init" '@slot=1 C_Initialize C_InitToken{slot=1,actor=so,key_label=util} C_OpenSession{detail=rw} C_Login{actor=so} C_InitPIN{actor=so} C_Logout{actor=so} C_CloseSession{actor=public} C_Finalize'
"$UTIL" --module "$MOD" init --slot 1 --label util --so-pin-file bad.pin --pin-file user.pin >out 2>&1
rc=$?
[ $rc = 1 ] || fail "softtoken-util init with a wrong SO PIN exited $rc, not 1"
grep -q CKR_PIN_INCORRECT out || fail "softtoken-util: no CKR_PIN_INCORRECT for a wrong SO PIN"
step "softtoken-util wrong SO PIN" 'C_Initialize C_InitToken{slot=1,actor=so,rv=CKR_PIN_INCORRECT} C_Finalize'
"$UTIL" --module "$MOD" show >out 2>&1 || fail "softtoken-util show exited $?"
grep -q '^slot 0: label "test", serial .*, user PIN set' out || fail "softtoken-util show: slot 0"
grep -q '^slot 1: label "util", serial .*, user PIN set' out || fail "softtoken-util show: slot 1"
step "softtoken-util show" 'C_Initialize C_Finalize'

# ---- mechanisms -------------------------------------------------------------------
p11 "mechanisms" 'C_Initialize C_Finalize' --slot 0 -M
for m in 'AES-KEY-GEN, keySize={16,32}, generate' 'AES-ECB, .*encrypt, decrypt' 'AES-CBC, .*encrypt, decrypt' \
	'AES-CBC-PAD, .*encrypt, decrypt' 'AES-GCM, .*encrypt, decrypt' 'AES-KEY-WRAP, .*wrap, unwrap' \
	'mechtype-0x210A, .*wrap, unwrap' 'GENERIC-SECRET-KEY-GEN, .*generate' 'SHA256-HMAC, .*sign, verify' \
	'SHA-1, digest' 'SHA256, digest' 'SHA384, digest' 'SHA512, digest' \
	'ECDSA-KEY-PAIR-GEN, keySize={256,384}, generate_key_pair' 'ECDSA, .*sign, verify' \
	'ECDSA-SHA256, .*sign, verify' 'ECDSA-SHA384, .*sign, verify' 'RSA-PKCS-KEY-PAIR-GEN, .*generate_key_pair' \
	'RSA-PKCS, .*encrypt, decrypt, sign, verify' 'SHA256-RSA-PKCS, .*sign, verify' 'RSA-PKCS-PSS, .*sign, verify' \
	'SHA256-RSA-PKCS-PSS, .*sign, verify' 'RSA-PKCS-OAEP, .*encrypt, decrypt' \
	'EC-EDWARDS-KEY-PAIR-GEN, .*generate_key_pair' 'EDDSA, .*sign, verify' 'AES-CTR, .*encrypt, decrypt' \
	'AES-CMAC, .*sign, verify' 'SHA384-HMAC, .*sign, verify' 'SHA512-HMAC, .*sign, verify' 'SHA224, digest' \
	'ECDH1-DERIVE, .*derive'; do
	grep -q "^  $m" out || fail "-M does not list '$m'"
done
OFFERED=CKM_AES_KEY_GEN,CKM_AES_ECB,CKM_AES_CBC,CKM_AES_CBC_PAD,CKM_AES_GCM,CKM_AES_KEY_WRAP,CKM_AES_KEY_WRAP_PAD,CKM_GENERIC_SECRET_KEY_GEN,CKM_SHA256_HMAC,CKM_SHA_1,CKM_SHA256,CKM_SHA384,CKM_SHA512,CKM_EC_KEY_PAIR_GEN,CKM_ECDSA,CKM_ECDSA_SHA256,CKM_ECDSA_SHA384,CKM_RSA_PKCS_KEY_PAIR_GEN,CKM_RSA_PKCS,CKM_SHA256_RSA_PKCS,CKM_RSA_PKCS_PSS,CKM_SHA256_RSA_PKCS_PSS,CKM_RSA_PKCS_OAEP,CKM_EC_EDWARDS_KEY_PAIR_GEN,CKM_EDDSA,CKM_AES_CTR,CKM_AES_CMAC,CKM_SHA384_HMAC,CKM_SHA512_HMAC,CKM_SHA224,CKM_ECDH1_DERIVE
[ "$(grep -c '^  ' out)" = 31 ] || fail "-M lists $(grep -c '^  ' out) mechanisms, not the 31 of the module's table"

# ---- key generation ---------------------------------------------------------------
p11 "keygen AES-256" "$IN_RW C_GenerateKey{mechanism=CKM_AES_KEY_GEN,key_label=aes1,key_id=01} $OUT" \
	$U --keygen --key-type AES:32 --label aes1 --id 01
grep -q 'AES length 32' out || fail "keygen: not a 32-byte AES key"
p11 "keygen HMAC" "$IN_RW C_GenerateKey{mechanism=CKM_GENERIC_SECRET_KEY_GEN,key_label=hmac1,key_id=0a} $OUT" \
	$U --keygen --key-type GENERIC:32 --label hmac1 --id 0a
GENPAIR="C_GenerateKeyPair{detail=-"
p11 "keypairgen P-256" "$IN_RW $GENPAIR,mechanism=CKM_EC_KEY_PAIR_GEN,key_label=ec256,key_id=02} $OUT" \
	$U --keypairgen --key-type EC:prime256v1 --label ec256 --id 02
grep -q 'EC_PARAMS:  06082a8648ce3d030107' out || fail "P-256 key: EC_PARAMS"
p11 "keypairgen P-384" "$IN_RW $GENPAIR,mechanism=CKM_EC_KEY_PAIR_GEN,key_label=ec384,key_id=03} $OUT" \
	$U --keypairgen --key-type EC:secp384r1 --label ec384 --id 03
grep -q 'EC_POINT 384 bits' out || fail "P-384 key: EC_POINT"
p11 "keypairgen RSA-2048" "$IN_RW $GENPAIR,mechanism=CKM_RSA_PKCS_KEY_PAIR_GEN,key_label=rsa2048,key_id=04} $OUT" \
	$U --keypairgen --key-type rsa:2048 --label rsa2048 --id 04
grep -q 'RSA 2048 bits' out || fail "RSA key: not 2048 bits"
# pkcs11-tool 0.23 asks for Ed25519 with the printable-string curve name.
p11 "keypairgen Ed25519" "$IN_RW $GENPAIR,mechanism=CKM_EC_EDWARDS_KEY_PAIR_GEN,key_label=ed25519,key_id=05} $OUT" \
	$U --keypairgen --key-type EC:edwards25519 --label ed25519 --id 05
grep -q 'EC_EDWARDS  EC_POINT 255 bits' out || fail "Ed25519 key"

# ---- objects and public keys --------------------------------------------------------
p11 "list objects" "$IN $(found 10) $OUT" $U -O
cp out objects.txt
for l in aes1 hmac1 ec256 ec384 rsa2048 ed25519; do
	grep -q "label:      $l\$" objects.txt || fail "-O: no object $l"
done
[ "$(grep -c '^Private Key Object' objects.txt)" = 4 ] || fail "-O: not 4 private keys"
[ "$(grep -c '^Public Key Object' objects.txt)" = 4 ] || fail "-O: not 4 public keys"
[ "$(grep -c '^Secret Key Object' objects.txt)" = 2 ] || fail "-O: not 2 secret keys"
# Without a login the private and secret objects stay hidden (pkcs11-tool -O
# shows public objects only).
p11 "list public objects" "C_Initialize C_OpenSession $(found 4 public) C_CloseSession{actor=public} C_Finalize" --slot 0 -O
grep -q 'Private Key Object' out && fail "-O without login shows a private key"
[ "$(grep -c '^Public Key Object' out)" = 4 ] || fail "-O without login: not 4 public keys"

# pkcs11-tool 0.23 exports EC public keys through a use-after-free (ASan:
# heap-use-after-free under EVP_PKEY_fromdata; without ASan P-384 fails with
# "cannot create EVP_PKEY", also with SoftHSM): build the EC keys'
# SubjectPublicKeyInfo from CKA_EC_PARAMS and CKA_EC_POINT in the -O listing
# instead, and export RSA and Ed25519 keys with --read-object.
for id in 04 05; do
	p11 "export public key $id" "$IN $(found 1) $OUT" $U --read-object --type pubkey --id $id -o pub$id.der
	openssl pkey -pubin -in pub$id.der -noout 2>>out || fail "openssl cannot read the exported key $id"
done
for id in 02 03 05; do
	"$PY" "$AUDIT_PY" spki objects.txt $id spki$id.der || fail "public key $id from -O"
done
cp spki02.der pub02.der
cp spki03.der pub03.der
cmp -s <(openssl pkey -pubin -in pub05.der -outform DER) spki05.der ||
	fail "the exported Ed25519 public key differs from its CKA_EC_POINT"
openssl pkey -pubin -inform DER -in pub02.der -noout -text 2>&1 | grep -q 'NIST CURVE: P-256' || fail "P-256 SPKI"
openssl pkey -pubin -inform DER -in pub03.der -noout -text 2>&1 | grep -q 'NIST CURVE: P-384' || fail "P-384 SPKI"

# ---- sign / verify, each checked by openssl with the exported public key -----------------
head -c 3000 /dev/urandom >data
head -c 700 data >small
openssl dgst -sha256 -binary data >data.sha256
openssl dgst -sha384 -binary data >data.sha384
sign() { # NAME MECH ID IN SIG [extra pkcs11-tool options]
	local name=$1 mech=$2 id=$3 in=$4 sig=$5 ck label
	shift 5
	ck=CKM_$(echo "$mech" | tr - _)
	label=$(awk -v id="$id" '/^  label:/ { l = $2 } /^  ID:/ && $2 == id { print l; exit }' objects.txt)
	p11 "$name" "$IN $(found 1) $(ends C_Sign "$in"){mechanism=$ck,key_label=$label,key_id=$id} $OUT" \
		$U --sign -m "$mech" --id "$id" -i "$in" -o "$sig" "$@"
}
tverify() { # NAME MECH ID IN SIG [extra options]: the token verifies
	local name=$1 mech=$2 id=$3 in=$4 sig=$5 label
	shift 5
	label=$(awk -v id="$id" '/^  label:/ { l = $2 } /^  ID:/ && $2 == id { print l; exit }' objects.txt)
	p11 "$name" "$IN $(found 1) $(ends C_Verify "$in"){mechanism=CKM_$(echo "$mech" | tr - _),key_label=$label,key_id=$id} $OUT" \
		$U --verify -m "$mech" --id "$id" -i "$in" --signature-file "$sig" "$@"
	grep -q 'Signature is valid' out || fail "$name: not 'Signature is valid'"
}
# pkcs11-tool 0.23 passes up to 1023 bytes in one call (C_Sign, C_Verify),
# more in parts (C_SignUpdate ... C_SignFinal): the record names the last call.
ends() { if [ "$(stat -c %s "$2")" -lt 1024 ]; then echo "$1"; else echo "${1}Final"; fi; }
flip() { "$PY" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 1; open(sys.argv[2], "wb").write(b)' "$1" "$2"; }
ossl() { # command...: openssl must accept
	"$@" >"$d/out" 2>&1 || fail "openssl rejected: $*"
}
ossl_rejects() {
	"$@" >"$d/out" 2>&1 && fail "openssl accepted a damaged signature: $*"
	return 0
}

sign "ECDSA-SHA256 P-256" ECDSA-SHA256 02 data sig1 -f openssl
ossl openssl dgst -sha256 -verify pub02.der -signature sig1 data
flip sig1 sig1.bad
ossl_rejects openssl dgst -sha256 -verify pub02.der -signature sig1.bad data
tverify "verify ECDSA-SHA256 in the token" ECDSA-SHA256 02 data sig1 -f openssl
sign "ECDSA-SHA256 P-256 one part, r||s" ECDSA-SHA256 02 small sig1rs
[ "$(stat -c %s sig1rs)" = 64 ] || fail "ECDSA P-256 r||s signature is not 64 bytes"
# pkcs11-tool 0.23 says "Invalid signature" and exits 0.
p11 "verify a damaged ECDSA signature" "$IN $(found 1) C_VerifyFinal{mechanism=CKM_ECDSA_SHA256,key_label=ec256,key_id=02,rv=CKR_SIGNATURE_INVALID} $OUT" \
	$U --verify -m ECDSA-SHA256 --id 02 -i data --signature-file sig1.bad -f openssl
grep -q '^Invalid signature' out || fail "a damaged ECDSA signature verified"

sign "ECDSA P-256 on a hash" ECDSA 02 data.sha256 sig2 -f openssl
ossl openssl pkeyutl -verify -pubin -inkey pub02.der -in data.sha256 -sigfile sig2
sign "ECDSA-SHA384 P-384" ECDSA-SHA384 03 data sig3 -f openssl
ossl openssl dgst -sha384 -verify pub03.der -signature sig3 data
sign "ECDSA-SHA384 P-384 one part" ECDSA-SHA384 03 small sig3s -f openssl
ossl openssl dgst -sha384 -verify pub03.der -signature sig3s small
tverify "verify ECDSA-SHA384 in the token" ECDSA-SHA384 03 small sig3s -f openssl
sign "ECDSA P-384 on a hash" ECDSA 03 data.sha384 sig3b -f openssl
ossl openssl pkeyutl -verify -pubin -inkey pub03.der -in data.sha384 -sigfile sig3b
sign "SHA256-RSA-PKCS" SHA256-RSA-PKCS 04 data sig4
ossl openssl dgst -sha256 -verify pub04.der -signature sig4 data
flip sig4 sig4.bad
ossl_rejects openssl dgst -sha256 -verify pub04.der -signature sig4.bad data
tverify "verify SHA256-RSA-PKCS in the token" SHA256-RSA-PKCS 04 data sig4
sign "RSA-PKCS raw" RSA-PKCS 04 data.sha256 sig4raw
ossl openssl pkeyutl -verifyrecover -pubin -inkey pub04.der -in sig4raw -out recovered
cmp -s recovered data.sha256 || fail "RSA-PKCS: the signature does not recover the signed bytes"
sign "SHA256-RSA-PKCS one part" SHA256-RSA-PKCS 04 small sig4s
ossl openssl dgst -sha256 -verify pub04.der -signature sig4s small
sign "SHA256-RSA-PKCS-PSS" SHA256-RSA-PKCS-PSS 04 data sig5
ossl openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -verify pub04.der -signature sig5 data
tverify "verify SHA256-RSA-PKCS-PSS in the token" SHA256-RSA-PKCS-PSS 04 data sig5
sign "RSA-PKCS-PSS on a hash" RSA-PKCS-PSS 04 data.sha256 sig6 --hash-algorithm SHA256 --mgf MGF1-SHA256
ossl openssl pkeyutl -verify -pubin -inkey pub04.der -pkeyopt rsa_padding_mode:pss -pkeyopt digest:sha256 \
	-pkeyopt rsa_pss_saltlen:32 -in data.sha256 -sigfile sig6
sign "Ed25519" EDDSA 05 small sig7
[ "$(stat -c %s sig7)" = 64 ] || fail "Ed25519 signature is not 64 bytes"
ossl openssl pkeyutl -verify -pubin -inkey pub05.der -rawin -in small -sigfile sig7
flip sig7 sig7.bad
ossl_rejects openssl pkeyutl -verify -pubin -inkey pub05.der -rawin -in small -sigfile sig7.bad
tverify "verify Ed25519 in the token" EDDSA 05 small sig7
p11 "verify a damaged Ed25519 signature" "$IN $(found 1) C_Verify{mechanism=CKM_EDDSA,key_label=ed25519,key_id=05,rv=CKR_SIGNATURE_INVALID} $OUT" \
	$U --verify -m EDDSA --id 05 -i small --signature-file sig7.bad
grep -q '^Invalid signature' out || fail "a damaged Ed25519 signature verified"
# HMAC: the token signs and verifies (openssl cross-checks in token_pykcs11.py,
# where the key value is known).
p11 "HMAC sign" "$IN $(found 1) C_SignFinal{mechanism=CKM_SHA256_HMAC,key_label=hmac1,key_id=0a} $OUT" \
	$U --sign -m SHA256-HMAC --id 0a -i data -o mac
[ "$(stat -c %s mac)" = 32 ] || fail "HMAC-SHA256 is not 32 bytes"
p11 "HMAC verify" "$IN $(found 1) C_VerifyFinal{mechanism=CKM_SHA256_HMAC,key_label=hmac1,key_id=0a} $OUT" \
	$U --verify -m SHA256-HMAC --id 0a -i data --signature-file mac
grep -q 'Signature is valid' out || fail "HMAC verify"

# ---- encrypt / decrypt ----------------------------------------------------------------
head -c 100 data >plain
head -c 32 data >plain32
IV=00112233445566778899aabbccddeeff
p11 "AES-CBC-PAD encrypt" "$IN $(found 1) C_Encrypt{mechanism=CKM_AES_CBC_PAD,key_label=aes1,key_id=01} $OUT" \
	$U --encrypt -m AES-CBC-PAD --id 01 --iv $IV -i plain -o ct1
[ "$(stat -c %s ct1)" = 112 ] || fail "AES-CBC-PAD: 100 bytes did not become 112"
p11 "AES-CBC-PAD decrypt" "$IN $(found 0) $(found 1) C_Decrypt{mechanism=CKM_AES_CBC_PAD,key_label=aes1,key_id=01} $OUT" \
	$U --decrypt -m AES-CBC-PAD --id 01 --iv $IV -i ct1 -o pt1
cmp -s pt1 plain || fail "AES-CBC-PAD: the token's decryption differs from the plaintext"
flip ct1 ct1.bad
# A damaged last block: bad padding (or, 1 in 256, valid padding of garbage).
if "${SAN[@]}" pkcs11-tool --module "$MOD" $U --decrypt -m AES-CBC-PAD --id 01 --iv $IV -i ct1.bad -o pt1.bad >out 2>&1; then
	cmp -s pt1.bad plain && fail "AES-CBC-PAD: damaged ciphertext decrypted to the plaintext"
fi
mark

# A known AES key (C_CreateObject): openssl and the token must agree both ways.
head -c 32 /dev/urandom >aes.key
K=$(od -An -tx1 -v aes.key | tr -d ' \n')
p11 "import AES key" "$IN_RW C_CreateObject{key_label=aesimp,key_id=10} $OUT" \
	--slot 0 --login --pin "$PIN" -w aes.key --type secrkey --key-type AES:32 --label aesimp --id 10
openssl enc -aes-256-cbc -K "$K" -iv $IV -in plain -out ct2 || fail "openssl enc"
p11 "decrypt OpenSSL's AES-CBC-PAD" "$IN $(found 0) $(found 1) C_Decrypt{mechanism=CKM_AES_CBC_PAD,key_label=aesimp,key_id=10} $OUT" \
	$U --decrypt -m AES-CBC-PAD --id 10 --iv $IV -i ct2 -o pt2
cmp -s pt2 plain || fail "the token did not decrypt OpenSSL's AES-256-CBC"
p11 "AES-CBC-PAD for OpenSSL" "$IN $(found 1) C_Encrypt{mechanism=CKM_AES_CBC_PAD,key_label=aesimp,key_id=10} $OUT" \
	$U --encrypt -m AES-CBC-PAD --id 10 --iv $IV -i plain -o ct3
cmp -s ct3 ct2 || fail "the token's AES-CBC-PAD differs from OpenSSL's"
openssl enc -d -aes-256-cbc -K "$K" -iv $IV -in ct3 -out pt3 && cmp -s pt3 plain || fail "openssl did not decrypt the token's AES-CBC-PAD"
p11 "AES-CBC" "$IN $(found 1) C_Encrypt{mechanism=CKM_AES_CBC,key_label=aesimp,key_id=10} $OUT" \
	$U --encrypt -m AES-CBC --id 10 --iv $IV -i plain32 -o ct4
openssl enc -aes-256-cbc -nopad -K "$K" -iv $IV -in plain32 -out ct4o && cmp -s ct4 ct4o || fail "AES-CBC differs from OpenSSL's"
p11 "AES-ECB" "$IN $(found 1) C_Encrypt{mechanism=CKM_AES_ECB,key_label=aesimp,key_id=10} $OUT" \
	$U --encrypt -m AES-ECB --id 10 -i plain32 -o ct5
openssl enc -aes-256-ecb -nopad -K "$K" -in plain32 -out ct5o && cmp -s ct5 ct5o || fail "AES-ECB differs from OpenSSL's"
p11 "AES-ECB decrypt" "$IN $(found 0) $(found 1) C_Decrypt{mechanism=CKM_AES_ECB,key_label=aesimp,key_id=10} $OUT" \
	$U --decrypt -m AES-ECB --id 10 -i ct5o -o pt5
cmp -s pt5 plain32 || fail "AES-ECB: the token did not decrypt OpenSSL's"
# pkcs11-tool 0.23 has no AES-GCM (no --aad/--tag-bits): token_pykcs11.py does it.

# RSA: OpenSSL encrypts to the exported public key, the token decrypts.
# (pkcs11-tool 0.23 encrypts with secret keys only.)
head -c 50 data >p50
ossl openssl pkeyutl -encrypt -pubin -inkey pub04.der -pkeyopt rsa_padding_mode:oaep \
	-pkeyopt rsa_oaep_md:sha256 -pkeyopt rsa_mgf1_md:sha256 -in p50 -out rct1
p11 "RSA-OAEP-SHA256 decrypt" "$IN $(found 1) C_Decrypt{mechanism=CKM_RSA_PKCS_OAEP,key_label=rsa2048,key_id=04} $OUT" \
	$U --decrypt -m RSA-PKCS-OAEP --hash-algorithm SHA256 --mgf MGF1-SHA256 --id 04 -i rct1 -o rpt1
cmp -s rpt1 p50 || fail "RSA-OAEP (SHA-256): the token did not decrypt OpenSSL's"
ossl openssl pkeyutl -encrypt -pubin -inkey pub04.der -pkeyopt rsa_padding_mode:oaep -in p50 -out rct2
p11 "RSA-OAEP-SHA1 decrypt" "$IN $(found 1) C_Decrypt{mechanism=CKM_RSA_PKCS_OAEP,key_label=rsa2048,key_id=04} $OUT" \
	$U --decrypt -m RSA-PKCS-OAEP --hash-algorithm SHA-1 --mgf MGF1-SHA1 --id 04 -i rct2 -o rpt2
cmp -s rpt2 p50 || fail "RSA-OAEP (SHA-1): the token did not decrypt OpenSSL's"
# The wrong OAEP hash: C_Decrypt fails; pkcs11-tool then retries multi-part,
# which this single-part mechanism refuses; two failure records.
p11_fails "RSA-OAEP with the wrong hash" "$IN $(found 1) C_Decrypt{mechanism=CKM_RSA_PKCS_OAEP,key_label=rsa2048,key_id=04,rv=CKR_ENCRYPTED_DATA_INVALID} C_DecryptUpdate{mechanism=CKM_RSA_PKCS_OAEP,key_label=rsa2048,key_id=04,rv=CKR_MECHANISM_INVALID} C_Finalize" \
	"C_DecryptUpdate failed" $U --decrypt -m RSA-PKCS-OAEP --hash-algorithm SHA256 --mgf MGF1-SHA256 --id 04 -i rct2 -o rpt3
ossl openssl pkeyutl -encrypt -pubin -inkey pub04.der -pkeyopt rsa_padding_mode:pkcs1 -in p50 -out rct4
p11 "RSA-PKCS decrypt" "$IN $(found 1) C_Decrypt{mechanism=CKM_RSA_PKCS,key_label=rsa2048,key_id=04} $OUT" \
	$U --decrypt -m RSA-PKCS --id 04 -i rct4 -o rpt4
cmp -s rpt4 p50 || fail "RSA-PKCS: the token did not decrypt OpenSSL's"

# ---- digest and random (digests write no record) ------------------------------------------
p11 "SHA-256 digest" "C_Initialize C_OpenSession C_CloseSession{actor=public} C_Finalize" --slot 0 --hash -m SHA256 -i data -o dg
cmp -s dg data.sha256 || fail "the token's SHA-256 differs from OpenSSL's"
p11 "random" "$IN C_GenerateRandom{detail=bytes=48} $OUT" $U --generate-random 48 -o rnd
[ "$(stat -c %s rnd)" = 48 ] || fail "--generate-random 48 gave $(stat -c %s rnd) bytes"

# ---- wrong PIN --------------------------------------------------------------------------------
p11_fails "wrong PIN" 'C_Initialize C_OpenSession C_Login{actor=user,rv=CKR_PIN_INCORRECT} C_Finalize' \
	CKR_PIN_INCORRECT --slot 0 --login --pin "$BAD_PIN" -O

# ---- pkcs11-tool's own test -------------------------------------------------------------------
"${SAN[@]}" pkcs11-tool --module "$MOD" --slot 0 --test --login --pin "$PIN" >"$d/out" 2>&1 ||
	fail "pkcs11-tool --test exited $?"
grep -qi 'failed' out && fail "pkcs11-tool --test reports a failure"
grep -q '^No errors' out || fail "pkcs11-tool --test: no 'No errors'"
"$PY" "$AUDIT_PY" loose "$AUDIT" "$d/mark" "pkcs11-tool --test" "C_Login=1 C_SeedRandom=1 C_GenerateRandom=1+ C_Decrypt=1+" "$OFFERED" ||
	fail "audit records of pkcs11-tool --test"

# ---- the trail ----------------------------------------------------------------------------------
"$PY" "$AUDIT_PY" final "$AUDIT" "$d/mark" "$d/tokens" "$SO_PIN" "$PIN" "$BAD_PIN" >out 2>&1 || fail "audit trail"
"$VERIFY" "$AUDIT" >out 2>&1 || fail "auditlog-verify $AUDIT exited $?"
grep -q '^intact' out || fail "auditlog-verify did not say intact"
# The checker must see damage: one changed byte in a record.
cp -a "$AUDIT" "$d/audit-damaged"
f=$(ls "$d/audit-damaged"/*.log | head -n 1)
sed -i '5s/"outcome":"success"/"outcome":"failure"/' "$f"
"$VERIFY" "$d/audit-damaged" >out 2>&1
[ $? = 1 ] || fail "auditlog-verify did not find a modified record"
echo "token_clients: all checks passed ($(grep -c '"type":"event"' "$AUDIT"/*.log | awk -F: '{ s += $NF } END { print s }') audit records)"

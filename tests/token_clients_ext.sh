#!/bin/bash
# libsofttoken.so driven by the PKCS#11 clients people use besides pkcs11-tool
# and PyKCS11 (token_clients.sh, token_pykcs11.py), each as docs/token.md
# "Clients" shows it:
#  - p11-kit: the module registered by a module file in the user's own
#    configuration (~/.config/pkcs11/modules), `p11-kit list-modules`, and the
#    module used through p11-kit-proxy.so (key generation, a signature);
#  - GnuTLS p11tool: list tokens, generate an ECDSA key, export its public
#    key, --test-sign;
#  - NSS modutil/certutil: add the module to an NSS database, generate a key
#    and a self-signed certificate stored in the token;
#  - OpenSSL through libengine-pkcs11-openssl: CSRs signed with token keys
#    (RSA and EC), checked with `openssl req -verify`.
# Every result is checked by openssl on its own; after each client its audit
# records must be there (tests/token_audit.py present), and the whole trail
# must verify with auditlog-verify and hold no PIN.
#
# p11-kit ignores user configuration in a process running as root; then the
# clients run as nobody (setpriv), in a directory that user owns.
#
# Usage: token_clients_ext.sh libsofttoken.so auditlog-verify
# Exit: 0 passed, 1 failed (a missing client is a failure: CI installs them
# with scripts/install-deps.sh). TOKEN_TEST_KEEP=1 keeps the work directory.
set -u
[ $# -eq 2 ] || { echo "usage: $0 libsofttoken.so auditlog-verify" >&2; exit 2; }
MOD=$(realpath "$1")
VERIFY=$(realpath "$2")
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
AUDIT_PY=$HERE/token_audit.py
ARCH=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
PROXY=/usr/lib/$ARCH/p11-kit-proxy.so

d=$(mktemp -d "${TMPDIR:-/var/tmp}/token-clients-ext.XXXXXX")
# as root the clients run as nobody (below), who must reach this directory:
# under a private TMPDIR (a package build's lies in a 0700 directory) it is
# made under /var/tmp instead
if [ "$(id -u)" = 0 ] && ! setpriv --reuid=65534 --regid=65534 --clear-groups -- test -x "$(dirname "$d")"; then
	rmdir "$d"
	d=$(mktemp -d /var/tmp/token-clients-ext.XXXXXX)
fi
cleanup() { if [ -n "${TOKEN_TEST_KEEP:-}" ]; then echo "token_clients_ext: kept $d" >&2; else rm -rf "$d"; fi; }
trap cleanup EXIT
fail() {
	echo "token_clients_ext: FAIL: $*" >&2
	[ -s "$w/out" ] && { echo "--- output:" >&2; tail -n 40 "$w/out" >&2; }
	exit 1
}
w=$d/w
need() { command -v "$1" >/dev/null 2>&1 || fail "$1 not found (Debian package $2, see scripts/install-deps.sh)"; }
need pkcs11-tool opensc
need openssl openssl
need p11-kit p11-kit
need p11tool gnutls-bin
need modutil libnss3-tools
need certutil libnss3-tools
[ -e "$PROXY" ] || fail "$PROXY not found (Debian package p11-kit-modules)"
[ -x "$PY" ] || fail "$PY not found"
openssl engine pkcs11 >/dev/null 2>&1 || fail "no OpenSSL ENGINE pkcs11 (Debian package libengine-pkcs11-openssl)"

. "$HERE/token_san.sh"

PIN='UsrPin-0815qz'
SO_PIN='SoPin-4711xyz'
AUDIT=$w/audit
mkdir -p "$w/home/.config/pkcs11/modules" "$w/tokens"
cat >"$w/softtoken.conf" <<EOF
token_dir = $w/tokens
audit_dir = $AUDIT
pbkdf2_iterations = 1000
EOF
AS=()
if [ "$(id -u)" = 0 ]; then
	chmod 0711 "$d"
	# nor may nobody reach the build tree: the clients load a copy of the module
	mkdir "$d/lib" && cp "$MOD" "$d/lib/" && chmod 0755 "$d/lib" && chmod 0644 "$d/lib/"* ||
		fail "cannot copy the module"
	MOD=$d/lib/$(basename "$MOD")
	chown -R 65534:65534 "$w"
	AS=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
fi
# run CMD...: a client as the test's user, with the module's configuration.
run() {
	"${AS[@]}" env HOME="$w/home" SOFTTOKEN_CONF="$w/softtoken.conf" PKCS11_MODULE_PATH="$MOD" "${SAN[@]}" "$@"
}
# as_user CMD...: a plain helper (sh, mkdir) as the test's user, no preload.
as_user() { "${AS[@]}" "$@"; }
# ok NAME CMD...: the client must succeed.
ok() {
	local name=$1
	shift
	run "$@" >"$w/out" 2>&1 || fail "$name: $* exited $?"
}
mark() { "$PY" "$AUDIT_PY" mark "$AUDIT" "$w/mark" || fail "audit mark"; }
# present NAME SPEC: each ACTION{field=value,...} of SPEC has a record since the mark.
present() { "$PY" "$AUDIT_PY" present "$AUDIT" "$w/mark" "$1" "$2" || fail "audit records of: $1"; }
cd "$w" || fail "cd $w"
as_user sh -c ': >out; head -c 500 /dev/urandom >data; printf "%s\n" "$0" >pin.txt' "$PIN" ||
	fail "cannot write in $w as $(id -un)"
openssl dgst -sha256 -binary data >data.sha256

mark
ok "init token" pkcs11-tool --module "$MOD" --slot 0 --init-token --label test --so-pin "$SO_PIN"
ok "init pin" pkcs11-tool --module "$MOD" --slot 0 --init-pin --so-pin "$SO_PIN" --pin "$PIN"
present "token setup" 'C_InitToken{key_label=test,actor=so} C_InitPIN{actor=so}'

# ---- p11-kit: a private module file, list-modules, p11-kit-proxy.so -------------------
printf 'module: %s\n' "$MOD" >"$w/home/.config/pkcs11/modules/softtoken.module"
if [ ${#SAN[@]} -eq 0 ]; then
	ok "p11-kit list-modules" p11-kit list-modules
	grep -q "^softtoken: $MOD\$" out || fail "p11-kit list-modules does not list the module file's module"
	grep -A1 "^softtoken:" out | grep -q 'library-description: softtoken (audited)' || fail "p11-kit: library-description"
	grep -q '^    token: test$' out || fail "p11-kit list-modules does not show the token 'test'"
	present "p11-kit list-modules" 'C_Initialize C_Finalize'
else
	# With a sanitizer runtime preloaded, p11-kit's CLI hangs in glibc's
	# setlocale lock while p11-kit-trust.so's constructor runs (also with no
	# module of ours registered); the proxy below still loads the module
	# through the same module file. The debug preset runs this step.
	echo "token_clients_ext: note: p11-kit list-modules not run under a sanitizer preload" >&2
fi
KIT="--module $PROXY --token-label test --login --pin $PIN"
ok "proxy keypairgen" pkcs11-tool $KIT --keypairgen --key-type rsa:2048 --label kit-rsa --id 31
ok "proxy sign" pkcs11-tool $KIT --sign -m SHA256-RSA-PKCS --id 31 -i data -o kit.sig
ok "proxy export" pkcs11-tool $KIT --read-object --type pubkey --id 31 -o kit.pub
openssl dgst -sha256 -verify kit.pub -keyform DER -signature kit.sig data >out 2>&1 ||
	fail "openssl does not verify the signature made through p11-kit-proxy.so"
present "p11-kit-proxy.so" 'C_GenerateKeyPair{mechanism=CKM_RSA_PKCS_KEY_PAIR_GEN,key_label=kit-rsa,key_id=31} C_Sign{mechanism=CKM_SHA256_RSA_PKCS,key_label=kit-rsa,key_id=31} C_Login{actor=user}'

# ---- GnuTLS p11tool -----------------------------------------------------------------------
if [ ${#SAN[@]} -eq 0 ]; then
	ok "p11tool --list-tokens" p11tool --provider "$MOD" --list-tokens
	grep -q 'URL: pkcs11:model=softtoken;manufacturer=auditlog;serial=.*;token=test$' out || fail "p11tool: no token 'test'"
	ok "p11tool --generate-privkey" env GNUTLS_PIN="$PIN" p11tool --provider "$MOD" --login \
		--generate-privkey=ECDSA --curve=secp256r1 --label gt-ec --id 41 'pkcs11:token=test'
	run env GNUTLS_PIN="$PIN" p11tool --provider "$MOD" --login --export-pubkey 'pkcs11:token=test;object=gt-ec;type=public' >gt-ec.pem 2>out ||
		fail "p11tool --export-pubkey exited $?"
	openssl pkey -pubin -in gt-ec.pem -noout -text >out 2>&1 || fail "openssl cannot read p11tool's exported key"
	grep -q 'NIST CURVE: P-256' out || fail "p11tool's exported key is not a P-256 key"
	ok "p11tool --test-sign" env GNUTLS_PIN="$PIN" p11tool --provider "$MOD" --login --test-sign 'pkcs11:token=test;object=gt-ec'
	grep -q 'Verifying against public key in the token... ok' out || fail "p11tool --test-sign"
	present "p11tool" 'C_GenerateKeyPair{mechanism=CKM_EC_KEY_PAIR_GEN,key_label=gt-ec,key_id=41} C_Sign{mechanism=CKM_ECDSA,key_label=gt-ec,key_id=41}'
else
	# p11tool hangs like p11-kit's CLI under a sanitizer preload (glibc's
	# setlocale lock, p11-kit-trust.so's constructor). The key the OpenSSL
	# step below uses comes from pkcs11-tool then; the debug preset runs p11tool.
	echo "token_clients_ext: note: p11tool not run under a sanitizer preload" >&2
	ok "keypairgen gt-ec" pkcs11-tool --module "$MOD" --slot 0 --login --pin "$PIN" --keypairgen \
		--key-type EC:prime256v1 --label gt-ec --id 41
	mark
fi

# ---- NSS modutil / certutil -----------------------------------------------------------------
as_user mkdir nss || fail "mkdir nss"
ok "modutil -create" modutil -dbdir sql:nss -create -force
ok "modutil -add" modutil -dbdir sql:nss -add softtoken -libfile "$MOD" -force
ok "modutil -list" modutil -dbdir sql:nss -list softtoken
grep -q "Library file: $MOD" out || fail "modutil -list: not the module"
grep -q 'Token Name: test' out || fail "modutil -list: no token 'test'"
as_user sh -c 'head -c 64 /dev/urandom >noise' || fail "noise"
ok "certutil -S" certutil -d sql:nss -h test -f pin.txt -S -n nss-ec -s 'CN=softtoken NSS test' -x -t 'CT,,' \
	-k ec -q nistp256 -z noise
ok "certutil -L" certutil -d sql:nss -h test -f pin.txt -L
grep -q '^test:nss-ec ' out || fail "certutil -L: the certificate is not in the token"
run certutil -d sql:nss -h test -f pin.txt -L -n test:nss-ec -a >nss.pem 2>out || fail "certutil -L -a exited $?"
openssl x509 -in nss.pem -noout -subject >out 2>&1 && grep -q 'CN = softtoken NSS test' out ||
	fail "the NSS certificate's subject"
openssl verify -check_ss_sig -CAfile nss.pem nss.pem >out 2>&1 || fail "openssl does not verify NSS's self-signed certificate"
present "NSS certutil" 'C_GenerateKeyPair{mechanism=CKM_EC_KEY_PAIR_GEN} C_Sign{mechanism=CKM_ECDSA} C_CreateObject C_Login{actor=user}'

# ---- OpenSSL through libengine-pkcs11-openssl -------------------------------------------------
ok "keypairgen for openssl" pkcs11-tool --module "$MOD" --slot 0 --login --pin "$PIN" --keypairgen \
	--key-type rsa:2048 --label ossl-rsa --id 51
mark
for k in ossl-rsa gt-ec; do
	ok "openssl req -engine pkcs11 ($k)" openssl req -new -engine pkcs11 -keyform engine \
		-key "pkcs11:token=test;object=$k;type=private;pin-value=$PIN" -subj "/CN=softtoken CSR $k" -out "$k.csr"
	openssl req -in "$k.csr" -verify -noout >out 2>&1 || fail "openssl req -verify: the CSR signed with $k"
	grep -q 'verify OK' out || fail "openssl req -verify did not say OK for $k"
done
present "openssl -engine pkcs11" 'C_Login{actor=user} C_Sign{mechanism=CKM_RSA_PKCS,key_label=ossl-rsa,key_id=51} C_Sign{mechanism=CKM_ECDSA,key_label=gt-ec,key_id=41}'

# ---- rsa_min_bits: reported, binding, named in the C_Initialize record -----------------------
mark
ok "mechanisms" pkcs11-tool --module "$MOD" --slot 0 -M
grep -q '^  RSA-PKCS-KEY-PAIR-GEN, keySize={2048,4096}' out || fail "-M: RSA key sizes at the default floor"
run pkcs11-tool --module "$MOD" --slot 0 --login --pin "$PIN" --keypairgen --key-type rsa:1024 --label small >out 2>&1 &&
	fail "a 1024-bit RSA key was generated below rsa_min_bits = 2048"
grep -q CKR_KEY_SIZE_RANGE out || fail "no CKR_KEY_SIZE_RANGE for a 1024-bit key"
present "rsa_min_bits = 2048" 'C_Initialize{detail=-} C_GenerateKeyPair{rv=CKR_KEY_SIZE_RANGE}'
cp "$w/softtoken.conf" "$w/softtoken.conf.orig"
echo 'rsa_min_bits = 512' >>"$w/softtoken.conf"
run pkcs11-tool --module "$MOD" -L >out 2>&1 && fail "rsa_min_bits = 512 was accepted"
grep -q "softtoken.conf:4: bad value '512' for rsa_min_bits (want 1024..4096)" out || fail "rsa_min_bits = 512: no message naming the line"
cp "$w/softtoken.conf.orig" "$w/softtoken.conf"
echo 'rsa_min_bits = 1024' >>"$w/softtoken.conf"
ok "mechanisms at 1024" pkcs11-tool --module "$MOD" --slot 0 -M
grep -q '^  RSA-PKCS-KEY-PAIR-GEN, keySize={1024,4096}' out || fail "-M: RSA key sizes with rsa_min_bits = 1024"
ok "1024-bit key" pkcs11-tool --module "$MOD" --slot 0 --login --pin "$PIN" --keypairgen --key-type rsa:1024 --label small --id 61
ok "sign with it" pkcs11-tool --module "$MOD" --slot 0 --login --pin "$PIN" --sign -m SHA256-RSA-PKCS --id 61 -i data -o small.sig
present "rsa_min_bits = 1024" 'C_Initialize{detail=rsa_min_bits=1024} C_GenerateKeyPair{key_label=small} C_Sign{key_label=small}'
cp "$w/softtoken.conf.orig" "$w/softtoken.conf"
# Back at 2048: the stored 1024-bit key no longer signs.
run pkcs11-tool --module "$MOD" --slot 0 --login --pin "$PIN" --sign -m SHA256-RSA-PKCS --id 61 -i data -o small.sig2 >out 2>&1 &&
	fail "a 1024-bit key signed below rsa_min_bits = 2048"
present "rsa_min_bits back at 2048" 'C_SignInit{key_label=small,rv=CKR_KEY_SIZE_RANGE}'

# ---- the trail -------------------------------------------------------------------------------------
"$PY" "$AUDIT_PY" final "$AUDIT" "$w/mark" "$w/tokens" "$SO_PIN" "$PIN" >out 2>&1 || fail "audit trail"
"$VERIFY" "$AUDIT" >out 2>&1 || fail "auditlog-verify $AUDIT exited $?"
grep -q '^intact' out || fail "auditlog-verify did not say intact"
echo "token_clients_ext: all checks passed ($(cat "$AUDIT"/*.log* | grep -c '"type":"event"') audit records)"

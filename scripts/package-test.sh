#!/bin/bash
# The Debian packages, end to end: build them (dpkg-buildpackage), lint them
# (lintian: any error or warning fails), install them into a clean Debian 12
# root made with mmdebstrap from the archive this machine's apt uses, and run
# the demo there from the installed files only: a user of the softtoken group
# initialises a token with softtoken-util, the module is registered with
# p11-kit (the one documented line), pkcs11-tool drives it through p11-kit's
# proxy module, and the installed auditlog-verify must find the trail intact.
#
# Needs root (mmdebstrap's root mode, chroot) and the network to the archive.
# Everything is made under a temporary directory, removed at the end
# (KEEP=1 keeps it). About 1-3 minutes here: the build with its tests, then
# mmdebstrap (the downloads).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
if [ "$(id -u)" -ne 0 ]; then
	echo "package-test: needs root (mmdebstrap in root mode, chroot); skipped" >&2
	exit 77
fi
./scripts/install-deps.sh --packaging
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

work=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-pkg.XXXXXX")
cleanup() {
	if [ "${KEEP:-0}" = 1 ]; then
		echo "package-test: left in $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
t0=$SECONDS
phase() { echo "=== package-test: $* ($((SECONDS - t0)) s)"; }

# ---- 1. build, from a copy of the tree: the .debs land beside the copy, and
# nothing is written into the source tree. The build runs the test suite
# (debian/rules says why), in a TMPDIR of its own; NOCHECK=1 skips it.
phase "dpkg-buildpackage"
mkdir -p "$work/build/auditlog"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# tracked and untracked files, not what .gitignore excludes (build trees)
	git -C "$src" ls-files -z --cached --others --exclude-standard |
		(cd "$src" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) |
		tar -xf - -C "$work/build/auditlog"
else
	tar -C "$src" --exclude='./build*' --exclude='./obj-*' -cf - . | tar -xf - -C "$work/build/auditlog"
fi
opts="parallel=2" profiles=()
if [ "${NOCHECK:-0}" = 1 ]; then
	opts="$opts nocheck" profiles=(-Pnocheck)
fi
mkdir "$work/tmp"
if ! (cd "$work/build/auditlog" && TMPDIR=$work/tmp DEB_BUILD_OPTIONS=$opts \
	dpkg-buildpackage -us -uc -b "${profiles[@]}") >"$work/build.log" 2>&1; then
	grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|FAILED|\*\*\*' "$work/build.log" >&2 || true
	# ctest runs --verbose here: a failed test's own lines are "N: ..."
	# among the others'; the last 80 of each, or CI keeps no word of why
	for n in $(sed -n 's/^[[:space:]]*\([0-9][0-9]*\) - [^ ]* (.*)$/\1/p' \
		"$work/build.log" | sort -u); do
		echo "---- the output of test $n" >&2
		grep "^$n: " "$work/build.log" | tail -80 >&2
	done
	tail -40 "$work/build.log" >&2
	echo "package-test: dpkg-buildpackage failed (log above)" >&2
	exit 1
fi
changes=$(ls "$work"/build/*.changes)
debs=()
for p in libauditlog0 libauditlog-dev auditlog-tools softtoken; do
	debs+=("$(ls "$work"/build/${p}_*.deb)")
done
grep -E 'tests passed|tests failed' "$work/build.log" || true
# Root, the clients installed: as in .ci/run's other builds, no test may skip
# here (a FUSE or a client test that skipped would pass unseen).
if grep -E '\*\*\*Skipped|Not Run|tests did not run' "$work/build.log" >&2; then
	echo "package-test: a test was skipped or did not run in the package build" >&2
	exit 1
fi
ls -l "${debs[@]}" | awk '{print "  " $5 "  " $NF}'

# ---- 2. lintian, at its default level: an error or a warning fails
phase "lintian"
rc=0
lintian --fail-on error,warning --info "$changes" >"$work/lintian.log" 2>&1 || rc=$?
grep -v '^running with root privileges' "$work/lintian.log" || true
if [ $rc -ne 0 ]; then
	echo "package-test: lintian reports errors or warnings (above)" >&2
	exit 1
fi

# ---- 3. a clean Debian 12 root from the archive this machine's apt uses
# (its bookworm, bookworm-updates and bookworm-security entries), with the
# packages and what the demo needs from the archive
phase "mmdebstrap"
mapfile -t mirrors < <(python3 - <<'PYEOF'
import glob, re
out = []
def add(types, uris, suites, comps):
    if "deb" not in types:
        return
    for u in uris:
        for s in suites:
            if re.fullmatch(r"bookworm(-updates|-security)?", s):
                line = "deb %s %s %s" % (u, s, " ".join(comps or ["main"]))
                if line not in out:
                    out.append(line)
for f in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(f).read().splitlines()
    except OSError:
        continue
    for l in lines:
        l = re.sub(r"\[[^]]*\]", " ", l.split("#", 1)[0]).split()
        if len(l) >= 3:
            add([l[0]], [l[1]], [l[2]], l[3:])
for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(f).read()):
        fields = {}
        for l in stanza.splitlines():
            if l.startswith("#") or ":" not in l:
                continue
            k, v = l.split(":", 1)
            fields[k.strip().lower()] = v.split()
        if fields.get("enabled", ["yes"])[0] == "no":
            continue
        add(fields.get("types", []), fields.get("uris", []), fields.get("suites", []),
            fields.get("components", []))
print("\n".join(out))
PYEOF
)
if [ ${#mirrors[@]} -eq 0 ]; then
	echo "package-test: no bookworm entry in /etc/apt/sources.list* to build the root from" >&2
	exit 1
fi
printf '  %s\n' "${mirrors[@]}"
root=$work/root
# each .deb in an --include of its own; the hook makes them visible to dpkg inside
includes=(--include=opensc,p11-kit,p11-kit-modules,openssl,pkgconf)
for d in "${debs[@]}"; do includes+=("--include=$d"); done
if ! mmdebstrap --mode=root --variant=apt "${includes[@]}" \
	--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
	bookworm "$root" "${mirrors[@]}" >"$work/mmdebstrap.log" 2>&1; then
	tail -40 "$work/mmdebstrap.log" >&2
	echo "package-test: mmdebstrap failed (log above)" >&2
	exit 1
fi

# ---- 4. the demo, inside the root, from the installed files only
phase "the demo in the clean root"
version=$(dpkg-deb -f "$(ls "$work"/build/softtoken_*.deb)" Version)
cat >"$root/tmp/package-demo.sh" <<'DEMOEOF'
#!/bin/sh
# Runs inside the clean root, as root; $1 is the packages' version.
set -eu
version=$1 arch=$2
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }
proxy=/usr/lib/$arch/p11-kit-proxy.so

echo "-- what the packages installed"
for c in auditlog-verify auditlog-keygen softtoken-util; do
	out=$($c --version)
	[ "$out" = "$c (auditlog) $version" ] || fail "$c --version says '$out', the package is $version"
	echo "$out"
done
for m in man1/auditlog-verify.1 man1/auditlog-keygen.1 man1/auditlog-sealer.1 man1/auditlog-witness.1 man1/softtoken-util.1 man5/softtoken.conf.5 man3/libauditlog.3; do
	[ -f /usr/share/man/$m.gz ] || fail "no manual page $m"
done
[ -f /usr/lib/$arch/pkcs11/libsofttoken.so ] || fail "no /usr/lib/$arch/pkcs11/libsofttoken.so"
getent group softtoken >/dev/null || fail "no softtoken group"
for d in /var/lib/softtoken /var/log/softtoken; do
	s=$(stat -c '%U:%G %a' $d)
	[ "$s" = "root:softtoken 2770" ] || fail "$d is $s, not root:softtoken 2770"
done
# the sealer's user, its 0700 state directory and its unit (docs/sealer.md "Running it")
getent passwd auditlog-sealer >/dev/null || fail "no auditlog-sealer user"
s=$(stat -c '%U:%G %a' /var/lib/auditlog-sealer)
[ "$s" = "auditlog-sealer:auditlog-sealer 700" ] || fail "/var/lib/auditlog-sealer is $s"
[ -f /lib/systemd/system/auditlog-sealer.service ] || fail "no auditlog-sealer.service"
dpkg-query -W -f='${Conffiles}\n' softtoken | grep -q '/etc/softtoken/softtoken.conf' ||
	fail "/etc/softtoken/softtoken.conf is not a conffile"
# the development package: the .pc file finds the multiarch prefix
[ "$(pkg-config --modversion auditlog)" = "$version" ] || fail "pkg-config auditlog: not $version"
libdir=$(readlink -f "$(pkg-config --variable=libdir auditlog)")
[ "$libdir" = "/usr/lib/$arch" ] || fail "pkg-config: libdir $libdir, not /usr/lib/$arch"
[ -e "$libdir/libauditlog.so" ] && [ -e "$libdir/libauditlog.a" ] || fail "no libauditlog.so/.a in $libdir"

echo "-- p11-kit: opt-in, then registered by the documented line"
if p11-kit list-modules 2>/dev/null | grep -q '^softtoken: '; then
	fail "the module is registered before the admin asked"
fi
install -D -m 0644 /usr/share/doc/softtoken/examples/softtoken.module /etc/pkcs11/modules/softtoken.module

echo "-- a member of the softtoken group makes and uses a token, through p11-kit's proxy"
# (from here on only demo loads the module: the token's files and chains
# belong to the user whose process made them, softtoken.conf(5))
adduser --quiet --disabled-password --gecos '' demo
adduser --quiet demo softtoken
runuser -u demo -- p11-kit list-modules 2>/dev/null | grep '^softtoken: ' ||
	fail "p11-kit does not list the module"
runuser -u demo -- sh -eu -c '
	proxy=$1
	cd "$HOME"
	umask 077
	printf "demo-so-pin\n" >so.pin
	printf "demo-user-pin\n" >user.pin
	softtoken-util init --slot 0 --label demo --so-pin-file so.pin --pin-file user.pin
	softtoken-util show
	p11() { pkcs11-tool --module "$proxy" --token-label demo "$@"; }
	p11 --list-token-slots | grep -A3 "token label *: demo" | head -4
	p11 --login --pin demo-user-pin --keypairgen --key-type EC:prime256v1 --label signer --id 01 >/dev/null
	head -c 10000 /dev/urandom >message
	p11 --login --pin demo-user-pin --sign -m ECDSA-SHA256 --id 01 --signature-format openssl 		-i message -o ec.sig 2>/dev/null
	p11 --read-object --type pubkey --id 01 -o ec.pub.der >/dev/null 2>&1
	openssl pkey -pubin -inform DER -in ec.pub.der -out ec.pub.pem
	printf "openssl checks the signature the token made: "
	openssl dgst -sha256 -verify ec.pub.pem -signature ec.sig message
	p11 --login --pin demo-user-pin --keygen --key-type AES:32 --label data-key --id 03 >/dev/null
	iv=000102030405060708090a0b0c0d0e0f
	p11 --login --pin demo-user-pin --encrypt -m AES-CBC-PAD --id 03 --iv $iv -i message -o message.enc 2>/dev/null
	p11 --login --pin demo-user-pin --decrypt -m AES-CBC-PAD --id 03 --iv $iv -i message.enc -o message.dec 2>/dev/null
	cmp message message.dec && echo "AES-CBC-PAD: the token decrypts what it encrypted"
	if p11 --login --pin wrong-pin -O >/dev/null 2>&1; then
		echo "a wrong PIN was accepted" >&2
		exit 1
	fi
	echo "a wrong PIN is refused (and recorded)"
' sh "$proxy" || fail "the demo as user demo"

echo "-- the installed auditlog-keygen makes a host's v2 keys (docs/keys.md)"
# (dh_compress gzips documents over 4 KiB)
[ -f /usr/share/doc/auditlog-tools/keys.md ] || [ -f /usr/share/doc/auditlog-tools/keys.md.gz ] ||
	fail "no /usr/share/doc/auditlog-tools/keys.md"
runuser -u demo -- sh -eu -c '
	cd "$HOME"
	mkdir -m 0700 keys
	auditlog-keygen --host demo --delta 1 --dir keys --verify-key - >verify-key
	[ "$(stat -c "%a %n" keys/* | tr "\n" " ")" = "644 keys/pubkey 600 keys/sealing-state 600 keys/signing-key " ]
	head -n 1 verify-key | grep -qx "auditlog-verification-key 2"
	if auditlog-keygen --host demo --dir keys --verify-key verify-key.2 2>/dev/null; then exit 1; fi
	[ ! -e verify-key.2 ]
' || fail "auditlog-keygen as user demo"

echo "-- the trail, verified by the installed auditlog-verify"
ls -l /var/log/softtoken
out=$(auditlog-verify /var/log/softtoken) || { echo "$out"; fail "auditlog-verify: exit $?"; }
echo "$out"
echo "$out" | grep -q '^intact: ' || fail "the trail is not intact"
for a in C_InitToken C_InitPIN C_Login C_GenerateKeyPair C_GenerateKey C_Sign C_Encrypt C_Decrypt; do
	# C_Sign, or C_SignFinal when the client signs in parts
	grep -qh "\"action\":\"$a" /var/log/softtoken/softtoken-*.log || fail "no $a record in the trail"
done
grep -qh '"action":"C_Login","outcome":"failure"' /var/log/softtoken/softtoken-*.log ||
	fail "the wrong PIN left no failed C_Login record"
echo "records by action:"
cat /var/log/softtoken/softtoken-*.log | grep -o '"action":"[A-Za-z_]*"' | cut -d'"' -f4 | sort | uniq -c | sort -rn

echo "-- purge keeps the tokens and the trail (docs/packaging.md)"
apt-get purge -y -qq softtoken >/dev/null 2>&1 || fail "apt-get purge softtoken"
[ ! -e /etc/softtoken/softtoken.conf ] || fail "purge left the conffile"
[ -f /var/lib/softtoken/slot0/token.json ] || fail "purge deleted the token"
ls /var/log/softtoken/softtoken-0.log >/dev/null || fail "purge deleted the audit trail"
auditlog-verify -q /var/log/softtoken || fail "the trail after purge does not verify"
echo "purged: the token and the trail are still there, and still verify"
DEMOEOF
# /proc, /sys and /dev for the chroot, in a mount namespace of its own:
# they go away with it
unshare --mount --propagation private sh -c '
	set -e
	mount -t proc proc "$1/proc"
	mount --rbind /sys "$1/sys"
	mount --rbind /dev "$1/dev"
	exec chroot "$1" /bin/sh /tmp/package-demo.sh "$2" "$3"
' sh "$root" "$version" "$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
phase "passed"

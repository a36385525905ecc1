#!/bin/sh
# Install the Debian 12 packages auditlog needs to build and test, when they
# are missing. Needs root (or sudo) only when something must be installed.
set -eu

PKGS="build-essential cmake ninja-build pkg-config python3
libssl-dev libjansson-dev liburing-dev libcmocka-dev libp11-kit-dev
clang libclang-rt-14-dev softhsm2 opensc python3-pykcs11 python3-cryptography openssl
gnutls-bin libnss3-tools libengine-pkcs11-openssl p11-kit p11-kit-modules passwd
rsyslog rsyslog-relp bindfs"

# --packaging: also what scripts/package-test.sh needs (build, lint, clean root)
if [ "${1:-}" = --packaging ]; then
	PKGS="$PKGS debhelper dpkg-dev fakeroot lintian mmdebstrap pandoc"
fi
missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root to install:$missing" >&2; exit 1; }
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null

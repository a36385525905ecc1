#!/bin/sh
# debian/auditlog-tools.auditlog-sealer.service: systemd-analyze verify finds
# nothing wrong with it (run on a copy whose ExecStart is the built binary),
# its offline security exposure stays below 1.0, every option its ExecStart
# gives is one auditlog-sealer --help lists, the hardening the design asks
# for is there, and the test clock hook is not set.
# Args: UNIT auditlog-sealer. Exit 77 without systemd-analyze.
set -u
UNIT=$1
SEALER=$2
fail() { echo "sealer_unit.sh: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null ||
	{ echo "sealer_unit.sh: no systemd-analyze (package systemd): the unit is not checked"; exit 77; }
d=$(mktemp -d "${TMPDIR:-/var/tmp}/auditlog-unit.XXXXXX")
trap 'rm -rf "$d"' EXIT
u=$d/auditlog-sealer.service
sed "s|^ExecStart=/usr/bin/auditlog-sealer |ExecStart=$SEALER |" "$UNIT" >"$u"
grep -q "^ExecStart=$SEALER " "$u" || fail "no ExecStart=/usr/bin/auditlog-sealer line"
systemd-analyze verify --man=no "$u" >"$d/verify" 2>&1 || { cat "$d/verify" >&2; fail "verify failed"; }
[ -s "$d/verify" ] && { cat "$d/verify" >&2; fail "verify said something"; }
if systemd-analyze security --offline=yes "$u" >"$d/sec" 2>&1; then
	level=$(sed -n 's/.*Overall exposure level for auditlog-sealer.service: \([0-9.]*\).*/\1/p' "$d/sec")
	[ -n "$level" ] || { cat "$d/sec" >&2; fail "no exposure level"; }
	awk -v l="$level" 'BEGIN { exit !(l < 1.0) }' || fail "exposure level $level, want < 1.0"
	echo "sealer_unit.sh: systemd-analyze security: exposure $level"
else
	echo "sealer_unit.sh: this systemd-analyze has no --offline security check: not run"
fi
# the options ExecStart passes are the sealer's
for o in $(sed -n 's/^ExecStart=//p' "$u" | grep -o -- '--[a-z-]*'); do
	"$SEALER" --help | grep -q -- "^  $o " || fail "ExecStart option $o is not in auditlog-sealer --help"
done
for want in 'User=auditlog-sealer' 'StateDirectory=auditlog-sealer' 'StateDirectoryMode=0700' \
	'RuntimeDirectory=auditlog-sealer' 'NoNewPrivileges=yes' 'ProtectSystem=strict' 'PrivateTmp=yes' \
	'MemoryDenyWriteExecute=yes' 'LockPersonality=yes' 'RestrictAddressFamilies=AF_UNIX' 'LimitCORE=0' \
	'ConditionPathExists=/var/lib/auditlog-sealer/sealing-state' \
	'ConditionPathExists=/var/lib/auditlog-sealer/signing-key'; do
	grep -qx "$want" "$u" || fail "missing: $want"
done
grep -q 'AUDITLOG_SEALER_TEST_CLOCK=' "$u" && fail "the unit sets the test clock hook"
grep -q -- '--socket /run/auditlog-sealer/sock' "$u" || fail "the socket is not /run/auditlog-sealer/sock"
echo "sealer_unit.sh: ok"

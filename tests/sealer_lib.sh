# SPDX-License-Identifier: MIT
# Sourced by the shell tests that run a real auditlog-sealer (sealer.sh,
# sealer_registry.sh, sealer_queue.sh). Uses $SEALER, $d and the test's
# fail(); sets spid.
#
# start_sealer_with KEYDIR ARGS...: the sealer with KEYDIR's sealing-state and
# signing-key on the socket $d/sock, in the background (its standard error
# appended to $d/sealer.err); returns once the socket is there.
start_sealer_with() {
	kd=$1
	shift
	rm -f "$d/sock"
	"$SEALER" --state "$kd/sealing-state" --signing-key "$kd/signing-key" --socket "$d/sock" \
		"$@" 2>>"$d/sealer.err" &
	spid=$!
	i=0
	while [ ! -S "$d/sock" ]; do
		i=$((i + 1))
		[ $i -gt 200 ] && fail "no socket after 10 s"
		kill -0 "$spid" 2>/dev/null || fail "the sealer exited"
		sleep 0.05
	done
}

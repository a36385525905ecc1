# Sourced by the client tests (bash), with MOD set and fail() defined.
# A sanitizer build of the module cannot be dlopen()ed by an uninstrumented
# client unless the sanitizer runtime comes first: preload it for the clients
# (softtoken-util and auditlog-verify are built with it already).
SAN=()
san_rt() { # libasan | libtsan
	local p
	p=$(ldd "$MOD" 2>/dev/null | awk -v n="$1" 'index($1, n) == 1 && $3 ~ /^\// { print $3; exit }')
	if [ -z "$p" ] && nm -D "$MOD" 2>/dev/null | grep -q " __${1#lib}_init\$"; then
		p=$(gcc -print-file-name="$1.so" 2>/dev/null)
		[ -e "$p" ] || p=""
	fi
	echo "$p"
}
if rt=$(san_rt libasan) && [ -n "$rt" ]; then
	SAN=(env LD_PRELOAD="$rt" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
elif nm -D "$MOD" 2>/dev/null | grep -q ' __asan_init$'; then
	fail "the module needs the ASan runtime and none was found"
elif rt=$(san_rt libtsan) && [ -n "$rt" ]; then
	SAN=(env LD_PRELOAD="$rt")
fi


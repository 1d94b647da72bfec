#!/bin/sh
# Checks an install the way a packager makes one and a user consumes it: build
# (make), install under a prefix of its own (make install PREFIX=...), then
# build and run a consumer with nothing but pkg-config and PKG_CONFIG_PATH.
# Also the manual page, a staged install (DESTDIR), the shared library's
# exported names, and make uninstall.
# Usage: sh tools/check-install.sh   (from anywhere; leaves nothing behind)
set -eu
cd "$(dirname "$0")/.."

root=$(mktemp -d "${TMPDIR:-/tmp}/lockbridge-install.XXXXXX")
trap 'rm -rf "$root"' EXIT
prefix=$root/opt/lb

fail() {
    echo "check-install: $*" >&2
    exit 1
}

# ---- 1. build, then install elsewhere, as two steps ------------------------------
make -s >/dev/null
make -s install PREFIX="$prefix" >/dev/null

PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export PKG_CONFIG_PATH
pc() { pkg-config "$@" lockbridge; }
[ "$(pc --variable=prefix)" = "$prefix" ] || fail "lockbridge.pc names prefix $(pc --variable=prefix), not $prefix"
[ "$(pc --variable=libdir)" = "$prefix/lib" ] || fail "lockbridge.pc names libdir $(pc --variable=libdir)"
[ "$(pc --modversion)" = "$(sed -n 's/^VERSION_MAJOR := //p' Makefile).$(sed -n 's/^VERSION_MINOR := //p' Makefile).$(sed -n 's/^VERSION_PATCH := //p' Makefile)" ] ||
    fail "lockbridge.pc version $(pc --modversion) is not the Makefile's"
# The API takes hiredis contexts: consumers call hiredis, so it is public.
pc --print-requires | grep -q '^hiredis' || fail "lockbridge.pc does not require hiredis publicly"

# ---- 2. a consumer that uses lockbridge and hiredis, built through pkg-config ----
cat >"$root/consumer.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include <lockbridge/lockbridge.h>
int main(void) {
    lb_codec c;
    if (lb_codec_parse(&c, "json") != LB_OK) return 1;
    if (strcmp(lb_version(), LB_VERSION_STRING) != 0) return 2;
    redisReader *r = redisReaderCreate(); /* a hiredis call of the consumer's own */
    if (!r) return 3;
    redisReaderFree(r);
    printf("lockbridge %s: %s\n", lb_version(), lb_strerror(LB_EBUSY));
    return 0;
}
C
# shellcheck disable=SC2046 # pkg-config's output is split into arguments on purpose
cc -o "$root/consumer" "$root/consumer.c" $(pc --cflags --libs) || fail "consumer did not build"
libdir=$(pc --variable=libdir)
ldd "$root/consumer" | grep -q "$libdir/liblockbridge.so" ||
    LD_LIBRARY_PATH=$libdir ldd "$root/consumer" | grep -q "$libdir/liblockbridge.so" ||
    fail "consumer is not linked to $libdir/liblockbridge.so"
LD_LIBRARY_PATH=$libdir "$root/consumer" || fail "consumer failed (LD_LIBRARY_PATH)"
# The README's other way: the library's directory recorded in the program.
# shellcheck disable=SC2046
cc -o "$root/consumer-rpath" "$root/consumer.c" $(pc --cflags --libs) -Wl,-rpath,"$libdir"
"$root/consumer-rpath" >/dev/null || fail "consumer failed (rpath)"

# ---- 3. the manual page -------------------------------------------------------------
page=$prefix/share/man/man1/lockbridge.1
[ -f "$page" ] || fail "make install put no manual page at $page"
MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q '^NAME' || fail "man -l $page shows nothing"
MANWIDTH=80 man -M "$prefix/share/man" lockbridge 2>/dev/null | grep -q 'lockbridge hold' ||
    fail "man -M $prefix/share/man lockbridge does not find the page"

# ---- 4. a staged install names the final prefix, not the stage ------------------
stage=$root/stage
make -s install DESTDIR="$stage" PREFIX=/usr >/dev/null
[ -f "$stage/usr/lib/liblockbridge.so.0" ] || fail "DESTDIR install put no library in $stage/usr/lib"
grep -qx 'prefix=/usr' "$stage/usr/lib/pkgconfig/lockbridge.pc" ||
    fail "a DESTDIR install's lockbridge.pc does not name prefix=/usr"
if grep -q "$stage" "$stage/usr/lib/pkgconfig/lockbridge.pc"; then
    fail "a DESTDIR install's lockbridge.pc names the staging directory"
fi

# ---- 5. the shared library --------------------------------------------------------
soname=$(objdump -p "$libdir/liblockbridge.so" | awk '/SONAME/ {print $2}')
[ "$soname" = liblockbridge.so.0 ] || fail "unexpected SONAME: $soname"
if nm -D "$libdir/liblockbridge.so" | grep -q ' T lb__'; then
    fail "internal lb__ symbols are exported"
fi

# ---- 6. uninstall leaves nothing of ours -------------------------------------------
make -s uninstall PREFIX="$prefix" >/dev/null
left=$(find "$prefix" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left: $left"

echo "install check: ok (PREFIX=$prefix: lockbridge.pc names it; SONAME $soname;" \
    "pkg-config consumer built and ran; man page; DESTDIR staging; uninstall)"

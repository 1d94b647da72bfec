#!/bin/sh
# Checks that a build uses one hiredis and no other: every object that read a
# hiredis header read it from INCLUDEDIR, and the library, the tool and every
# test binary need that hiredis's SONAME and load it from LIBDIR (with no
# LD_LIBRARY_PATH: through the rpath the build recorded). `make test-hiredis`
# runs it before the suites, so that a pass is a pass of that hiredis.
# Usage: sh tools/check-hiredis.sh BUILD LIBDIR INCLUDEDIR
set -eu
[ $# -eq 3 ] || { echo "usage: check-hiredis.sh BUILD LIBDIR INCLUDEDIR" >&2; exit 2; }
build=$1 libdir=$2 includedir=$3
fail() {
    echo "check-hiredis: $*" >&2
    exit 1
}
[ -f "$libdir/libhiredis.so" ] || fail "no libhiredis.so in $libdir"
soname=$(objdump -p "$libdir/libhiredis.so" | awk '/SONAME/ { print $2 }')
[ -n "$soname" ] || fail "$libdir/libhiredis.so has no SONAME"
want=$(readlink -f "$libdir/$soname")

# Headers: the dependency files the compiler wrote beside each object.
deps=$(find "$build/obj" -name '*.d' | wc -l)
[ "$deps" -gt 0 ] || fail "no dependency files under $build/obj: build first"
# Each .d file is read one word a line, its line continuations dropped.
list=$(mktemp "${TMPDIR:-/tmp}/check-hiredis.XXXXXX")
trap 'rm -f "$list"' EXIT
find "$build/obj" -name '*.d' >"$list"
objs=0
while read -r d; do
    # shellcheck disable=SC1003 # a backslash, not an escaped quote
    hdrs=$(tr -d '\\' <"$d" | tr ' ' '\n' | grep '/hiredis/.*\.h$' || true)
    [ -n "$hdrs" ] || continue
    objs=$((objs + 1))
    for h in $hdrs; do
        case $h in
        "$includedir"/*) ;;
        *) fail "${d%.d}.o was compiled against $h, not a header under $includedir" ;;
        esac
    done
done <"$list"
[ "$objs" -gt 0 ] || fail "no object under $build/obj read a hiredis header"

# Binaries: what each needs, and where the loader finds it.
bins=0
for b in "$build/lockbridge" "$build"/liblockbridge.so.*.*.* "$build"/tests/*/*; do
    if [ ! -f "$b" ] || [ ! -x "$b" ]; then continue; fi
    case $(head -c 4 "$b" | od -An -c | tr -d ' ') in 177ELF) ;; *) continue ;; esac
    needed=$(objdump -p "$b" | awk '/NEEDED/ && /libhiredis/ { print $2 }')
    [ "$needed" = "$soname" ] || fail "$b needs '${needed:-no hiredis}', not $soname"
    got=$(env -u LD_LIBRARY_PATH ldd "$b" | awk -v s="$soname" '$1 == s { print $3 }')
    if [ -z "$got" ] || [ "$(readlink -f "$got")" != "$want" ]; then
        fail "$b loads $soname from '${got:-nowhere}', not $libdir"
    fi
    bins=$((bins + 1))
done
[ "$bins" -gt 2 ] || fail "found only $bins binaries in $build: build first"
echo "check-hiredis: $objs objects compiled against $includedir/hiredis;" \
    "$bins binaries (library, tool, tests) need $soname and load $want"

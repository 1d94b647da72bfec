#!/bin/sh
# Checks an install the way a packager makes one and a user consumes it: build
# (make), install under a prefix of its own (make install PREFIX=...), then
# build and run a consumer with nothing but pkg-config and PKG_CONFIG_PATH.
# Then every program of examples/ and the README's example, each built with the
# build line it documents, run against a temporary redis-server. Also the
# manual page, the race catalogue, a staged install (DESTDIR), the exported
# names, make uninstall.
# With HIREDIS_PREFIX (the Makefile's: a hiredis installed under a prefix of its
# own, make test-hiredis), every build here takes that hiredis, and the programs
# find it through the loader's path, as on a system that installed it there.
# Usage: sh tools/check-install.sh   (from anywhere; leaves nothing behind)
set -eu
cd "$(dirname "$0")/.."

root=$(mktemp -d "${TMPDIR:-/tmp}/lockbridge-install.XXXXXX")
REDIS_PID=""
HOLDER_PID=""
cleanup() {
    for pid in $HOLDER_PID $REDIS_PID; do kill "$pid" 2>/dev/null || true; done
    for pid in $HOLDER_PID $REDIS_PID; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$root"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
prefix=$root/opt/lb

fail() {
    echo "check-install: $*" >&2
    exit 1
}

hiredis_pc="" hiredis_lib=""
if [ -n "${HIREDIS_PREFIX:-}" ]; then
    for f in "$HIREDIS_PREFIX"/lib*/pkgconfig/hiredis.pc "$HIREDIS_PREFIX"/lib/*/pkgconfig/hiredis.pc; do
        if [ -f "$f" ]; then hiredis_pc=$(dirname "$f") && break; fi
    done
    [ -n "$hiredis_pc" ] || fail "HIREDIS_PREFIX=$HIREDIS_PREFIX holds no lib/pkgconfig/hiredis.pc"
    hiredis_lib=$(PKG_CONFIG_PATH=$hiredis_pc pkg-config --variable=libdir hiredis)
    export HIREDIS_PREFIX
    LD_LIBRARY_PATH=$hiredis_lib
    export LD_LIBRARY_PATH
fi

# ---- 1. build, then install elsewhere, as two steps ------------------------------
# A packager's `make` warns without failing (a newer compiler's new warning must
# not break a distribution's build); the tests' builds fail on any warning.
make -n BUILD="$root/dry" lib | grep -q -- '-Wall' || fail "make -n lib shows no compile line"
if make -n BUILD="$root/dry" lib | grep -q -- '-Werror'; then
    fail "the default build (make) compiles with -Werror"
fi
make -n BUILD="$root/dry" test-run | grep -q -- '-Werror' || fail "make test does not compile with -Werror"
make -s >/dev/null
make -s install PREFIX="$prefix" >/dev/null

PKG_CONFIG_PATH=$prefix/lib/pkgconfig${hiredis_pc:+:$hiredis_pc}
export PKG_CONFIG_PATH
pc() { pkg-config "$@" lockbridge; }
[ "$(pc --variable=prefix)" = "$prefix" ] || fail "lockbridge.pc names prefix $(pc --variable=prefix), not $prefix"
[ "$(pc --variable=libdir)" = "$prefix/lib" ] || fail "lockbridge.pc names libdir $(pc --variable=libdir)"
[ "$(pc --modversion)" = "$(sed -n 's/^VERSION_MAJOR := //p' Makefile).$(sed -n 's/^VERSION_MINOR := //p' Makefile).$(sed -n 's/^VERSION_PATCH := //p' Makefile)" ] ||
    fail "lockbridge.pc version $(pc --modversion) is not the Makefile's"
# The API takes hiredis contexts: consumers call hiredis, so it is public.
pc --print-requires | grep -q '^hiredis' || fail "lockbridge.pc does not require hiredis publicly"
# cJSON is the library's own business: its include path stays out of consumers'
# flags, even with --static.
case " $(pc --cflags) $(pc --static --cflags) " in
*cjson*) fail "lockbridge.pc puts cJSON's include path into consumers' flags: $(pc --static --cflags)" ;;
esac

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
ldpath=$libdir${hiredis_lib:+:$hiredis_lib}
ldd "$root/consumer" | grep -q "$libdir/liblockbridge.so" ||
    LD_LIBRARY_PATH=$ldpath ldd "$root/consumer" | grep -q "$libdir/liblockbridge.so" ||
    fail "consumer is not linked to $libdir/liblockbridge.so"
# The consumer calls hiredis itself: it and the library load one hiredis.
n=$(LD_LIBRARY_PATH=$ldpath ldd "$root/consumer" | grep -c 'libhiredis\.so')
[ "$n" = 1 ] || fail "consumer loads $n hiredis libraries: $(LD_LIBRARY_PATH=$ldpath ldd "$root/consumer" | grep libhiredis)"
LD_LIBRARY_PATH=$ldpath "$root/consumer" || fail "consumer failed (LD_LIBRARY_PATH)"
# The README's other way: the library's directory recorded in the program.
# shellcheck disable=SC2046
cc -o "$root/consumer-rpath" "$root/consumer.c" $(pc --cflags --libs) -Wl,-rpath,"$libdir"
"$root/consumer-rpath" >/dev/null || fail "consumer failed (rpath)"
# The static archive with the libraries `--static` lists, and nothing else: a
# folder that holds liblockbridge.a alone makes the linker take it. (A fully
# static program, cc -static, also needs libcjson.a, which Debian does not ship.)
mkdir "$root/static"
cp "$libdir/liblockbridge.a" "$root/static/"
# shellcheck disable=SC2046
cc -o "$root/consumer-static" "$root/consumer.c" $(pc --cflags) -L"$root/static" \
    $(pc --static --libs) || fail "consumer did not link the archive with pkg-config --static"
if ldd "$root/consumer-static" | grep -q liblockbridge; then
    fail "the --static consumer is linked to the shared library"
fi
"$root/consumer-static" >/dev/null || fail "consumer failed (static archive)"

# ---- 3. examples/ and the README's example, built as each says ---------------------
# Each program's build line is the " * Build: " line at its top; it is run as
# written, in a copy of examples/, with PKG_CONFIG_PATH pointing at the install.
mkdir "$root/examples"
cp examples/*.c "$root/examples/"
progs=""
for src in examples/*.c; do
    name=$(basename "$src" .c)
    line=$(sed -n 's/^ \* Build: //p' "$src")
    [ -n "$line" ] || fail "$src has no ' * Build: ' line at its top"
    (cd "$root/examples" && sh -c "$line") || fail "$src did not build with: $line"
    [ -x "$root/examples/$name" ] || fail "$src's build line made no ./$name"
    progs="$progs $name"
done
# The README's example is examples/legacy_lock.c, and builds as the README says.
awk '/^```c$/ { on = 1; next } /^```$/ { on = 0 } on' README.md >"$root/examples/example.c"
cmp -s "$root/examples/example.c" examples/legacy_lock.c ||
    fail "the README's example differs from examples/legacy_lock.c"
readme_cc=$(grep -o '`cc example\.c [^`]*`' README.md | head -n 1 | tr -d '`')
[ -n "$readme_cc" ] || fail "the README gives no 'cc example.c ...' line"
(cd "$root/examples" && sh -c "$readme_cc") || fail "the README's example did not build with: $readme_cc"

# A temporary redis-server on a free loopback port for the programs to run against.
start_redis() {
    tries=0
    while [ $tries -lt 20 ]; do
        tries=$((tries + 1))
        PORT=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000))
        redis-cli -p "$PORT" ping >/dev/null 2>&1 && continue # taken
        redis-server --port "$PORT" --bind 127.0.0.1 --dir "$root" --save '' \
            --appendonly no --logfile "$root/redis.log" &
        REDIS_PID=$!
        waited=0
        while [ $waited -lt 50 ]; do
            redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && return 0
            kill -0 "$REDIS_PID" 2>/dev/null || break # it exited: the port was taken
            sleep 0.1
            waited=$((waited + 1))
        done
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
        REDIS_PID=""
    done
    fail "could not start redis-server on a free port"
}
start_redis
# The programs find the library under the prefix through the loader's path.
LD_LIBRARY_PATH=$ldpath
export LD_LIBRARY_PATH
ex=$root/examples
run() { # NAME ARGS...: runs an example, its output indented
    name=$1
    shift
    echo "example $name:"
    "$ex/$name" "$@" >"$root/out" 2>&1 || { sed 's/^/    /' "$root/out"; fail "$name $* failed"; }
    sed 's/^/    /' "$root/out"
}
run a.out "$PORT"
for name in $progs; do
    case $name in
    wait_for_release)
        # A holder, then a waiter once the holder has the lock.
        "$ex/$name" hold "$PORT" 1000 >"$root/holder" 2>&1 &
        HOLDER_PID=$!
        n=0
        until [ "$(redis-cli -p "$PORT" exists jobs:42)" = 1 ]; do
            n=$((n + 1))
            [ $n -lt 100 ] || fail "the holder of $name never took jobs:42"
            kill -0 "$HOLDER_PID" 2>/dev/null || { cat "$root/holder" >&2; fail "$name hold exited early"; }
            sleep 0.1
        done
        run "$name" wait "$PORT"
        wait "$HOLDER_PID" || { cat "$root/holder" >&2; fail "$name hold failed"; }
        HOLDER_PID=""
        sed 's/^/    /' "$root/holder"
        ;;
    cluster_lock)
        # It needs a Cluster, which test_examples starts; here it is only built.
        echo "example $name: built (run against a Cluster by tests/integration/test_examples)"
        ;;
    *) run "$name" "$PORT" ;;
    esac
done
if [ -n "$hiredis_lib" ]; then LD_LIBRARY_PATH=$hiredis_lib; else unset LD_LIBRARY_PATH; fi

# ---- 4. the manual page -------------------------------------------------------------
page=$prefix/share/man/man1/lockbridge.1
[ -f "$page" ] || fail "make install put no manual page at $page"
MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q '^NAME' || fail "man -l $page shows nothing"
MANWIDTH=80 man -M "$prefix/share/man" lockbridge 2>/dev/null | grep -q 'lockbridge hold' ||
    fail "man -M $prefix/share/man lockbridge does not find the page"
# The race catalogue, for `lockbridge race --catalogue`.
for f in catalogue/*.race; do
    cmp -s "$f" "$prefix/share/lockbridge/$f" || fail "make install did not install $f"
done

# ---- 5. a staged install names the final prefix, not the stage ------------------
stage=$root/stage
make -s install DESTDIR="$stage" PREFIX=/usr >/dev/null
[ -f "$stage/usr/lib/liblockbridge.so.0" ] || fail "DESTDIR install put no library in $stage/usr/lib"
grep -qx 'prefix=/usr' "$stage/usr/lib/pkgconfig/lockbridge.pc" ||
    fail "a DESTDIR install's lockbridge.pc does not name prefix=/usr"
if grep -q "$stage" "$stage/usr/lib/pkgconfig/lockbridge.pc"; then
    fail "a DESTDIR install's lockbridge.pc names the staging directory"
fi

# ---- 6. the shared library --------------------------------------------------------
soname=$(objdump -p "$libdir/liblockbridge.so" | awk '/SONAME/ {print $2}')
[ "$soname" = liblockbridge.so.0 ] || fail "unexpected SONAME: $soname"
if nm -D "$libdir/liblockbridge.so" | grep -q ' T lb__'; then
    fail "internal lb__ symbols are exported"
fi

# ---- 7. uninstall leaves nothing of ours -------------------------------------------
make -s uninstall PREFIX="$prefix" >/dev/null
left=$(find "$prefix" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left: $left"

echo "install check: ok (PREFIX=$prefix: lockbridge.pc names it; SONAME $soname;" \
    "pkg-config consumer built and ran; examples:$progs and the README's built and ran;" \
    "man page; DESTDIR staging; uninstall)"

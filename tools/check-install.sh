#!/bin/sh
# Installs into a scratch DESTDIR and builds a small consumer with nothing but
# `pkg-config --cflags --libs lockbridge`, linked against the shared library.
set -eu
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
make -s install DESTDIR="$root" PREFIX=/usr/local >/dev/null
pc="$root/usr/local/lib/pkgconfig"
cat > "$root/consumer.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <lockbridge/lockbridge.h>
int main(void) {
    lb_codec c;
    if (lb_codec_parse(&c, "json") != LB_OK) return 1;
    if (strcmp(lb_version(), LB_VERSION_STRING) != 0) return 2;
    printf("lockbridge %s: %s\n", lb_version(), lb_strerror(LB_EBUSY));
    return 0;
}
C
# The .pc file names the real prefix; point pkg-config at the staged tree.
flags=$(PKG_CONFIG_PATH="$pc" pkg-config --define-prefix --cflags --libs lockbridge 2>/dev/null ||
        PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs lockbridge)
flags=$(echo "$flags" | sed "s|-I/usr/local/include|-I$root/usr/local/include|; s|-L/usr/local/lib|-L$root/usr/local/lib|")
cc -o "$root/consumer" "$root/consumer.c" $flags
LD_LIBRARY_PATH="$root/usr/local/lib" "$root/consumer"
soname=$(objdump -p "$root/usr/local/lib/liblockbridge.so" | awk '/SONAME/ {print $2}')
[ "$soname" = liblockbridge.so.0 ] || { echo "unexpected SONAME: $soname" >&2; exit 1; }
if nm -D "$root/usr/local/lib/liblockbridge.so" | grep -q ' T lb__'; then
    echo "internal lb__ symbols are exported" >&2; exit 1
fi
echo "install check: ok (SONAME $soname, pkg-config consumer built and ran)"

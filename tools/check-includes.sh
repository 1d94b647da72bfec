#!/bin/sh
# Every C file includes the C library headers it uses itself. hiredis 0.14's
# headers bring in <stdlib.h> (through alloc.h) and 1.x's do not, so each file
# is compiled here against a copy of the installed hiredis headers whose
# alloc.h includes only <stddef.h> and <stdint.h>, as 1.x's does: a call to
# atoi or free that relied on hiredis fails here, not on a user's hiredis.
# Usage: sh tools/check-includes.sh   (CC, default cc)
set -eu
cd "$(dirname "$0")/.."
CC=${CC:-cc}
# hiredis's own folder: its .pc file names it, or the folder above it.
src=$(pkg-config --variable=includedir hiredis 2>/dev/null || echo /usr/include)
[ -f "$src/hiredis.h" ] || src=$src/hiredis
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockbridge-includes.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/hiredis"
cp "$src"/*.h "$tmp/hiredis/"
if [ -d "$src/adapters" ]; then cp -r "$src/adapters" "$tmp/hiredis/"; fi
sed -e 's|#include <stdlib.h>.*|#include <stddef.h>\n#include <stdint.h>|' \
    "$src/alloc.h" >"$tmp/hiredis/alloc.h"
# 0.14's event-loop adapters call free() themselves, counting on that header
# (1.x's call hi_free): they keep <stdlib.h>, so a file that includes an
# adapter is not checked for it.
for a in "$tmp"/hiredis/adapters/*.h; do
    [ -f "$a" ] || continue
    { echo '#include <stdlib.h> /* 0.14 adapters call free() */'; cat "$a"; } >"$a.new"
    mv "$a.new" "$a"
done
cflags="-std=c11 -D_GNU_SOURCE -fsyntax-only -Werror=implicit-function-declaration
        -Werror=implicit-int -I$tmp -Iinclude -I. -Itests $(pkg-config --cflags libcjson 2>/dev/null || true)"
bad=0
for f in core/*.c legacy/*.c modern/*.c migrate/*.c tool/*/*.c examples/*.c \
         tests/*/*.c; do
    # shellcheck disable=SC2086
    if ! $CC $cflags -c "$f" -o /dev/null 2>"$tmp/err"; then
        echo "check-includes: $f:" >&2
        grep -E 'error' "$tmp/err" | head -n 5 >&2
        bad=$((bad + 1))
    fi
done
if [ "$bad" -gt 0 ]; then
    echo "check-includes: $bad file(s) rely on a header hiredis 1.x does not include" >&2
    exit 1
fi
echo "check-includes: every file includes what it uses"

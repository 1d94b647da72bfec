#!/bin/sh
# Keeps docs/api.md in step with the public headers: every function the headers
# declare has its entry ("- `name(...)`" or in a "/"-joined entry line), the page
# names no function the headers no longer declare, and there are at most
# API_MAX (130) of them: a guide against growth by habit, raised only with a
# reason written in docs/api.md.
# Usage: sh tools/check-api.sh
set -eu
cd "$(dirname "$0")/.."
API_MAX=${API_MAX:-130}
PAGE=docs/api.md
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockbridge-api.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
sh tools/api-functions.sh >"$tmp/declared"
# Entries are the list items of the page, "- `a(...)` / `b(...)`: ...", and
# their continuation lines when these start with a function.
grep -E '^(- |  )`lb_' "$PAGE" | grep -oE '`lb_[a-z0-9_]+\(' | tr -d '`(' | sort -u >"$tmp/documented"
bad=0
for f in $(comm -23 "$tmp/declared" "$tmp/documented"); do
    echo "check-api: $f is declared in include/lockbridge/ but has no entry in $PAGE" >&2
    bad=$((bad + 1))
done
for f in $(comm -13 "$tmp/declared" "$tmp/documented"); do
    echo "check-api: $PAGE has an entry for $f, which no header declares" >&2
    bad=$((bad + 1))
done
n=$(wc -l <"$tmp/declared")
if [ "$n" -gt "$API_MAX" ]; then
    echo "check-api: $n public functions, more than $API_MAX" >&2
    bad=$((bad + 1))
fi
[ "$bad" -eq 0 ] || exit 1
echo "api check: ok ($n public functions, each with its entry in $PAGE)"

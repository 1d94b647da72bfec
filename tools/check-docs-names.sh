#!/bin/sh
# The docs name only what exists: every lb_ name in README.md, docs/, examples/
# and the headers' comments is declared in include/lockbridge/ (a function,
# type, macro or enum), every one written as a call, name(...), is a public
# function, and every option docs/cli.md names is in the tool's help. An lb__
# name (internal) must exist in the library's source, and a list of two
# functions or more names no type. `lb_a_*_b` stands for
# the names it matches, `lb_a[_b]` for lb_a and lb_a_b, a name ending in `_`
# for the names it begins.
# Usage: sh tools/check-docs-names.sh [TOOL]   (default build/lockbridge)
set -eu
cd "$(dirname "$0")/.."
TOOL=${1:-build/lockbridge}
[ -x "$TOOL" ] || { echo "check-docs-names: $TOOL missing (make tool)" >&2; exit 1; }
# The event-loop adapters (include/lockbridge/adapters/) are header-only
# code the application compiles, not library functions: their names count as
# declared, and their functions as functions, here alone.
ADAPTERS="include/lockbridge/adapters/*.h"
DOCS="README.md docs/*.md docs/lockbridge.1 examples/*.c include/lockbridge/*.h $ADAPTERS"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockbridge-names.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bad=0
miss() {
    echo "check-docs-names: $*" >&2
    bad=$((bad + 1))
}
# where NAME: the first lines that name it, as file:line.
where() {
    # shellcheck disable=SC2086
    grep -nF -- "$1" $DOCS | head -n 3 | cut -d: -f1,2 | tr '\n' ' '
}

# What exists: the headers' identifiers (comments removed), the public
# functions, and the library's internal names.
sed -e ':a' -e 's#/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/##g' -e '/\/\*/{N;ba' -e '}' \
    include/lockbridge/*.h $ADAPTERS | grep -oE '\blb_[a-z0-9_]*[a-z0-9]' | sort -u >"$tmp/declared"
# shellcheck disable=SC2086
{ sh tools/api-functions.sh; cat $ADAPTERS | grep -oE '\blb_[a-z0-9_]+\(' | tr -d '('; } |
    sort -u >"$tmp/functions"
cat core/*.[ch] legacy/*.[ch] modern/*.[ch] migrate/*.[ch] |
    grep -oE '\blb__[a-z0-9_]*[a-z0-9]' | sort -u >"$tmp/internal"
cat "$tmp/declared" "$tmp/internal" | sort -u >"$tmp/known"

# What the docs name, in each of its spellings.
# shellcheck disable=SC2086
cat $DOCS >"$tmp/text"
grep -oE '\blb_[a-z0-9_]*\*[a-z0-9_*]*' "$tmp/text" | sort -u >"$tmp/patterns" || true
grep -oE '\blb_[a-z0-9_]+\[_[a-z0-9_]+\]' "$tmp/text" | sort -u >"$tmp/optional" || true
sed -E 's/\blb_[a-z0-9_]*\*[a-z0-9_*]*//g; s/\[(_[a-z0-9_]+)\]/ \1/g' "$tmp/text" |
    grep -oE '\blb_[a-z0-9_]+' | sort -u >"$tmp/named"

for name in $(cat "$tmp/named"); do
    case $name in
    *_) grep -q "^$name" "$tmp/known" || miss "$name* matches nothing declared ($(where "$name"))" ;;
    *) grep -qx "$name" "$tmp/known" || miss "$name is not declared ($(where "$name"))" ;;
    esac
done
for pat in $(cat "$tmp/patterns"); do
    re="^$(printf '%s' "$pat" | sed 's/\*/[a-z0-9_]*/g')\$"
    grep -q "$re" "$tmp/known" || miss "$pat matches nothing declared ($(where "$pat"))"
done
for opt in $(cat "$tmp/optional"); do
    full=$(printf '%s' "$opt" | tr -d '[]')
    grep -qx "$full" "$tmp/known" || miss "$full (from $opt) is not declared ($(where "$opt"))"
done
# A call names a function, not a type of the same name.
for name in $(grep -oE '\blb_[a-z0-9_]*[a-z0-9]\(' "$tmp/text" | tr -d '(' | sort -u); do
    case $name in
    lb__*) grep -qx "$name" "$tmp/internal" || miss "$name() is not an internal function" ;;
    *) grep -qx "$name" "$tmp/functions" || miss "$name() is not a public function ($(where "$name("))" ;;
    esac
done

# A list of functions, "a(), b and c", names functions only: a type in a list
# with two functions or more was meant as one (lb_watchdog_stats for
# lb_watchdog_stats_get). Comment leaders are removed and lines joined, so a
# list may span lines.
for f in $DOCS; do
    sed -E 's/^[[:space:]]*(\/?\*+|\/\/)[[:space:]]?//' "$f" | tr '\n' ' ' |
        grep -oE '`?\blb_[a-z0-9_]+(\([^)]*\))?`?((,|,? and|,? or) `?lb_[a-z0-9_]+(\([^)]*\))?`?)+' |
        sed -E 's/\([^)]*\)//g; s/`//g' || true
done >"$tmp/lists"
while read -r list; do
    fns=0 others=""
    for n in $(printf '%s' "$list" | grep -oE 'lb_[a-z0-9_]+'); do
        if grep -qx "$n" "$tmp/functions"; then fns=$((fns + 1)); else others="$others $n"; fi
    done
    if [ "$fns" -ge 2 ] && [ -n "$others" ]; then
        miss "\"$list\" lists functions and${others}, which is not one ($(where "${others# }"))"
    fi
done <"$tmp/lists"

# Options: docs/cli.md against the help of the tool and of each of its commands.
"$TOOL" help >"$tmp/help"
for cmd in $(sed -n '/^Commands:/,/^$/p' "$tmp/help" | awk 'NR > 1 && $1 != "" { print $1 }'); do
    "$TOOL" help "$cmd" >>"$tmp/help"
done
options() {
    grep -oE '(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*' "$1" | sed -E 's/^[^-]+//' | sort -u
}
options "$tmp/help" >"$tmp/help-options"
for opt in $(options docs/cli.md); do
    grep -qx -- "$opt" "$tmp/help-options" ||
        miss "docs/cli.md names $opt, which no help of $TOOL does"
done

if [ "$bad" -gt 0 ]; then
    echo "check-docs-names: $bad name(s) in the docs that do not exist" >&2
    exit 1
fi
echo "check-docs-names: ok ($(wc -l <"$tmp/named") lb_ names, $(options docs/cli.md | wc -l)" \
    "options of docs/cli.md)"

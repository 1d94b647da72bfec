#!/bin/sh
# Keeps lockbridge(1) in step with the tool: every command `lockbridge help` lists
# has a section in the page's COMMANDS (.SS whose first word is the command), and
# every option and subcommand the command's own help names appears in that
# section; the general options appear under OPTIONS. An option the page defines
# (a .TP tag) that the help no longer names fails too, as does a section for a
# command the tool no longer has, or a title naming another version than
# `lockbridge --version`. The lists come from the tool's help output, so a
# command or option added to the tool fails this check until the page has it.
# Usage: sh tools/check-man.sh [TOOL [PAGE]]   (default build/lockbridge docs/lockbridge.1)
set -eu
cd "$(dirname "$0")/.."
TOOL=${1:-build/lockbridge}
PAGE=${2:-docs/lockbridge.1}
[ -x "$TOOL" ] || { echo "check-man: $TOOL missing (make tool)" >&2; exit 1; }
[ -f "$PAGE" ] || { echo "check-man: $PAGE missing" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockbridge-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
missing=0
miss() {
    echo "check-man: $*" >&2
    missing=$((missing + 1))
}

# ---- The page formats cleanly, and man shows it ------------------------------------
if ! groff -man -ww -z "$PAGE" 2>"$tmp/groff" || [ -s "$tmp/groff" ]; then
    cat "$tmp/groff" >&2
    miss "groff warns about $PAGE"
fi
if command -v man >/dev/null 2>&1; then
    MANWIDTH=80 man -l "$PAGE" 2>/dev/null | grep -q '^NAME' || miss "man -l $PAGE shows no NAME section"
fi

# The page's title line names the version the tool reports.
version=$("$TOOL" --version)
grep -q "^\.TH .*\"$version\"" "$PAGE" || miss "the page's .TH line does not name \"$version\""

# ---- The page as plain text, one section per file -----------------------------------
# Escapes become the characters they print (\- is -, fonts vanish); .SH opens a
# section named by its title, .SS within COMMANDS one named by its first word
# (the .SS title, the command's synopsis, belongs to its section).
sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(aq/'"'"'/g' -e 's/\\&//g' "$PAGE" |
    awk -v dir="$tmp" '
        /^\.SH / { title = substr($0, 5); gsub(/"/, "", title); in_cmds = (title == "COMMANDS")
                   out = dir "/sh." title; print "" > out; next }
        /^\.SS / && in_cmds { t = substr($0, 5); gsub(/"/, "", t); split(t, w, " ")
                   out = dir "/cmd." w[1]; print t > out; print w[1] >> (dir "/page-commands"); next }
        out != "" { print >> out }'
[ -f "$tmp/page-commands" ] || : >"$tmp/page-commands"

# options FILE: the option names a help text mentions (-x and --long-name).
options() {
    grep -oE '(^|[^A-Za-z0-9_-])--?[A-Za-z][A-Za-z0-9-]*' "$1" |
        sed -E 's/^[^-]+//' | sort -u
}

# has FILE WORD: WORD appears in FILE as a whole word (not part of a longer name).
has() {
    grep -qE "(^|[^A-Za-z0-9_-])$(printf '%s' "$2" | sed 's/[.|]/\\&/g')([^A-Za-z0-9_-]|\$)" "$1"
}

# The options a section defines: the first word of each line after a .TP.
defined() {
    awk 'prev == ".TP" { split($0, w, " "); if (w[2] ~ /^-/) print w[2] } { prev = $1 }' "$1" |
        sed 's/,$//' | sort -u
}

# ---- General options -----------------------------------------------------------------
"$TOOL" help >"$tmp/help"
options "$tmp/help" >"$tmp/global"
for opt in $(cat "$tmp/global"); do
    has "$tmp/sh.OPTIONS" "$opt" || miss "general option $opt is not under OPTIONS"
done

# ---- Commands --------------------------------------------------------------------------
sed -n '/^Commands:/,/^$/p' "$tmp/help" | awk 'NR > 1 && $1 != "" { print $1 }' >"$tmp/commands"
[ -s "$tmp/commands" ] || miss "no commands found in '$TOOL help'"
for cmd in $(cat "$tmp/commands"); do
    section=$tmp/cmd.$cmd
    if [ ! -f "$section" ]; then
        miss "command $cmd has no section (.SS $cmd ...) under COMMANDS"
        continue
    fi
    "$TOOL" help "$cmd" >"$tmp/help.$cmd"
    # The command's own options: every one its help names, less the general
    # ones its help repeats (those are checked under OPTIONS), but --json,
    # which each command gives a meaning of its own.
    for opt in $(options "$tmp/help.$cmd"); do
        if [ "$opt" != --json ] && grep -qx -- "$opt" "$tmp/global"; then continue; fi
        has "$section" "$opt" || miss "$cmd: option $opt is not in its section"
    done
    # Subcommands: the word after "lockbridge CMD" in a usage line, when it is
    # a lower-case word (mode get, mode set; list|prune is two of them).
    sed -n "s/^.*lockbridge $cmd \([a-z][a-z|-]*\).*/\1/p" "$tmp/help.$cmd" | tr '|' '\n' |
        sort -u | while read -r sub; do
            has "$section" "$sub" || echo "$cmd: subcommand $sub is not in its section"
        done >"$tmp/subs.$cmd"
    if [ -s "$tmp/subs.$cmd" ]; then
        while read -r line; do miss "$line"; done <"$tmp/subs.$cmd"
    fi
    # Options the page defines that the help does not name: left from an
    # older tool.
    for opt in $(defined "$section"); do
        grep -qE -- "(^|[^A-Za-z0-9_-])$opt([^A-Za-z0-9_-]|\$)" "$tmp/help.$cmd" ||
            miss "$cmd: the page defines $opt, which '$TOOL help $cmd' does not name"
    done
done
for cmd in $(cat "$tmp/page-commands"); do
    grep -qx "$cmd" "$tmp/commands" || miss "the page has a section for $cmd, which the tool does not list"
done
for opt in $(defined "$tmp/sh.OPTIONS"); do
    grep -qx -- "$opt" "$tmp/global" || miss "OPTIONS defines $opt, which '$TOOL help' does not name"
done

if [ "$missing" -gt 0 ]; then
    echo "check-man: $missing difference(s) between $PAGE and '$TOOL help'" >&2
    exit 1
fi
echo "man page check: ok ($(wc -l <"$tmp/commands") commands, $(wc -l <"$tmp/global") general" \
    "options, every command's options and subcommands in $PAGE)"

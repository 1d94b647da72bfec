#!/bin/sh
# Lists the public functions: every lb_ function declared in include/lockbridge/
# (comments, macros and typedefs removed), one name per line, sorted.
# Usage: sh tools/api-functions.sh
set -eu
cd "$(dirname "$0")/.."
cat include/lockbridge/*.h |
    sed -e ':a' -e 's#/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/##g' -e '/\/\*/{N;ba' -e '}' |
    grep -v '^[[:space:]]*#' |
    tr '\n' ' ' | tr ';' '\n' |
    grep -v 'typedef' |
    grep -oE '[[:alnum:]_*) ]\blb_[a-z0-9_]+[[:space:]]*\(' |
    grep -oE 'lb_[a-z0-9_]+' | sort -u

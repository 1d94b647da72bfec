#!/bin/sh
# Runs test binaries one after another and prints one closing line,
# "N passed, N failed", summed from each binary's cmocka summary. A binary
# that crashes, hangs past LB_TEST_TIMEOUT seconds (default 600) or prints no
# summary counts as one failure.
set -u
limit=${LB_TEST_TIMEOUT:-600}
passed=0; failed=0; crashed=""
for bin in "$@"; do
    name=${bin##*/}
    out=$(mktemp)
    if [ "${VALGRIND:-0}" = 1 ]; then
        timeout -k 10 "$limit" valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
            "$bin" >"$out" 2>&1
    else
        timeout -k 10 "$limit" "$bin" >"$out" 2>&1
    fi
    rc=$?
    cat "$out"
    p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    rm -f "$out"
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    if [ -z "${p}${f}" ] || { [ "$rc" -ne 0 ] && [ -z "$f" ]; }; then
        failed=$((failed + 1)); crashed="$crashed $name(rc=$rc)"
    fi
done
[ -n "$crashed" ] && echo "crashed or unreadable:$crashed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

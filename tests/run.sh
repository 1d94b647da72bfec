#!/usr/bin/env bash
# Runs test binaries side by side, LB_TEST_JOBS at a time (default: one per
# online CPU, plus one), in the order given (slowest first keeps the lanes
# even). Each binary's output is printed whole when it ends, followed by its
# wall time; the run closes with every binary's time, slowest first, and one
# line, "N passed, N failed", summed from each binary's cmocka summary. A
# binary that crashes, hangs past LB_TEST_TIMEOUT seconds (default 600) or
# prints no summary counts as one failure.
set -u
limit=${LB_TEST_TIMEOUT:-600}
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
jobs=${LB_TEST_JOBS:-$((cpus + 1))}
case $jobs in '' | *[!0-9]* | 0) echo "run.sh: LB_TEST_JOBS must be a positive integer" >&2; exit 2 ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/lb-tests.XXXXXX") || exit 2
: >"$work/times"
# An interrupted run stops the binaries it started (timeout passes the signal
# on), then removes its files.
trap 'cat "$work"/*.pid 2>/dev/null | while read -r p; do kill "$p" 2>/dev/null; done
      wait; rm -rf "$work"; exit 130' INT TERM
trap 'rm -rf "$work"' EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Runs binary number $1 ($2) into $work/$1.out; its exit code and wall time
# (ms) go to $work/$1.rc and $work/$1.ms.
run_one() {
    start=$(now_ms)
    if [ "${VALGRIND:-0}" = 1 ]; then
        timeout -k 10 "$limit" valgrind -q --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect "$2" >"$work/$1.out" 2>&1 &
    else
        timeout -k 10 "$limit" "$2" >"$work/$1.out" 2>&1 &
    fi
    echo $! >"$work/$1.pid"
    wait $!
    echo $? >"$work/$1.rc"
    echo $(($(now_ms) - start)) >"$work/$1.ms"
}

passed=0; failed=0; crashed=""; running=0; next=1; total=$#
declare -A number

# Prints binary $1's output and time, and adds its summary to the totals.
report() {
    out="$work/$1.out"; rc=$(cat "$work/$1.rc"); ms=$(cat "$work/$1.ms")
    name=$(cat "$work/$1.name")
    cat "$out"
    printf '%s: %d.%d s\n' "$name" $((ms / 1000)) $((ms % 1000 / 100))
    printf '%8d %s\n' "$ms" "$name" >>"$work/times"
    p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    if [ -z "${p}${f}" ] || { [ "$rc" -ne 0 ] && [ -z "$f" ]; }; then
        failed=$((failed + 1)); crashed="$crashed $name(rc=$rc)"
    fi
}

start_all=$(now_ms)
while [ "$next" -le "$total" ] || [ "$running" -gt 0 ]; do
    if [ "$next" -le "$total" ] && [ "$running" -lt "$jobs" ]; then
        bin=${!next}
        echo "${bin##*/}" >"$work/$next.name"
        run_one "$next" "$bin" &
        number[$!]=$next
        next=$((next + 1)); running=$((running + 1))
        continue
    fi
    # Waits for any one binary; a signal ends the wait at once (and the trap
    # runs), where a blocking read would hold it until a binary ended.
    ended=""
    wait -n -p ended
    [ -n "$ended" ] || continue
    report "${number[$ended]}"
    running=$((running - 1))
done
wait

ms=$(($(now_ms) - start_all))
echo "wall time per binary (ms), $jobs at a time; $((ms / 1000)) s in all:"
sort -rn "$work/times"
[ -n "$crashed" ] && echo "crashed or unreadable:$crashed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

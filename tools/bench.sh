#!/bin/sh
# Runs the benchmark (a temporary redis-server, then the tables) and writes
# docs/benchmarks.md from that run: figures, machine, versions, date, verdicts.
# Usage: BUILD=build sh tools/bench.sh [lockbridge-bench options, e.g. --seconds 1]
# LB_BENCH_DOC names another report file (for trial runs); LB_REDIS_SERVER another
# redis-server binary (the harness honours it too).
set -eu

BUILD=${BUILD:-build}
bin=$BUILD/bench/lockbridge-bench
doc=${LB_BENCH_DOC:-docs/benchmarks.md}
csv=$BUILD/bench/results.csv
redis=${LB_REDIS_SERVER:-redis-server}

if [ ! -x "$bin" ]; then
    echo "bench.sh: $bin is missing; run: make BUILD=$BUILD $bin" >&2
    exit 2
fi

frag=$(mktemp)
trap 'rm -f "$frag" "$frag.doc"' EXIT INT TERM

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t0=$(date +%s)
status=0
"$bin" --csv "$csv" --markdown "$frag" "$@" || status=$?
t1=$(date +%s)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

if [ ! -s "$frag" ]; then
    echo "bench.sh: the benchmark produced no results (exit $status); $doc left as it was" >&2
    exit "${status:-1}"
fi

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
[ -n "$cpu" ] || cpu=$(uname -m)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cc_version=$(${CC:-cc} --version 2>/dev/null | head -n 1)

{
cat <<'EOF'
# Benchmarks

This file is written by `make bench` (`tools/bench.sh` running
`tests/bench/lockbridge-bench`) from one run; run it again rather than editing it.
The raw figures of the run are in `<BUILD>/bench/results.csv`, one figure per line
(`table,row,column,value`).

## The run

EOF
echo "- Date: $started; the whole run took $((t1 - t0)) s."
echo "- Machine: $(nproc) CPUs, $cpu; kernel $(uname -sr)."
echo "- Load average (1, 5, 15 min): $load_start at the start, $load_end at the end."
echo "- Versions: $("$bin" --versions); lockbridge commit $commit;"
echo "  $("$redis" --version 2>/dev/null || echo "redis-server: version unknown");"
echo "  compiler $cc_version."
echo "- Arguments: ${*:-(defaults)}; exit status $status (0: every expectation on round"
echo "  trips, command counts and lost updates held)."
cat <<'EOF'

Other processes (builds and test suites of other engineers) may have shared this
machine during the run, and the benchmark's own clients, the server and the loopback
all share its CPUs. Absolute times are therefore noisy; the ratios, measured side by
side in the same run (the uncontended rows on one connection, interleaved), are the
figures to compare.

## How it measures

- A temporary `redis-server` is started by the test harness on a free loopback port
  (persistence off) and stopped at the end. Times come from `CLOCK_MONOTONIC`.
- Uncontended: one connection. Every row is warmed up first (this also loads the
  scripts: the first `EVALSHA` meets `NOSCRIPT`), then the rows are measured in interleaved
  rounds (the table's title gives the counts), each round starting at a different row, so that a noisy moment
  hits every row alike. Each sample is one `PING`, or one acquire plus one release of a
  free key. Median and p99 are nearest-rank; `x_ping_median` is the row's median over
  the `PING` median of the same run.
- `round_trips` is the library's own count per operation (`lb_machine_commands`, or
  `lb_legacy_commands` for the row that uses the blocking sync API). `redis_calls` is
  the server's count from `INFO commandstats` read before and after each block (the
  `INFO` calls left out); Redis also counts the commands a script runs, and those are
  reported apart as `in_scripts`. `check` is `ok` when, command by command, the server
  saw at least what the bench sent, the library's count equals what was sent, and
  anything beyond that is explained by the scripts sent (at most two calls each).
- The rows other than "sync API" drive the step machines with a copy of the sync
  driver's loop that also tallies command names; the "sync API" row calls
  `lb_legacy_try_acquire` and `lb_legacy_release`, to show the two cost the same.
- Contended: one key; 2, 8 and 32 threads, each on its own connection, each looping
  acquire, critical section, release for a few seconds, with no pause between a release
  and the next acquire (the harshest case for fairness). The critical section reads a
  counter with `GET` and writes it back plus one with `SET`; lost updates are
  acquisitions minus the counter's final value, and `overlaps` counts clients that
  found another inside the critical section (checked in process). Time to acquire runs
  from the start of an acquire to its success. `redis_calls_per_acq` is the server's
  count (commandstats) per acquisition, less the critical section's `GET` and `SET`
  and including commands run inside scripts; `sent_per_acq` is the library's count
  (`lb_legacy_commands`). Strategies:
  - `lockbridge wire` and `lockbridge scripted`: `lb_legacy_acquire` with the default
    options (jittered back-off from 2 ms doubling to 100 ms, bounded by the holder's
    expiry).
  - `fixed 200 ms sleep-and-retry`: the loop the legacy fleets settled on, written here
    in C on the same wire protocol: `lb_legacy_try_acquire`, then sleep 200 ms on busy.
  - `tight polling`: `lb_legacy_try_acquire` again at once on busy.

## Results

EOF
cat "$frag"
cat <<'EOF'
## Reading the figures

- A lock operation on one connection cannot cost less than its round trips, so the
  floor of an acquire+release is as many `PING` medians as it has round trips: two for
  the scripted variant (`SETNX`, then the compare-and-delete script) and three for the
  wire variant (`SETNX`, then `GET` and `DEL` to release after comparing). The
  expectations table gives the verdict on each: `met` or `ahead` where the count or the
  time is at or under the floor, `behind` with the margin where it is over.
- Under contention the interesting columns are the spread of acquisitions across
  clients (`max_per_client` against `min_per_client`: a client that releases and at
  once asks again usually wins against sleepers), the tail of the time to acquire, and
  the Redis calls each acquisition costs, and how each of these moves as clients are
  added.
EOF
} > "$frag.doc"

mv "$frag.doc" "$doc"
echo "bench.sh: wrote $doc and $csv"
exit "$status"

#!/bin/sh
# Runs the benchmark (a temporary redis-server, then the tables) and writes
# docs/benchmarks.md and its plots in docs/img/ from that run: figures,
# machine, load, versions, targets and what limits the missed ones.
# Usage: BUILD=build sh tools/bench.sh [lockbridge-bench options, e.g. --seconds 1]
# LB_BENCH_DOC names another report file (for trial runs; its plots then go
# beside it in img/); LB_REDIS_SERVER another redis-server binary (the harness
# honours it too); LB_BENCH_PYTHON and LB_BENCH_NODE the peers' interpreters.
set -eu

BUILD=${BUILD:-build}
bin=$BUILD/bench/lockbridge-bench
doc=${LB_BENCH_DOC:-docs/benchmarks.md}
docdir=$(dirname "$doc")
imgdir=$docdir/img
csv=$BUILD/bench/results.csv
plot=$BUILD/bench/plot.dat
redis=${LB_REDIS_SERVER:-redis-server}
python=${LB_BENCH_PYTHON:-/usr/bin/python3}
node=${LB_BENCH_NODE:-node}

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
"$bin" --csv "$csv" --markdown "$frag" --plot-data "$plot" "$@" || status=$?
t1=$(date +%s)
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

if [ ! -s "$frag" ]; then
    echo "bench.sh: the benchmark produced no results (exit $status); $doc left as it was" >&2
    exit "${status:-1}"
fi

# ---- Plots: one PNG per figure against the number of clients ------------------
# plot.dat holds one block per strategy (a quoted title line, then rows of
# clients, tta p99 ms, Redis commands per acquisition, min/max per client).
plots=""
if command -v gnuplot >/dev/null 2>&1 && [ -s "$plot" ]; then
    mkdir -p "$imgdir"
    # One clause per block: lockbridge solid, peers dashed, each its own point.
    clauses() { # column
        grep '^"' "$plot" | awk -v f="$plot" -v c="$1" 'BEGIN {
            n = split("#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd #8c564b #e377c2 #7f7f7f " \
                      "#bcbd22 #17becf #000000 #393b79 #ad494a #637939 #7b4173 #a55194", rgb, " ")
        } {
            dt = index($0, "(peer)") ? 2 : 1
            printf "%s\"%s\" index %d using 1:%d with linespoints lw 2 dt %d pt %d lc rgb \"%s\" title columnheader(1)",
                (NR > 1 ? ", " : ""), f, NR - 1, c, dt, NR, rgb[(NR - 1) % n + 1]
        }'
    }
    draw() { # file, column, y label, title, log scale on y (1/0)
        gnuplot <<EOF
set terminal pngcairo size 1000,760 font ",10"
set output "$imgdir/$1"
set title "$4"
set xlabel "contending clients"
set ylabel "$3"
set logscale x 2
set xtics (2, 8, 32)
set xrange [1.6:40]
$( [ "$5" = 1 ] && echo 'set logscale y' || true )
set grid
set key below noenhanced maxrows 8
set termoption noenhanced
plot $(clauses "$2")
EOF
    }
    draw bench-tta-p99.png 2 "time to acquire, p99 (ms, log scale)" \
        "Time to acquire, p99, one key (peers dashed)" 1 &&
    draw bench-commands.png 3 "Redis commands per acquisition (log scale)" \
        "Redis commands per acquisition, critical section's 2 included" 1 &&
    draw bench-fairness.png 4 "min / max acquisitions per client (1 = even)" \
        "Fairness: fewest over most acquisitions per client" 0 &&
    plots="bench-tta-p99.png bench-commands.png bench-fairness.png" ||
    echo "bench.sh: gnuplot failed; no plots" >&2
else
    echo "bench.sh: gnuplot is not installed (make bench-peers installs it); no plots" >&2
fi

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
[ -n "$cpu" ] || cpu=$(uname -m)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cc_version=$(${CC:-cc} --version 2>/dev/null | head -n 1)
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
version_of() { "$@" 2>/dev/null | head -n 1 || true; }
bench_version=$(version_of redis-benchmark --version)
py_version=$(version_of "$python" --version)
node_version=$(version_of "$node" --version)
gp_version=$(version_of gnuplot --version)

{
cat <<'EOF'
# Benchmarks

This file and the plots in `docs/img/` are written by `make bench` (`tools/bench.sh`
running `tests/bench/lockbridge-bench`) from one run; run it again rather than editing
it. The raw figures are in `<BUILD>/bench/results.csv`, one figure per line
(`table,row,column,value`), and the plotted ones in `<BUILD>/bench/plot.dat`.

## The run

EOF
echo "- Date: $started; the whole run took $((t1 - t0)) s."
echo "- Machine: $(nproc) CPUs, $cpu, $mem; kernel $(uname -sr)."
echo "- Load average (1, 5, 15 min): $load_start at the start, $load_end at the end."
echo "- Versions: $("$bin" --versions); lockbridge commit $commit;"
echo "  $("$redis" --version 2>/dev/null || echo "redis-server: version unknown");"
echo "  ${bench_version:-redis-benchmark: not found}; compiler $cc_version;"
echo "  peers' interpreters: ${py_version:-python3: not found} ($python), node ${node_version:-not found};"
echo "  plots: ${gp_version:-gnuplot not installed}. The peers' library versions are in their table."
echo "- Arguments: ${*:-(defaults)}; exit status $status (0: no lost update, no overlap,"
echo "  no failed run of lockbridge, and the library's command counts agree with the server's; the"
echo "  speed targets are verdicts in the table, not the exit status)."
cat <<'EOF'

Other processes (builds and test suites) may have shared this
machine during the run, and the benchmark's own clients, the peers, the server and the
loopback all share its CPUs: the load averages above say how busy it was. Absolute
times are therefore noisy; the ratios, measured side by side in the same run, are the
figures to compare, and the verdicts are taken on them.

## How it measures

- A temporary `redis-server` is started by the test harness on a free loopback port
  (persistence off) and stopped at the end; the quorum row starts two more. Times come
  from `CLOCK_MONOTONIC` (the peers' drivers read the same clock).
- Reference: the `PING` round trip of one client (a row of the uncontended table), and
  `redis-benchmark -P 16 -t set -q` on the same server: the server's pipelined `SET`
  rate with 50 connections.
- Uncontended: one connection. Every row is warmed up first (this also loads the
  scripts: the first `EVALSHA` meets `NOSCRIPT`), then the rows are measured in
  interleaved rounds, each round starting at a different row, so that a noisy moment
  hits every row alike. A sample is one `PING`, or one acquire plus one release of a
  free key: legacy wire-only and scripted (ms codec), modern, modern with fencing,
  compat (the mode-following lock in compat mode, not following a control key), and a
  quorum of three local servers (the sync API; its commands go to three servers one
  after the other). Median and p99 are nearest-rank; `x_ping_median` is the row's
  median over the `PING` median. `round_trips` is the library's own count per
  operation, `redis_calls` the servers' count from `INFO commandstats` (read before
  and after each block, the `INFO` calls left out), which includes the commands a
  script runs, reported apart as `in_scripts`; `server_us` is the server's own time
  (commandstats `usec`) for the commands the row sent, per operation, a script's
  internals inside its `EVALSHA`; `check` is `ok` when the counts agree.
- Contended: one key; 2, 8 and 32 clients, each on its own connection (threads of the
  benchmark for lockbridge, processes or connections of the peers' drivers), each
  looping acquire, critical section, release for the run's length, with no pause
  between a release and the next acquire (the harshest case for fairness). The
  critical section reads a counter with `GET` and writes it back plus one with `SET`;
  lost updates are acquisitions minus the counter's final value. Time to acquire runs
  from the start of an acquire to its success; a wait still unfinished when the run
  ends counts with its length so far (a starved client's wait is the one that
  matters), so `tta_max_ms` near the run's length means a client was starved. A
  hand-off is the lock passing to another client: it runs from the moment a holder
  starts its release to the moment another client's acquire succeeds;
  `handoffs_share` is the share of acquisitions that were hand-offs (the rest went
  to the client that had just released it). `redis_calls_per_acq` is the
  server's count (`INFO commandstats`, script internals included) per acquisition,
  the critical section's `GET` and `SET` included; `sent_per_acq` is what the
  lockbridge clients sent, counted by the library, plus those two. `max_over_min` is
  the most acquisitions of one client over the fewest (`inf`: a client never got the
  lock). `gave_up` counts a peer's acquire calls that failed at its own retry limit
  (the client then tries again). Every lock has a 30 s TTL.
- lockbridge strategies: the modern lock with `lb_lock_acquire` (polling: jittered
  back-off from 2 ms doubling to 100 ms, bounded by the holder's TTL); with
  `lb_lock_acquire_wait` and a waiter per client (wake-on-release: the release
  script publishes, listening waiters wake at once, one that then loses the race
  sleeps a polling step deaf, bounded by the lock's turn-over, and a lock released
  twice within 20 ms has its channel let go for a second, its waits polling); fair mode with its
  defaults, with `lb_lock_acquire_wait` and a waiter per client and with
  `lb_lock_acquire` on one connection (either way the wait blocks on the baton list,
  then on its own grant list, where the release pushes the hand-off); yield windows
  for clients outside the queue open only once one is seen, so neither row meets
  one; compat with `lb_mlock_acquire`; legacy wire-only and scripted with
  `lb_legacy_acquire`. A mixed run at 32 clients puts 28 fair waiters (defaults, given
  waiters) beside 4 clients outside fair mode that poll with `lb_lock_acquire`
  (refused for 100 ms, each notes itself, windows of 200 ms open for them, and one
  that took the key between windows passes the baton on): its first row is the whole
  run (the server's counts, the counter), the two indented rows each side's own waits
  and spread.
- Peers, on the same server in the same run, each with its defaults and with a tuned
  retry (their table gives versions and settings): redis-py's `Lock` (one process per
  client), node-redlock and redis-semaphore's `Mutex` (one node process, a connection
  per client), and the legacy fleets' loop, a fixed 200 ms sleep between attempts
  on the L1 wire sequence, written in C in the benchmark. A peer that is not
  installed is reported as skipped; `make bench-peers` installs them. The rate
  target compares with the best peer library; the legacy fleets' loop is the
  users' own code, not a library, and is given beside it.
- Side by side: the fair candidate (fair waiting on grant lists) and the best peer
  library run back to back, alternately (ours first in odd rounds), five times at 32
  clients; that row's rate target reads the median of the five ratios, the single runs
  being quoted beside. Single runs a minute apart moved by a fifth between runs of the
  same code on this machine; pairs see about the same machine. Waking on release
  (`lb_lock_acquire_wait` through a waiter, fair mode off) and polling run the same
  way at each client count (2, 8 and 32): waking on release must be neither slower
  nor less fair than polling, so its targets read the median of the five rate ratios
  and of the five max/min ratios, each against 1. Polling is also run side by side
  with itself at 32 clients, the same way (the control): its two medians show how
  far the method alone moves a ratio from 1, and the wake targets quote them.
- Many keys: one thread, one connection, libevent, the event-loop token lock
  (`lockbridge/async.h`, as `examples/many_async_locks.c` uses it; until 2026-11-28 the
  bare step machines on `lb_async_run`); thousands of lock handles (the table's title
  gives the count; more in flight pipeline more per write), each on its own key, each
  looping acquire then release as soon as the previous step answers. A lock is one
  acquire and its release; the releases asked for in one loop turn go to the server
  as one script call (up to 128 keys), so commandstats counts that call and its MGET
  and DEL once per batch, not once per lock. The row runs in
  five rounds, each a pipelined SET measure (`redis-benchmark -P 16`, a fifth of the
  reference's requests) and then a fifth of the run's locks; its target reads the
  median of the rounds' ratios, so load that comes and goes falls on both sides of it.
  `lockbridge-bench --async-only` runs these rounds alone and prints their table.
- Memory: 100 000 modern lock handles whose allocator counts the bytes it hands out
  (requested sizes, without malloc's own overhead), all acquired at once through the
  asynchronous driver; then this process's VmRSS, and the server's `used_memory`.

## Results

EOF
ahead=$(grep '^targets,' "$csv" | grep -c ',verdict,"*\(ahead\|met\)' || true)
behind=$(grep '^targets,' "$csv" | grep -c ',verdict,"*\(behind\|missed\)' || true)
echo "Targets: $ahead met or ahead, $behind behind or missed in this run; the targets"
echo "table gives each verdict as a ratio to its bound and, where lockbridge is behind,"
echo "what limits it."
echo
cat "$frag"
if [ -n "$plots" ]; then
    echo "## Plots"
    echo
    echo "Against the number of clients, one line per strategy that ran: lockbridge's solid,"
    echo "peers' dashed and marked \"(peer)\"."
    echo
    for p in $plots; do
        echo "![$p](img/$p)"
        echo
    done
fi
cat <<'EOF'
## Reading the figures

- A lock operation on one connection cannot cost less than its round trips: the
  modern lock's acquire+release is two (`SET NX PX`, then the release script), so
  its floor is two `PING` medians.
- On one key, the lock is a chain of hand-offs: the holder's critical section (two
  round trips), its release, and the next acquire. Whatever a strategy does, the
  acquisitions per second of one key are bounded by that chain; what strategies
  change is who gets the lock next, how long the others wait, and how many commands
  the waiters spend meanwhile.
- Percentiles of the time to acquire are taken over acquisitions: a client that
  releases and at once acquires again wins many fast acquisitions while a starved one
  contributes a single long wait, so read `tta_p99_ms` together with `tta_max_ms` and
  `max_over_min`.
- The targets table says `behind` with the ratio to its bound wherever lockbridge
  misses a target, and its last column says what limits that row.
EOF
} > "$frag.doc"

mkdir -p "$docdir"
mv "$frag.doc" "$doc"
echo "bench.sh: wrote $doc, $csv${plots:+ and the plots in $imgdir}"
exit "$status"

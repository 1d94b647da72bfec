#!/bin/sh
# `make demo`: the JVM legacy lockers and lockbridge contend on shared keys of a
# temporary redis-server; one table per legacy kind, lost updates compared.
# Usage: BUILD=build sh tools/demo.sh   (make demo builds what it needs first)
set -eu

BUILD=${BUILD:-build}
TOOL=${LB_TOOL:-$BUILD/lockbridge}
JAVA_CP=$BUILD/java
REDIS_SERVER=${LB_REDIS_SERVER:-redis-server}
SECONDS_PER_RUN=1 # each run, seconds
CS_SLEEP_MS=1     # sleep inside the critical section, milliseconds
CLIENTS=2         # Java and lockbridge clients each in a mixed run (alone: twice)

for need in java "$REDIS_SERVER" redis-cli; do
    command -v "$need" >/dev/null 2>&1 || { echo "demo: $need not found (make deps)" >&2; exit 1; }
done
[ -x "$TOOL" ] || { echo "demo: $TOOL missing (run make demo)" >&2; exit 1; }
[ -f "$JAVA_CP/LegacyLockers.class" ] || { echo "demo: $JAVA_CP has no Java lockers (run make demo)" >&2; exit 1; }

# ---- A temporary redis-server on a free loopback port, stopped on any exit -----
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockbridge-demo.XXXXXX")
REDIS_PID=""
KIDS=""
cleanup() {
    for pid in $KIDS $REDIS_PID; do kill "$pid" 2>/dev/null || true; done
    for pid in $KIDS $REDIS_PID; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

random_port() {
    echo $((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 20000))
}

start_redis() {
    tries=0
    while [ $tries -lt 20 ]; do
        tries=$((tries + 1))
        PORT=$(random_port)
        redis-cli -p "$PORT" ping >/dev/null 2>&1 && continue # taken
        "$REDIS_SERVER" --port "$PORT" --bind 127.0.0.1 --dir "$TMP" --save '' \
            --appendonly no --logfile "$TMP/redis.log" &
        REDIS_PID=$!
        waited=0
        while [ $waited -lt 50 ]; do
            if redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; then return 0; fi
            kill -0 "$REDIS_PID" 2>/dev/null || break # exited: the port was taken
            sleep 0.1
            waited=$((waited + 1))
        done
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
        REDIS_PID=""
    done
    echo "demo: could not start redis-server on a free port" >&2
    exit 1
}

# ---- Runs ------------------------------------------------------------------------
# field NAME FILE: the first number after "NAME": in a summary line ("-" if none).
field() {
    v=$(sed -n "s/.*\"$1\":\([-0-9.][0-9.e+-]*\).*/\1/p" "$2" | head -n 1)
    echo "${v:--}"
}

counter() {
    v=$(redis-cli -p "$PORT" get "$1")
    echo "${v:-0}"
}

RUN=0
# run_java KIND CLIENTS KEY COUNTER OUT TIMEOUT_MS [extra...]: in the background.
run_java() {
    kind=$1 n=$2 key=$3 ctr=$4 out=$5 timeout=$6
    shift 6
    java -XX:+UseSerialGC -cp "$JAVA_CP" LegacyLockers contend --kind "$kind" \
        --port "$PORT" --key "$key" --counter-key "$ctr" --clients "$n" \
        --seconds "$SECONDS_PER_RUN" --cs-sleep-ms "$CS_SLEEP_MS" --timeout-ms "$timeout" \
        "$@" >"$out" 2>"$out.err" &
    KIDS="$KIDS $!"
    JAVA_PID=$!
}

# run_tool KEY COUNTER OUT CODEC VARIANT TTL_MS: in the background.
run_tool() {
    "$TOOL" -p "$PORT" contend "$1" --clients "$CLIENTS" --seconds "$SECONDS_PER_RUN" \
        --counter-key "$2" --cs-sleep-ms "$CS_SLEEP_MS" --codec "$4" --variant "$5" \
        --ttl-ms "$6" --release-margin-ms $(($6 / 5)) --wait-ms 500 >"$3" 2>"$3.err" &
    KIDS="$KIDS $!"
    TOOL_PID=$!
}

row() { # LABEL CLIENTS FILE NOTE_FIELD
    printf '  %-28s %7s %12s %11s %11s  %s=%s\n' "$1" "$2" "$(field acquisitions "$3")" \
        "$(field p50 "$3")" "$(field p99 "$3")" "$4" "$(field "$4" "$3")"
}

lost_line() { # LABEL ACQUISITIONS DELTA
    lost=$(($2 - $3))
    if [ "$2" -gt 0 ]; then
        pct=$(awk "BEGIN { printf \"%.2f\", 100 * $lost / $2 }")
    else
        pct="0.00"
    fi
    printf '  %-28s %d of %d increments lost (%s%%)\n' "$1" "$lost" "$2" "$pct"
}

# demo_kind KIND TITLE CODEC JAVA_TIMEOUT_MS LB_TTL_MS [java extra...]
demo_kind() {
    kind=$1 title=$2 codec=$3 jt=$4 lt=$5
    shift 5
    echo
    echo "== $kind: $title =="
    printf '  %-28s %7s %12s %11s %11s  %s\n' "client" "clients" "acquisitions" "wait p50 ms" \
        "wait p99 ms" "notes"
    RUN=$((RUN + 1))
    key="demo:$kind:$RUN" ctr="demo:$kind:$RUN:counter" out="$TMP/alone.$RUN"
    c0=$(counter "$ctr")
    run_java "$kind" $((CLIENTS * 2)) "$key" "$ctr" "$out" "$jt" "$@"
    wait "$JAVA_PID" || true
    KIDS=""
    delta=$(($(counter "$ctr") - c0))
    row "java $kind alone" $((CLIENTS * 2)) "$out" disruptions
    alone_acq=$(field acquisitions "$out")
    alone_delta=$delta
    lines=""
    for variant in wire scripted; do
        RUN=$((RUN + 1))
        key="demo:$kind:$RUN" ctr="demo:$kind:$RUN:counter"
        jout="$TMP/java.$RUN" lout="$TMP/lb.$RUN"
        c0=$(counter "$ctr")
        run_java "$kind" "$CLIENTS" "$key" "$ctr" "$jout" "$jt" "$@"
        run_tool "$key" "$ctr" "$lout" "$codec" "$variant" "$lt"
        wait "$JAVA_PID" || true
        wait "$TOOL_PID" || true
        KIDS=""
        delta=$(($(counter "$ctr") - c0))
        row "java $kind (mixed)" "$CLIENTS" "$jout" disruptions
        row "lockbridge $variant" "$CLIENTS" "$lout" lost_locks
        ja=$(field acquisitions "$jout") la=$(field acquisitions "$lout")
        [ "$ja" = - ] && ja=0
        [ "$la" = - ] && la=0
        lines="$lines$variant $((ja + la)) $delta
"
    done
    [ "$alone_acq" = - ] && alone_acq=0
    echo "  lost updates (acquisitions - counter increase):"
    lost_line "java $kind alone" "$alone_acq" "$alone_delta"
    printf '%s' "$lines" | while read -r variant acq delta; do
        lost_line "mixed, lockbridge $variant" "$acq" "$delta"
    done
}

# ---- Staged rollout ----------------------------------------------------------------
# Grouped tasks: each group's tasks run strictly one at a time under the group's
# lock, groups in parallel. A task reads the group's done-counter, works 1 ms and
# writes it back plus one, so two holders at once show as a lost increment: a
# serialisation violation. Java L4 lockers (legacy) and lockbridge clients that
# follow namespace "demo" share the groups while the operator moves the fleet
# legacy -> compat -> modern with `lockbridge mode set`; each switch happens while
# lockbridge clients run (they pick the mode up from the control key). The Java
# fleet is retired before modern, as the gate requires.
GROUPS=3        # groups processed in parallel
STAGE_S=3       # lockbridge clients of each stage run this long, seconds
ROLLOUT_TTL=1000 # lock validity of every client, ms

lb() { "$TOOL" -p "$PORT" "$@"; }

# stage_start STAGE: lockbridge clients on every group, following namespace demo.
stage_start() {
    STAGE_PIDS=""
    for g in $(seq 1 "$GROUPS"); do
        "$TOOL" -p "$PORT" contend "demo:rollout:g$g" --ns demo --clients 2 \
            --seconds "$STAGE_S" --counter-key "demo:done:g$g" --cs-sleep-ms 1 \
            --codec ms --ttl-ms "$ROLLOUT_TTL" --release-margin-ms 200 --wait-ms 5000 \
            >"$TMP/stage.$1.$g" 2>"$TMP/stage.$1.$g.err" &
        STAGE_PIDS="$STAGE_PIDS $!"
    done
    KIDS="$KIDS $STAGE_PIDS"
}

stage_wait() { for pid in $STAGE_PIDS; do wait "$pid" || true; done; }

show_status() { # TITLE
    echo "  -- lockbridge status ($1) --"
    lb status --ns demo --limit 0 2>&1 |
        sed 's/^/     /' || true
}

set_mode() { # MODE [options]: prints the tool's answer and its exit code
    m=$1
    shift
    out=$(lb mode set "$m" --ns demo "$@" 2>&1) && rc=0 || rc=$?
    printf '%s\n' "$out" | sed 's/^/     /'
    echo "     (exit $rc)"
}

sum_field() { # FIELD FILES...: the sum of a summary field over files
    f=$1
    shift
    total=0
    for file in "$@"; do
        v=$(field "$f" "$file")
        [ "$v" = - ] || total=$((total + v))
    done
    echo "$total"
}

max_field() { # FIELD FILES...: the largest value (ms) of a summary field
    f=$1
    shift
    for file in "$@"; do field "$f" "$file"; done | grep -v '^-$' | sort -g | tail -n 1
}

stage_row() { # LABEL FILES...
    label=$1
    shift
    printf '  %-34s %6s %9s %9s %9s\n' "$label" "$(sum_field acquisitions "$@")" \
        "$(max_field p50 "$@")" "$(max_field p99 "$@")" "$(max_field max "$@")"
}

rollout() {
    echo
    echo "== Staged rollout: $GROUPS groups of tasks, one at a time per group, groups in parallel =="
    c0=0
    for g in $(seq 1 "$GROUPS"); do c0=$((c0 + $(counter "demo:done:g$g"))); done
    # The namespace's gate configuration, stored once: its keys, codec, the
    # fleet's validity and how often followers re-read the mode (a stage must
    # last their sum before the next change), and a window and watch short
    # enough for a demo. Values shorter than the defaults loosen the gate, so
    # each is named with --override. No mode is set: until one is, followers
    # use their configured mode (legacy here).
    lb mode config --ns demo --match 'demo:rollout:g*' --codec ms \
        --ttl-ms "$ROLLOUT_TTL" --refresh-ms 1000 --window-ms 1000 --observe-ms 1500 \
        --override ttl-ms --override window-ms --override observe-ms >/dev/null
    # The Java fleet: one L4 client per group, through the legacy and compat stages.
    JAVA_PIDS=""
    for g in $(seq 1 "$GROUPS"); do
        java -XX:+UseSerialGC -cp "$JAVA_CP" LegacyLockers contend --kind L4 --port "$PORT" \
            --key "demo:rollout:g$g" --counter-key "demo:done:g$g" --clients 1 \
            --seconds $((2 * STAGE_S)) --cs-sleep-ms 1 --timeout-ms "$ROLLOUT_TTL" \
            >"$TMP/java.rollout.$g" 2>"$TMP/java.rollout.$g.err" &
        JAVA_PIDS="$JAVA_PIDS $!"
    done
    KIDS="$KIDS $JAVA_PIDS"
    echo "  stage legacy: Java L4 and lockbridge clients (mode read from {demo}:lb-mode)"
    stage_start legacy
    sleep $((STAGE_S - 1))
    show_status "legacy stage"
    echo "  -- lockbridge mode set compat (the legacy-stage clients are still running) --"
    LEGACY_STAGE=$STAGE_PIDS
    set_mode compat
    stage_start compat
    for pid in $LEGACY_STAGE; do wait "$pid" || true; done
    sleep $((STAGE_S - 2))
    show_status "compat stage, Java lockers still running"
    echo "  -- lockbridge mode set modern, while the Java lockers still run --"
    set_mode modern
    for pid in $JAVA_PIDS; do wait "$pid" || true; done
    stage_wait
    echo "  -- the Java lockers are retired; lockbridge mode set modern, a moment later --"
    # Their last lock, as the gate recorded it, expires within a validity and
    # counts for --window-ms after that.
    sleep 3
    set_mode modern
    stage_start modern
    sleep 1
    show_status "modern stage"
    stage_wait
    c1=0
    for g in $(seq 1 "$GROUPS"); do c1=$((c1 + $(counter "demo:done:g$g"))); done
    echo
    printf '  %-34s %6s %9s %9s %9s\n' "clients (all groups)" "tasks" "p50 ms" "p99 ms" "max ms"
    stage_row "java L4 (legacy + compat stages)" "$TMP"/java.rollout.[0-9]
    stage_row "lockbridge, legacy stage" "$TMP"/stage.legacy.[0-9]
    stage_row "lockbridge, compat stage" "$TMP"/stage.compat.[0-9]
    stage_row "lockbridge, modern stage" "$TMP"/stage.modern.[0-9]
    done_total=$(sum_field acquisitions "$TMP"/java.rollout.[0-9] "$TMP"/stage.*.[0-9])
    violations=$((done_total - (c1 - c0)))
    echo "  tasks done: $done_total; serialisation violations (lost increments): $violations"
    echo "  (waits: the largest per-process p50/p99/max of the stage's clients)"
}

start_redis
echo "lockbridge demo: redis-server on 127.0.0.1:$PORT (temporary, $TMP)"
echo "Each run: ${SECONDS_PER_RUN} s; clients loop: acquire, GET counter, sleep ${CS_SLEEP_MS} ms,"
echo "SET counter+1, release. Java alone: $((CLIENTS * 2)) clients; mixed: $CLIENTS Java + $CLIENTS lockbridge."
echo "disruptions: Java steps that deleted or overwrote a possibly live lock, or went on"
echo "without one; lost_locks: lockbridge releases that found the lock gone or changed."

ROLLOUT_ONLY=${ROLLOUT_ONLY:-0}
if [ "$ROLLOUT_ONLY" = 0 ]; then
demo_kind L1 "ms timestamps, catch-all DEL on any error" ms 1000 1000
demo_kind L2 "ms timestamps, clock frozen per lock() call" ms 1000 1000
demo_kind L3 "JSON expiryTime, monotonic ns (expiry_ms x 1000 ns)" \
    "json:unit=ns,clock=mono" 1000000 1000
demo_kind L4 "ms timestamps, strict GETSET" ms 1000 1000
demo_kind L5 "float seconds" float 1000 1000
demo_kind R "Redis documentation's algorithm, seconds" s 1000 2000
demo_kind M1 "token lock (polling every 5 ms here, 200 ms in the field)" ms 1000 1000 \
    --retry-sleep-ms 5
echo
echo "Unsupported on purpose: an INCR lock's counter reads as a 1970 timestamp."
demo_kind L1-INCR "INCR + EXPIRE (cannot share keys with any other protocol)" ms 60000 1000
fi # ROLLOUT_ONLY=1 runs the staged rollout alone
rollout

# Every client run must have printed its summary. A run that did not (the tool
# or a Java locker failed to start, or crashed) fails the demo, so that CI,
# which runs it, does not let a broken demo land.
broken=0
for out in "$TMP"/alone.* "$TMP"/java.* "$TMP"/lb.* "$TMP"/stage.*; do
    case $out in *.err) continue ;; esac
    [ -f "$out" ] || continue
    grep -q '"acquisitions":' "$out" && continue
    echo "demo: run $(basename "$out") printed no summary; its stderr:" >&2
    sed 's/^/    /' "$out.err" >&2 2>/dev/null || true
    broken=$((broken + 1))
done
echo
echo "docs/interop.md explains each figure and which pairs may share keys;"
echo "docs/migration.md is the operator's runbook for the rollout."
[ "$broken" = 0 ] || { echo "demo: $broken run(s) printed no summary" >&2; exit 1; }

#!/bin/sh
# Outsider pairing: 2 threads of a JVM token locker that does not queue (M1:
# SET NX PX, a 200 ms sleep between attempts) beside 2 lockbridge modern
# clients on one key for 5 s, polling and fair. Prints acquisitions per client
# on each side and whether the outsider's share meets its target (outsider per
# client >= a quarter of lockbridge's per client).
# usage: outsider_pair.sh LOCKBRIDGE JAVA_CLASSPATH [SECONDS] [PORT]
# OUTSIDER_MODES: the modes to run (default "polling fair"); OUTSIDER_DEBUG
# set: both sides' summaries on stderr.
set -eu
lb=$1
cp=$2
secs=${3:-5}
port=${4:-$(( 20000 + $$ % 20000 ))}
dir=$(mktemp -d)
# Only the server this script started is stopped, by its own pid.
trap 'kill "$(cat "$dir/pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$dir"' EXIT
# A port some other server answers on is passed over.
while redis-cli -p "$port" ping >/dev/null 2>&1; do port=$(( port + 1 )); done
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --dir "$dir" --logfile "$dir/log" --pidfile "$dir/pid" >/dev/null
tries=0
until [ -s "$dir/pid" ] && redis-cli -p "$port" ping >/dev/null 2>&1; do
    tries=$(( tries + 1 ))
    if [ "$tries" -gt 100 ]; then echo "outsider_pair: no server on port $port" >&2; exit 1; fi
    sleep 0.05
done

# A JSON field's number from a summary line.
field() { sed -n "s/.*\"$1\":\([0-9][0-9]*\).*/\1/p"; }

for mode in ${OUTSIDER_MODES:-polling fair}; do
    flag=
    [ "$mode" = fair ] && flag=--fair
    key="pair:$mode"
    java -XX:+UseSerialGC -cp "$cp" LegacyLockers contend --kind M1 --port "$port" \
        --key "$key" --counter-key "$key:jc" --clients 2 --seconds "$secs" \
        --timeout-ms 30000 >"$dir/java" &
    jpid=$!
    # The JVM takes a moment to start: lockbridge starts once M1's first
    # attempt is near, so both sides run about the same 5 s.
    sleep 0.4
    "$lb" -p "$port" --json contend "$key" --mode modern $flag --clients 2 \
        --seconds "$secs" --counter-key "$key:lc" --ttl-ms 30000 >"$dir/lb"
    wait "$jpid"
    m1=$(field acquisitions <"$dir/java")
    lbn=$(field acquisitions <"$dir/lb")
    ok=no
    [ $(( m1 * 4 )) -ge "$lbn" ] && ok=yes
    if [ -n "${OUTSIDER_DEBUG:-}" ]; then cat "$dir/java" "$dir/lb" >&2; fi
    printf 'outsider %-7s M1 per client %6s  lockbridge per client %6s  target met %s\n' \
        "$mode" "$(( m1 / 2 ))" "$(( lbn / 2 ))" "$ok"
done

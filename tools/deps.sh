#!/bin/sh
# Installs what building, testing and the demo need, from Debian packages, when
# missing. With --check, installs only if something is missing (make test, make demo).
set -eu
pkgs="build-essential pkg-config libhiredis-dev libcjson-dev libcmocka-dev redis-server redis-tools openjdk-17-jdk-headless libevent-dev valgrind clang clang-tidy cppcheck man-db faketime"
# Opt-in (--bench, used by make bench-peers): a peer make bench compares with
# (redis-py's Lock) and gnuplot for the report's plots.
bench_pkgs="python3-redis gnuplot-nox"
[ "${1:-}" = "--bench" ] && pkgs="$bench_pkgs"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages:$missing (run 'make deps' as root)" >&2
    exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2

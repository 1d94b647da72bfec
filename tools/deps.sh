#!/bin/sh
# Installs what building, testing and the demo need, from Debian packages, when
# missing. With --check, installs only if something is missing (make test, make demo).
set -eu
pkgs="build-essential pkg-config libhiredis-dev libcjson-dev libcmocka-dev redis-server redis-tools openjdk-17-jdk-headless libevent-dev valgrind clang clang-tidy cppcheck man-db faketime"
# Opt-in (--bench, used by make bench-peers): a peer make bench compares with
# (redis-py's Lock) and gnuplot for the report's plots.
bench_pkgs="python3-redis gnuplot-nox"
# Opt-in (--valkey, used by make test-valkey): the second server the suite runs
# against. Debian 12 has it only in bookworm-backports, which is added as an apt
# source of its own; apt pins backports low, so no other package changes origin.
valkey_pkgs="valkey-server"
backports=/etc/apt/sources.list.d/lockbridge-backports.sources
mode=${1:-}
release=""
case $mode in
--bench) pkgs="$bench_pkgs" ;;
--valkey) pkgs="$valkey_pkgs"; release="bookworm-backports" ;;
--check | "") ;;
*) echo "deps.sh: unknown option '$mode' (--check, --bench or --valkey)" >&2; exit 2 ;;
esac
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    case $mode in --bench | --valkey) how="sh tools/deps.sh $mode" ;; *) how="make deps" ;; esac
    echo "missing Debian packages:$missing (run '$how' as root)" >&2
    exit 1
fi
if [ -n "$release" ] && [ ! -e "$backports" ]; then
    echo "adding apt source $backports ($release)" >&2
    cat >"$backports" <<SOURCE
Types: deb
URIs: http://deb.debian.org/debian
Suites: $release
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCE
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends ${release:+-t "$release"} $missing >&2

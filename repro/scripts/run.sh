#!/bin/sh
# Installs what the reproduction needs (Debian packages, only the missing ones), builds the trainer, and
# runs it: `repro/scripts/run.sh demo` (the README's first command, through `make demo`) or
# `repro/scripts/run.sh repro`. Extra arguments go to rmsnorm-repro (e.g. --threads 2).
# Environment: BUILD_DIR (default build), JOBS (default 2).
set -eu
mode="${1:-demo}"
[ $# -gt 0 ] && shift
build="${BUILD_DIR:-build}"
jobs="${JOBS:-2}"
cd "$(dirname "$0")/../.."

# Build tools and the library's own dependencies, then the reproduction's: BLAS, zlib, the two data sets
# and gnuplot for the plots.
packages="cmake g++ pkg-config libhwy-dev libgtest-dev libopenblas-dev zlib1g-dev bible-kjv dataset-fashion-mnist gnuplot-nox"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing Debian packages:$missing"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j "$jobs" --target rmsnorm-repro
exec "$build/repro/rmsnorm-repro" "$mode" --out "report-$mode" "$@"

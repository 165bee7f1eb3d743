#!/bin/sh
# Installs the Debian packages specdec needs to build, test and draw figures.
# Safe to run again: it only calls apt-get when a package is missing.
set -eu
PKGS="build-essential libgsl-dev libglpk-dev glpk-utils libcmocka-dev gnuplot-nox"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "deps: all present ($PKGS)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "deps: need root (or sudo) to install:$missing" >&2; exit 1; fi
fi
echo "deps: installing:$missing"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing

#!/usr/bin/env bash
# Install a Debian package the tests need, where missing: ensure-debian-package.sh PACKAGE FILE-OR-COMMAND
# (present when FILE exists or COMMAND is on PATH). Needs root to install; otherwise says what to run
# and exits 1, and the test set-up warns that the tests needing it will be skipped.
set -euo pipefail
package=$1 present=$2
if [ -e "$present" ] || command -v "$present" >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null 2>&1 \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null; }
else
    echo "$package is not installed and installing it needs root: run 'sudo apt-get install $package'" >&2
    exit 1
fi

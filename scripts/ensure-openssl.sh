#!/usr/bin/env bash
# The openssl command for the TLS tests (tests/cluster/test_tls.py makes a throwaway CA and server
# certificate with it), from Debian's package, installed where missing.
set -euo pipefail
if command -v openssl >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null 2>&1 \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null; }
else
    echo "openssl is not installed and installing it needs root: run 'sudo apt-get install openssl'" >&2
    exit 1
fi

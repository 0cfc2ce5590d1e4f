#!/usr/bin/env bash
# The openssl command for the TLS tests (tests/cluster/test_tls.py makes a throwaway CA and server
# certificate with it), from Debian's package, installed where missing.
exec bash "$(dirname "$0")/ensure-debian-package.sh" openssl openssl

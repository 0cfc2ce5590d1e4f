#!/usr/bin/env bash
# Headless Chromium for the report's browser test (Debian's package), installed where missing.
exec bash "$(dirname "$0")/ensure-debian-package.sh" chromium chromium

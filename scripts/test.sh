#!/usr/bin/env bash
# The whole test suite from a fresh clone: set-up, lint, types, tests (Spark and browser included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/ensure-zookeeper.sh || echo "warning: ZooKeeper unavailable; cluster tests will be skipped" >&2
bash scripts/ensure-chromium.sh || echo "warning: headless Chromium unavailable; browser tests will be skipped" >&2
bash scripts/ensure-openssl.sh || echo "warning: openssl unavailable; TLS tests will be skipped" >&2
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
.venv/bin/ruff check src tests bench scripts examples
.venv/bin/ruff format --check src tests bench scripts examples
.venv/bin/mypy
.venv/bin/python -m pytest "$@"

#!/usr/bin/env bash
# The main job, end to end on local Spark: set-up, then `shedlab demo` (sweep → evaluate → report).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
.venv/bin/shedlab demo "$@"

#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv with shedlab and its dev tools.
# Idempotent: re-installs only when pyproject.toml or constraints.txt (the versions tested together)
# changed since the last successful install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "shedlab needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1))" >&2
    exit 1
fi
if ! command -v java >/dev/null 2>&1; then
    echo "Java 17 is needed by Spark; installing openjdk-17-jre-headless" >&2
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.shedlab-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -c constraints.txt -e ".[dev]"
    echo "$want" > "$stamp"
fi
.venv/bin/python -c 'import shedlab_example_strategy' 2>/dev/null || .venv/bin/python -m pip install --quiet --no-deps -e examples/plugins/shedlab-example-strategy

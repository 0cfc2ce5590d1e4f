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
    # Java is only needed by the Spark commands (sweep, evaluate, ingest, replay, demo); installing it needs
    # root, so say what is about to happen, and what to do when we cannot do it.
    if [ "$(id -u)" -eq 0 ]; then
        SUDO=""
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo"
    else
        echo "Java 17 is needed by Spark (shedlab sweep, evaluate, ingest, replay, demo) and java is not on" >&2
        echo "the PATH. Installing it needs root: run 'sudo apt-get install openjdk-17-jre-headless' (or install" >&2
        echo "any Java 17 and put it on the PATH, or set JAVA_HOME), then run scripts/bootstrap.sh again." >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "Java 17 is needed by Spark and java is not on the PATH; this system has no apt-get:" >&2
        echo "install a Java 17 runtime with your package manager, then run scripts/bootstrap.sh again." >&2
        exit 1
    fi
    echo "Java 17 is needed by Spark; installing openjdk-17-jre-headless with ${SUDO:-root} apt-get" >&2
    if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }; then
        echo "installing openjdk-17-jre-headless failed (see apt-get's message above); install a Java 17" >&2
        echo "runtime yourself, then run scripts/bootstrap.sh again." >&2
        exit 1
    fi
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

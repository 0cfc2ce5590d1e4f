#!/usr/bin/env bash
# Mutation testing of the decision core with mutmut (docs/mutation-testing.md).
#
# Runs OUTSIDE CI: mutmut is not a project dependency. Install it into the venv first:
#     .venv/bin/pip install mutmut        # tested with mutmut 3.8.1
#
# Usage:  scripts/mutation-test.sh [TARGET ...]
#   TARGET is a source file or directory under src/shedlab (default: the four targets below).
#   MUTATION_DIR   where the scratch copy lives (default: /tmp/shedlab-mutation); reused between runs,
#                  so a second run only retests what changed. Delete it to start from scratch.
#   MUTATION_JOBS  worker processes (default: 1; the machine is shared).
#
# Why a scratch copy: mutmut writes a mutated copy of the tree to ./mutants and reads its settings from
# setup.cfg; doing that in a copy keeps the worktree clean and lets us give mutmut its own settings
# without touching pyproject.toml. Only the fast unit tests run (no Spark, browser, ZooKeeper or slow
# tests): the strategy, manager and simulator tests, plus the model tests the strategies rely on.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
WORK="${MUTATION_DIR:-/tmp/shedlab-mutation}"
JOBS="${MUTATION_JOBS:-1}"
if [ "$#" -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=(src/shedlab/strategies/ src/shedlab/manager/ src/shedlab/core/sim/publishing.py
    src/shedlab/core/sim/metrics.py)
fi

"$PY" -c "import mutmut" 2>/dev/null || {
  echo "mutmut is not installed: run $ROOT/.venv/bin/pip install mutmut (it is not a project dependency)" >&2
  exit 2
}

mkdir -p "$WORK"
# Sources, tests and the documents tests read, copied afresh (cp -a keeps mtimes, which mutmut's cache uses).
for d in src tests docs; do
  rm -rf "${WORK:?}/$d"
  cp -a "$ROOT/$d" "$WORK/$d"
done
cp "$ROOT/pyproject.toml" "$ROOT/README.md" "$WORK/"

ONLY=""
for t in "${TARGETS[@]}"; do
  t="${t#./}"
  case "$t" in
    *.py) ONLY+="    $t"$'\n' ;;
    *) ONLY+="    ${t%/}/*.py"$'\n' ;;
  esac
done

cat >"$WORK/setup.cfg" <<EOF
[mutmut]
source_paths = src
also_copy =
    docs
    README.md
only_mutate =
$ONLY
do_not_mutate =
    src/shedlab/strategies/__init__.py
    src/shedlab/manager/__init__.py
pytest_add_cli_args_test_selection =
    tests/strategies
    tests/manager
    tests/core/sim
pytest_add_cli_args =
    -p
    no:cacheprovider
    -m
    not spark and not browser and not zookeeper and not slow
EOF

cd "$WORK"
# The original sources must not shadow the mutated copy.
unset PYTHONPATH
echo "mutating: ${TARGETS[*]} (in $WORK, $JOBS worker)" >&2
"$PY" -m mutmut run --max-children "$JOBS" >"$WORK/run.log" 2>&1 || {
  tail -30 "$WORK/run.log" >&2
  exit 1
}
"$PY" -m mutmut results --all true >"$WORK/results.txt" 2>&1 || "$PY" -m mutmut results >"$WORK/results.txt"
"$PY" "$ROOT/scripts/mutation-score.py" "$WORK/results.txt"

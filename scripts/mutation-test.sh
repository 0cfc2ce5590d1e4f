#!/usr/bin/env bash
# Mutation testing of the decision core with mutmut (docs/mutation-testing.md).
#
# Runs OUTSIDE CI: mutmut is not a project dependency. Install it into the venv first:
#     .venv/bin/pip install mutmut        # tested with mutmut 3.8.1
#
# Usage:  scripts/mutation-test.sh [GROUP ...]      (default: shedders placement manager sim)
#   shedders   the Pulsar shedding strategies and their shared helpers
#              (avg_shedder, threshold_shedder, uniform_load_shedder, overload_shedder, greedy, base)
#   placement  least_resource_usage_with_weight, least_long_term_message_rate
#   manager    manager/loop.py
#   sim        core/sim/publishing.py and core/sim/metrics.py (or one of them: publishing, metrics)
#   extra      the rest of strategies/: transfer_shedder, capacity_aware, extensible_*, registry
#              (or one part of it: transfer, capacity, extensible, registry)
#   all        every group above
# Each group mutates its files and runs only the fast unit tests that exercise them (no Spark,
# browser, ZooKeeper or slow tests), in its own scratch copy MUTATION_DIR/<group> (default
# /tmp/shedlab-mutation/<group>), which is reused: a second run retests only what changed.
#   MUTATION_JOBS  worker processes (default: 1; the machine is shared).
#   MUTATION_RETEST=1  after adding tests: retest only the mutants a previous run of the group did not
#                  kill (mutmut keeps earlier verdicts otherwise), then report the whole group again.
#
# Why a scratch copy: mutmut writes a mutated copy of the tree to ./mutants and reads its settings from
# setup.cfg; doing that in a copy keeps the worktree clean and lets us give mutmut its own settings
# without touching pyproject.toml.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
BASE="${MUTATION_DIR:-/tmp/shedlab-mutation}"
JOBS="${MUTATION_JOBS:-1}"
S=src/shedlab/strategies

group_targets() {
  case "$1" in
    shedders)
      echo "$S/avg_shedder.py $S/threshold_shedder.py $S/uniform_load_shedder.py $S/overload_shedder.py" \
        "$S/greedy.py $S/base.py"
      ;;
    placement) echo "$S/least_resource_usage_with_weight.py $S/least_long_term_message_rate.py" ;;
    manager) echo "src/shedlab/manager/loop.py" ;;
    sim) echo "src/shedlab/core/sim/publishing.py src/shedlab/core/sim/metrics.py" ;;
    publishing) echo "src/shedlab/core/sim/publishing.py" ;;
    metrics) echo "src/shedlab/core/sim/metrics.py" ;;
    extra)
      echo "$S/transfer_shedder.py $S/capacity_aware.py $S/extensible_data.py" \
        "$S/extensible_least_resource_usage_with_weight.py $S/registry.py"
      ;;
    transfer) echo "$S/transfer_shedder.py" ;;
    capacity) echo "$S/capacity_aware.py" ;;
    extensible) echo "$S/extensible_data.py $S/extensible_least_resource_usage_with_weight.py" ;;
    registry) echo "$S/registry.py" ;;
    *)
      echo "unknown group '$1' (shedders, placement, manager, sim, publishing, metrics, extra, transfer," \
        "capacity, extensible, registry, all)" >&2
      return 2
      ;;
  esac
}

group_tests() {
  case "$1" in
    shedders | placement | extra | transfer | capacity | extensible | registry) echo "tests/strategies tests/manager" ;;
    manager) echo "tests/manager tests/strategies tests/core/sim/test_sim_mechanisms.py" ;;
    # the simulator's unit tests and the kernel tests (whole small runs); the slower property and
    # mechanism tests are left out to keep a run under an hour on one core
    sim | publishing | metrics)
      echo "tests/core/sim/test_metric_values.py tests/core/sim/test_sim_metrics.py" \
        "tests/core/sim/test_publishing_thresholds.py tests/core/sim/test_sim_publishing.py" \
        "tests/core/sim/test_publishing_values.py" \
        "tests/core/sim/test_sim_kernel.py"
      ;;
  esac
}

"$PY" -c "import mutmut" 2>/dev/null || {
  echo "mutmut is not installed: run $ROOT/.venv/bin/pip install mutmut (it is not a project dependency)" >&2
  exit 2
}

run_group() {
  local group="$1"
  local work="$BASE/$group" only="" tests="" t d
  mkdir -p "$work"
  # Sources, tests and the documents tests read, copied afresh (cp -a keeps mtimes, which mutmut's cache uses).
  for d in src tests docs; do
    rm -rf "${work:?}/$d"
    cp -a "$ROOT/$d" "$work/$d"
  done
  cp "$ROOT/pyproject.toml" "$ROOT/README.md" "$work/"
  for t in $(group_targets "$group"); do only+="    $t"$'\n'; done
  for t in $(group_tests "$group"); do tests+="    $t"$'\n'; done
  {
    echo "[mutmut]"
    echo "source_paths = src"
    printf 'also_copy =\n    docs\n    README.md\n'
    printf 'only_mutate =\n%s' "$only"
    printf 'pytest_add_cli_args_test_selection =\n%s' "$tests"
    printf 'pytest_add_cli_args =\n    -p\n    no:cacheprovider\n    -m\n'
    echo "    not spark and not browser and not zookeeper and not slow"
  } >"$work/setup.cfg"
  echo "== $group: $(group_targets "$group" | wc -w) files; tests: $(group_tests "$group"); in $work" >&2
  (
    cd "$work"
    unset PYTHONPATH # the original sources must not shadow the mutated copy
    local names=()
    if [ "${MUTATION_RETEST:-0}" = 1 ] && [ -f "$work/results.txt" ]; then
      mapfile -t names < <(grep -v ': killed$' "$work/results.txt" | sed -n 's/^ *\([^ ]*__mutmut_[0-9]*\): .*/\1/p')
      echo "   retesting ${#names[@]} mutants not killed before" >&2
      [ "${#names[@]}" -gt 0 ] || return 0
      # mutmut 3.8 collects the coverage of tests added since its last run during a run, but the mutants
      # of that same run can still be tried with the old test map (seen here: a killing test not run).
      # One cheap run of a single killed mutant brings the map up to date first.
      local first_killed
      first_killed="$(sed -n '/: killed$/{s/^ *\([^ ]*__mutmut_[0-9]*\): killed$/\1/p;q;}' "$work/results.txt")"
      if [ -n "$first_killed" ]; then
        "$PY" -m mutmut run --max-children "$JOBS" "$first_killed" >"$work/refresh.log" 2>&1 || true
      fi
    fi
    if ! "$PY" -m mutmut run --max-children "$JOBS" "${names[@]}" >"$work/run.log" 2>&1; then
      tail -30 "$work/run.log" >&2
      exit 1
    fi
    "$PY" -m mutmut results --all true >"$work/results.txt" 2>&1
  )
}

groups=("$@")
if [ "${#groups[@]}" -eq 0 ]; then groups=(shedders placement manager sim); fi
if [ "${groups[0]}" = all ]; then groups=(shedders placement manager sim extra); fi
results=()
for g in "${groups[@]}"; do
  group_targets "$g" >/dev/null
  run_group "$g"
  results+=("$BASE/$g/results.txt")
done
"$PY" "$ROOT/scripts/mutation-score.py" "${results[@]}"

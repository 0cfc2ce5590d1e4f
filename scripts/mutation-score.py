"""Summarise ``mutmut results --all true`` outputs (one or more files) per module.

This is the mutation score that scripts/mutation-test.sh prints.

A mutant counts as killed when a test failed on it or it timed out (an infinite loop the tests
caught). Everything else ("survived", "no tests", "suspicious", "not checked") counts against the
score, so a module with no covering tests scores 0, not 100. Survivors are listed for
docs/mutation-testing.md.
"""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

KILLED = {"killed", "timeout", "caught by type check"}
LINE = re.compile(r"^\s*(?P<key>[\w.]+)__mutmut_(?P<n>\d+): (?P<status>.+)$")


def module_of(key: str) -> str:
    """``shedlab.strategies.greedy.x_java_int`` → ``shedlab.strategies.greedy``."""
    parts = key.split(".")
    while parts and (parts[-1].startswith(("x_", "x\u01c1")) or "\u01c1" in parts[-1]):
        parts.pop()
    return ".".join(parts)


def main(paths: list[str]) -> int:
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[str] = []
    lines = [line for path in paths for line in Path(path).read_text(encoding="utf-8").splitlines()]
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        status = m["status"].strip()
        module = module_of(m["key"])
        by_module[module][status] += 1
        if status not in KILLED:
            survivors.append(f"{m['key']}__mutmut_{m['n']}: {status}")
    total_killed = total = 0
    print(f"{'module':55} {'killed':>7} {'total':>6} {'score':>7}")
    for module in sorted(by_module):
        counts = by_module[module]
        killed = sum(counts[s] for s in KILLED)
        n = sum(counts.values())
        total_killed += killed
        total += n
        print(f"{module:55} {killed:7d} {n:6d} {100 * killed / n:6.1f}%")
    if total:
        print(f"{'ALL':55} {total_killed:7d} {total:6d} {100 * total_killed / total:6.1f}%")
    print(f"\n{len(survivors)} not killed:")
    for s in survivors:
        print("  " + s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

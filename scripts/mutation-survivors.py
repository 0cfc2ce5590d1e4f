"""Print the diff of every mutant that was not killed, read from a mutmut 3 scratch copy.

Usage: python scripts/mutation-survivors.py /tmp/shedlab-mutation/<group> [...]

``mutmut show`` starts a process per mutant; this reads the mutated functions that mutmut wrote into
``mutants/`` directly and diffs each against its ``__mutmut_orig`` twin, which takes a second for a
few hundred survivors. Each diff is headed by the file, the line of the original function and the
mutant's name, the form docs/mutation-testing.md's table uses.
"""

from __future__ import annotations

import ast
import difflib
import re
import sys
from pathlib import Path

SKIP = {"killed", "timeout", "caught by type check", "not checked"}
"""Statuses left out: the killed ones, and those not run yet (a run still under way)."""
LINE = re.compile(r"^\s*(?P<name>[\w.\u01c1]+__mutmut_\d+): (?P<status>.+)$")


def functions(path: Path) -> dict[str, tuple[str, int]]:
    """Every top-level or method-level function of a mutated file: name → (source, first line)."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.splitlines()  # sliced by line numbers: ast.get_source_segment re-splits the file per call
    out: dict[str, tuple[str, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in node.name:
            end = node.end_lineno or node.lineno
            out[node.name] = ("\n".join(lines[node.lineno - 1 : end]), node.lineno)
    return out


def original_lines(source: Path) -> dict[str, int]:
    """Line of each function (and method, as ``Class.method``) in the unmutated source."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    lines: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            lines[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    lines[f"{node.name}.{item.name}"] = item.lineno
    return lines


def main(groups: list[str]) -> int:
    for group in map(Path, groups):
        cache: dict[Path, dict[str, tuple[str, int]]] = {}
        lines_of: dict[Path, dict[str, int]] = {}
        for raw in (group / "results.txt").read_text(encoding="utf-8").splitlines():
            m = LINE.match(raw)
            if not m or m["status"].strip() in SKIP:
                continue
            full = m["name"]
            module, _, func = full.rpartition(".x")
            func = "x" + func
            rel = Path("src") / (module.replace(".", "/") + ".py")
            mutated = group / "mutants" / rel
            if mutated not in cache:
                cache[mutated] = functions(mutated)
            table = cache[mutated]
            base = func.rsplit("__mutmut_", 1)[0]
            mutant_src = table.get(func, ("", 0))[0]
            orig_src = table.get(base + "__mutmut_orig", ("", 0))[0]
            plain = base[2:].replace("\u01c1", ".").strip(".")
            if rel not in lines_of:
                lines_of[rel] = original_lines(group / rel)
            line = lines_of[rel].get(plain, 0)
            print(f"### {rel}:{line} {plain} {full.rsplit('__', 1)[1]} ({m['status'].strip()})")
            a = [line.replace(base + "__mutmut_orig", base) for line in orig_src.splitlines()]
            b = [line.replace(func, base) for line in mutant_src.splitlines()]
            for d in difflib.unified_diff(a, b, lineterm="", n=0):
                if d.startswith(("+++", "---", "@@")):
                    continue
                print("   " + d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The folder tree is the architecture: imports go one way, and only ``spark/`` touches PySpark.

Layers, lowest first (``docs/architecture.md``):

0. foundation: ``shedlab.errors``, ``shedlab.units``, ``shedlab.jsonout``, ``shedlab.kernels`` and
   ``shedlab.shed_kernels`` (compiled array loops)
1. Pulsar's model: ``shedlab.config``, ``shedlab.model``
2. ``shedlab.strategies``
3. ``shedlab.manager``
4. core services: ``shedlab.core`` (simulator, replay, grid, results, evaluation, ingest rules,
   decide, conformance)
5. ``shedlab.spark`` (orchestration only)
6. ``shedlab.report`` (reads results through the core; never through Spark)
7. the faces: ``shedlab.cli`` (the command line) and ``shedlab.api`` (the notebook API)

A module may import its own layer and the layers below it, nothing above. Every import counts, lazy ones
inside functions and ``TYPE_CHECKING`` blocks included, since each is a dependency a reader must know.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "shedlab"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("shedlab.errors", "shedlab.units", "shedlab.jsonout", "shedlab.kernels", "shedlab.shed_kernels"),
    ("shedlab.config", "shedlab.model"),
    ("shedlab.strategies",),
    ("shedlab.manager",),
    ("shedlab.core",),
    ("shedlab.cluster",),
    ("shedlab.spark",),
    ("shedlab.report",),
    ("shedlab.cli", "shedlab.api"),
)
# The report sits above Spark in the tree but must not depend on it: it reads results files.
FORBIDDEN = {"shedlab.report": ("shedlab.spark",)}
# The package itself and ``python -m shedlab`` are entry points: they may reach any layer.
ENTRY_POINTS = ("shedlab", "shedlab.__main__")


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int | None:
    for level, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return level
    return None


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
    return found


SOURCES = sorted(SRC.rglob("*.py"))


def test_every_module_belongs_to_a_layer() -> None:
    orphans = [m for m in map(module_name, SOURCES) if m not in ENTRY_POINTS and layer_of(m) is None]
    assert orphans == [], "add these modules to a layer (tests/test_architecture.py, docs/architecture.md)"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_go_one_way(path: Path) -> None:
    me = module_name(path)
    if me in ENTRY_POINTS:
        return
    my_layer = layer_of(me)
    assert my_layer is not None
    upward = []
    for line, target in imported_modules(path):
        if target.startswith(("pyspark", "py4j")) and not me.startswith("shedlab.spark"):
            upward.append(f"line {line}: {target} (only shedlab.spark may import PySpark)")
        if not target.startswith("shedlab"):
            continue
        level = layer_of(target)
        if level is not None and level > my_layer:
            upward.append(f"line {line}: {target} (layer {level} > {my_layer})")
        for prefix, banned in FORBIDDEN.items():
            if me.startswith(prefix) and target.startswith(banned):
                upward.append(f"line {line}: {target} ({prefix} must not depend on {', '.join(banned)})")
    assert upward == [], f"{me} imports upward:\n" + "\n".join(upward)

"""The HTML report: one self-contained file (plotly.js inline) from any shedlab results directory.

>>> from pathlib import Path
>>> from shedlab.report import build_report
>>> build_report(Path("out/demo"), Path("out/demo/report.html"))  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from shedlab.errors import InputError
from shedlab.report.load import load_results
from shedlab.report.model import ReplayData, ReportData, RunSeries, ScenarioInfo
from shedlab.report.page import render_page

__all__ = [
    "ReplayData",
    "ReportData",
    "RunSeries",
    "ScenarioInfo",
    "build_report",
    "load_results",
    "render_page",
]


def build_report(results_dir: Path, out: Path, *, max_points: int = 2000, title: str | None = None) -> Path:
    """Read ``results_dir`` (sweep + evaluate, simulate, compare or replay output), write the report to
    ``out`` and return its path. ``max_points`` caps the points of every trace (time series are
    decimated, keeping each bucket's minimum and maximum)."""
    if max_points < 10:
        raise InputError("must be at least 10", field="max points", value=max_points)
    target = Path(out)
    if target.is_dir():
        target = target / "report.html"
    _refuse_overwriting_results(target)
    data = load_results(Path(results_dir))
    if title:
        data.title = title
    document = render_page(data, max_points=max_points)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(document, encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        raise InputError(f"cannot write the report: {exc.strerror}", source=str(target)) from None
    return target


def _refuse_overwriting_results(target: Path) -> None:
    """Refuse to write the report over an existing file that is not an HTML page (``report RES --out
    RES/summary.json`` replaced the results it reported); an earlier report, or an empty file, is
    replaced."""
    if not target.is_file():
        return
    try:
        with target.open("rb") as src:
            head = src.read(64).lstrip().lower()
    except OSError:
        return  # the write says why it cannot
    if head and not head.startswith((b"<!doctype html", b"<html")):
        raise InputError(
            "exists and is not an HTML page: the report would replace it",
            source=str(target),
            hint="name a new .html file for --out",
        )

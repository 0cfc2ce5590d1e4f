"""The HTML report: one self-contained file (plotly.js inline) from any shedlab results directory.

>>> from pathlib import Path
>>> from shedlab.report import build_report
>>> build_report(Path("out/demo"), Path("out/demo/report.html"))  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from shedlab.core.results import check_output_file, resolved_local_path
from shedlab.errors import InputError, one_line
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
    decimated, keeping each bucket's minimum and maximum). A ``title`` with a control character or a line
    break (``--title "$(cmd)"`` with its newline) is refused: it was written into the page's heading and
    its ``<title>``, where a browser shows neither, silently."""
    if max_points < 10:
        raise InputError("must be at least 10", field="max points", value=max_points)
    if title is not None and one_line(title) != title:
        raise InputError("holds a control character or a line break", field="--title", value=title)
    target = Path(out)
    if target.is_dir():
        target = target / "report.html"
    if target.is_symlink():
        # written to a temporary file and moved into place: that replaced the link itself, and the file it
        # points to (a web server's copy) stayed as it was; a loop of links is refused naming it
        target = resolved_local_path(str(target)) or target
    check_output_file(str(target), "report")  # a new path, an empty file or an earlier report
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

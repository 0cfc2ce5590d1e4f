"""Versions of everything a report depends on, so the report can be reproduced.

PySpark's version is read from the installed distribution's metadata (never by importing it: that
would start nothing but costs seconds); Java's from ``java -version``, guarded so that a missing or
broken Java only yields "not found".
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import shedlab

__all__ = ["environment_versions", "java_version", "package_version"]


def package_version(name: str) -> str:
    """The installed version of a distribution, or ``"not installed"``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("java")


def java_version(timeout: float = 10.0) -> str:
    """The first line of ``java -version`` (e.g. ``openjdk version "17.0.15" 2025-04-15``)."""
    java = _java_executable()
    if java is None:
        return "not found"
    try:
        proc = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable ({type(exc).__name__})"
    text = (proc.stderr or proc.stdout or "").strip()
    if proc.returncode != 0 or not text:
        return f"unavailable (exit {proc.returncode})"
    first = text.splitlines()[0].strip()
    match = re.search(r'version "([^"]+)"', first)
    vendor = first.split(" version", 1)[0].strip()
    return f"{match.group(1)} ({vendor})" if match else first


def environment_versions() -> dict[str, str]:
    """shedlab, Python, PySpark, Java and the libraries that shape the numbers and plots."""
    return {
        "shedlab": shedlab.__version__,
        "Python": f"{platform.python_version()} ({platform.python_implementation()}, {sys.executable})",
        "PySpark": package_version("PySpark"),  # the distribution name; nothing is imported
        "Java": java_version(),
        "numpy": package_version("numpy"),
        "pandas": package_version("pandas"),
        "pyarrow": package_version("pyarrow"),
        "plotly": package_version("plotly"),
        "Platform": platform.platform(),
    }

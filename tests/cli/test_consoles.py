"""The command line's consoles: user text printed as written, tables whole in files and pipes."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from shedlab.cli.consoles import make_console, print_table


def _seven_pairs() -> Table:
    table = Table("metric")
    for i in range(7):
        table.add_column(f"Threshold+LLTMR{i}", justify="right")
    table.add_row("msg rate moved (msg/s)", *["281,072,392"] * 7)
    return table


def _printed(monkeypatch: pytest.MonkeyPatch, columns: str | None) -> str:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    console = make_console()
    console.file = io.StringIO()
    print_table(console, _seven_pairs())
    text = console.file.getvalue()
    assert isinstance(text, str)
    return text


def test_a_table_into_a_file_keeps_its_numbers_and_names_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _printed(monkeypatch, None)
    assert text.count("281,072,392") == 7 and "Threshold+LLTMR6" in text and "…" not in text
    assert "msg rate moved (msg/s)" in text


def test_columns_still_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """COLUMNS=80 (a user's choice, or a test's) gets the 80-column table rich makes."""
    text = _printed(monkeypatch, "80")
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("281,072,392") < 7


def test_emoji_codes_print_as_written() -> None:
    console = make_console()
    console.file = io.StringIO()
    console.print("strategy mystrat:Boom: raised")
    assert console.file.getvalue() == "strategy mystrat:Boom: raised\n"

"""``shedlab decide``'s table at 80 columns: no number of a reason is broken across lines."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shedlab.cli import app
from shedlab.units import general

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snapshot.json"


@pytest.mark.parametrize(
    "strategy", [["ThresholdShedder+LeastResourceUsageWithWeight"], ["AvgShedder", "--cycles", "2"]]
)
def test_reasons_keep_numbers_whole_at_80_columns(strategy: list[str]) -> None:
    runner = CliRunner()
    args = ["decide", str(EXAMPLE), "--strategy", *strategy]
    decided = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    result = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 80 and "…" not in result.stdout
    words = set(re.findall(r"[^\s│]+", result.stdout))
    reasons = [decision["reason"] for decision in decided["unload"]] + decided["skipped"]
    numbers = [general(v) for reason in reasons for k, v in reason.items() if isinstance(v, float)]
    assert numbers, decided
    assert not [n for n in numbers if n not in words]
    for decision in decided["unload"]:
        assert decision["broker"] in words and decision["bundle"].rpartition("/")[2] in words


def test_set_changes_the_decision() -> None:
    runner = CliRunner()
    args = ["decide", str(EXAMPLE), "--strategy", "ThresholdShedder+LeastResourceUsageWithWeight", "--json"]
    before = json.loads(runner.invoke(app, args).stdout)
    after = json.loads(
        runner.invoke(app, [*args, "--set", "loadBalancerBrokerThresholdShedderPercentage=95"]).stdout
    )
    assert before["unload"] and not after["unload"]


def test_a_usage_beyond_floats_range_decides_as_java_without_warnings(tmp_path: Path) -> None:
    """1e308 is a valid double: Java's float cast makes it Infinity and the arithmetic NaN, silently."""
    text = EXAMPLE.read_text(encoding="utf-8")
    huge = re.sub(r'"usage": [0-9.]+', '"usage": 1e308', text, count=1)
    assert huge != text
    (tmp_path / "huge.json").write_text(huge, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning would be a line on the user's stderr
        result = CliRunner().invoke(app, ["decide", str(tmp_path / "huge.json"), "--json"])
    assert result.exit_code == 0, result.output
    decided = json.loads(result.stdout, parse_constant=_refuse)  # strict JSON: its NaNs are null
    assert decided["unload"] and decided["unload"][0]["reason"]["usage_now"] is None


def _refuse(constant: str) -> object:
    raise AssertionError(f"not JSON: {constant}")


def test_a_gzipped_load_data_document_is_read(tmp_path: Path) -> None:
    """``snapshot.json.gz`` decides as ``snapshot.json`` does (a recording's ``.jsonl.gz`` is read): it was
    refused as 'a LoadData document among load reports: give it on its own', which it was."""
    import gzip

    path = tmp_path / "snapshot.json.gz"
    path.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    args = ["--strategy", "AvgShedder", "--json"]
    plain = CliRunner().invoke(app, ["decide", str(EXAMPLE), *args])
    zipped = CliRunner().invoke(app, ["decide", str(path), *args])
    assert zipped.exit_code == 0, zipped.output
    assert json.loads(zipped.stdout)["unload"] == json.loads(plain.stdout)["unload"]

#!/usr/bin/env python3
"""Write the shipped demo recording: ``src/shedlab/data/recordings/demo/load-reports.jsonl.gz``.

The recording is what polling every broker's ``load-report`` endpoint once a minute would have captured
on a cluster running Pulsar's old default ThresholdShedder + LeastLongTermMessageRate with Pulsar's
default settings. The cluster is simulated from ``producer.yaml`` next to it (its seed fixes every
random choice), so the file is the same on every machine: the gzip header carries no name and no time.

    .venv/bin/python scripts/make-demo-recording.py          # rewrite it
    .venv/bin/python scripts/make-demo-recording.py --check  # exit 1 if the shipped file differs
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
from pathlib import Path

from shedlab.core.sim import load_scenario, run_simulation
from shedlab.core.sim.recording import iter_load_reports

HERE = Path(__file__).resolve().parent.parent / "src" / "shedlab" / "data" / "recordings" / "demo"


def recording_bytes() -> bytes:
    """The gzip-compressed JSON lines of the producer scenario's recording (deterministic)."""
    result = run_simulation(load_scenario(HERE / "producer.yaml"), record=True)
    text = io.StringIO()
    for line in iter_load_reports(result):
        text.write(json.dumps(line, separators=(",", ":")) + "\n")
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as fh:
        fh.write(text.getvalue().encode("utf-8"))
    return buffer.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file, write nothing")
    args = parser.parse_args()
    target = HERE / "load-reports.jsonl.gz"
    data = recording_bytes()
    if args.check:
        same = target.is_file() and target.read_bytes() == data
        print(f"{target}: {'identical' if same else 'DIFFERS'}")
        return 0 if same else 1
    target.write_bytes(data)
    print(f"wrote {target} ({len(data) / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

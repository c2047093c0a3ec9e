"""The seeded fuzz corpus over every file reader (#17; the corpus and its oracle: fuzz_readers.py).

1,200 mutated files must give 0 tracebacks, 0 signals, 0 errors without the file's name, 0 silent
accepts of invalid input, 0 hangs (5 s each) and at most 500 MB of memory. About 80 s of wall
time on 2 shared cores (mostly fsyncs of the importers), so it is marked slow;
``LABLEDGER_FUZZ_LONG=1`` runs 20,000 cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import labledger

HERE = Path(__file__).resolve().parent
SRC = str(Path(labledger.__file__).resolve().parents[1])


@pytest.mark.scale  # minutes of CPU: `pytest -m scale`, a CI step of its own
@pytest.mark.timeout(900)
def test_fuzz_corpus_every_reader_fails_cleanly_or_reads_correctly():
    long = os.environ.get("LABLEDGER_FUZZ_LONG") == "1"
    cases = 20000 if long else 1200
    res = subprocess.run(
        [sys.executable, str(HERE / "fuzz_readers.py"), "--cases", str(cases), "--seed", "0"],
        capture_output=True,
        text=True,
        timeout=3600 if long else 300,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert res.returncode == 0, (
        f"the fuzz worker died (exit {res.returncode}: a signal if negative)\n{res.stderr[-3000:]}"
    )
    report = json.loads(res.stdout)
    counts = report["counts"]
    assert sum(counts.get(k, 0) for k in ("ok", "clean_error")) == cases, report["failures"]
    for bad in ("traceback", "unnamed_error", "silent_accept", "hang"):
        assert counts.get(bad, 0) == 0, (bad, report["failures"])
    assert report["peak_rss_growth_mb"] < 500
    assert counts.get("ok", 0) > 100 and counts.get("clean_error", 0) > 100  # the corpus exercises both

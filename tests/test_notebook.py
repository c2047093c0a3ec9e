"""A real notebook (nbclient + ipykernel): runs finish with their `with` block or finish(), and display as HTML (#14)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import labledger

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_notebook_runs_finish_and_display(tmp_path, monkeypatch):
    ledger = tmp_path / "ledger"
    cells = [
        "import labledger, sys\n"
        f"ledger = {str(ledger)!r}\n"
        "hooks = {k: len(v) for k, v in get_ipython().events.callbacks.items()}",
        "with labledger.start_run('nb<script>', ledger=ledger, config={'lr': 0.1}) as run:\n"
        "    for step in range(5):\n"
        "        run.log(step, loss=1.0 / (step + 1))\n"
        "    run.set_summary(best=0.2)\n"
        "view = labledger.open_ledger(ledger).run(run.id)\n"
        "view",
        "with labledger.start_run('fails', ledger=ledger) as bad:\n    raise ValueError('boom')",
        "open_run = labledger.start_run('open', ledger=ledger)\nopen_run.log(0, x=1.0)",
        "1 / 0  # a failing cell outside `with` leaves the open run alone",
        "open_run.finish()\n"
        "import labledger.wandb as wandb\n"
        "after = {k: len(v) for k, v in get_ipython().events.callbacks.items()}\n"
        "assert after == hooks, (hooks, after)\n"
        "print([r.status for r in labledger.open_ledger(ledger).runs()])",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src"))
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True)
    client.execute()
    outs = [c.outputs for c in nb.cells]
    html = outs[1][0]["data"]["text/html"]
    assert "nb&lt;script&gt;" in html and "<script" not in html and "<svg" in html and "loss" in html
    assert "lr" in html and "best" in html
    assert outs[2][0]["ename"] == "ValueError" and outs[4][0]["ename"] == "ZeroDivisionError"
    assert all(o.get("output_type") != "error" for o in outs[0] + outs[1] + outs[3] + outs[5])
    runs = {r.name: r.status for r in labledger.open_ledger(ledger).runs()}
    assert runs == {"nb<script>": "finished", "fails": "failed", "open": "finished"}
    assert sys.executable  # the kernel is this environment's python3
    assert os.environ["PYTHONPATH"] == str(ROOT / "src")


@pytest.mark.slow
def test_notebook_displays_documents(tmp_path, monkeypatch):
    """Evaluation, comparison, calibration report and version table display as escaped HTML tables."""
    setup = (
        "import labledger\n"
        "from labledger.analysis.benchmarks import Entry, version_table\n"
        "from labledger.calibrate import fit, report\n"
        "rows = [{'id': i, 'task': '<t>', 'gold': 'yes' if i % 3 == 0 else 'no', 'split': 'dev' if i < 30 else 'test',\n"
        "         'probs': {'yes': 0.35 + 0.3 * (i % 3 == 0), 'no': 0.65 - 0.3 * (i % 3 == 0)}} for i in range(60)]\n"
        "worse = [{**r, 'probs': {'yes': 0.5, 'no': 0.5}} for r in rows]"
    )
    cells = [
        setup,
        "labledger.evaluate(rows, resamples=50)",
        "labledger.compare(rows, worse, resamples=50)",
        "report(rows, fit(rows, method='threshold', positive='yes', fit_split='split=dev'), resamples=50)",
        "version_table([Entry(model=m, suite='s', benchmark='b', metric='accuracy', value=v) for m, v in "
        "(('<m1>', 0.5), ('m2', 0.75))], suite='s', models=['<m1>', 'm2'], delta_from='<m1>')",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src"))
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    pages = [c.outputs[0]["data"]["text/html"] for c in nb.cells[1:]]
    for page, kind in zip(pages, ("evaluation", "comparison", "calibration", "version-table"), strict=True):
        assert f'class="labledger-{kind}"' in page and "<script" not in page and "<table" in page
    assert "&lt;t&gt;" in pages[0] and "95% CI" in pages[0] and "accuracy" in pages[0]
    assert "A - B" in pages[1] and "p adjusted" in pages[1]
    assert "calibrated" in pages[2] and "Definitions" in pages[2]
    assert "&lt;m1&gt;" in pages[3] and "0.2500" in pages[3]

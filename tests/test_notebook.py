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

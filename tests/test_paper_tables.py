"""`labledger table --format latex|md`: each value with its interval and n, the delta's adjusted p,
a footnote of definitions, and the sha256 of the predictions behind the cells (#45)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

import labledger
from labledger.cli import main


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """Two models scored on the same 400 items of two benchmarks, each evaluation saved under its model."""
    root = tmp_path_factory.mktemp("paper") / "l"
    rng = np.random.default_rng(5)
    gold = {b: rng.integers(0, 2, 400) for b in ("mmlu_sub", "arc&easy")}
    r = CliRunner()
    for model, err in (("base", 0.3), ("v2_big", 0.2)):
        rows = [
            {"id": f"{b}-{i}", "task": b, "gold": "ny"[g], "pred": "ny"[g if rng.random() > err else 1 - g]}
            for b, gs in gold.items()
            for i, g in enumerate(gs)
        ]
        with labledger.start_run(model, ledger=root) as run:
            run.log_results("test", rows)
        for k, b in enumerate(gold):
            args = ["eval", f"{model}:test", "--task", b, "--metric", "accuracy", "--save", f"{model}:ev-{k}"]
            res = r.invoke(main, [*args, "--model", model, "--suite", "paper", "--ledger", str(root)])
            assert res.exit_code == 0, res.output
    return str(root)


def _table(ledger, fmt):
    args = ["table", "--suite", "paper", "--delta-from", "base", "--ledger", ledger]
    res = CliRunner().invoke(main, [*args, "--format", fmt])
    assert res.exit_code == 0, res.output
    return res.output, json.loads(CliRunner().invoke(main, [*args, "--json"]).output)


def test_latex_carries_each_interval_n_and_adjusted_p_with_a_footnote(ledger):
    tex, doc = _table(ledger, "latex")
    assert tex.count("\\begin{tabular}{llrrrr}") == 1 and tex.rstrip().endswith("\\end{table}")
    body = [line for line in tex.splitlines() if line.endswith("\\\\")]
    assert len(body) == 1 + 2 + 1 and all(line.count(" & ") == 5 for line in body)  # head, 2 rows, mean
    metric = doc["rows"][0]["metric_id"].replace("_", "\\_")
    assert f"arc\\&easy ({metric}, n=400)" in tex and f"mmlu\\_sub ({metric}, n=400)" in tex and "v2\\_big" in tex
    for row in doc["rows"]:
        line = next(x for x in body if x.startswith(" & " + row["benchmark"].replace("&", "\\&").replace("_", "\\_")))
        lo, hi = row["ci"]["v2_big"]
        assert f"{row['values']['v2_big'] * 100:.2f} {{\\scriptsize [{lo * 100:.2f}, {hi * 100:.2f}]}}" in line
        dlo, dhi = row["delta_ci"]
        assert f"{row['delta'] * 100:+.2f}* {{\\scriptsize [{dlo * 100:+.2f}, {dhi * 100:+.2f}]}}" in line
        assert re.search(r"& [0-9.]+ \\\\$", line)  # the adjusted p
    assert "95\\% bootstrap CI" in tex and "deltas tested: 2 tests, Holm" in tex
    if shutil.which("pdflatex"):  # pragma: no cover - not on every machine
        doc_tex = "\\documentclass{article}\\usepackage{booktabs}\\begin{document}" + tex + "\\end{document}"
        subprocess.run(
            ["pdflatex", "-interaction=nonstopmode"], input=doc_tex.encode(), check=True, capture_output=True
        )


def test_the_provenance_digest_recomputes_from_the_stored_predictions(ledger):
    md, doc = _table(ledger, "md")
    book = labledger.open_ledger(ledger)
    lines = []
    for model in ("base", "v2_big"):
        path = book.run(model).results_path("test")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines += [f"{b}\t{model}\traw\t{digest}\n" for b in ("mmlu_sub", "arc&easy")]
    book.close()
    want = hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()
    assert doc["provenance"] == {"sha256": want, "entries": 4, "with_predictions": 4}
    assert f"Predictions: sha256 {want} over the stored predictions of 4 of 4 entries" in md
    row = next(line for line in md.splitlines() if line.startswith("|  | mmlu_sub"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert re.fullmatch(r"[0-9.]+ \[[0-9.]+, [0-9.]+\]", cells[2]) and re.fullmatch(r"[+-][0-9.]+\* \[.+\]", cells[4])

"""`compare --save RUN:NAME` and `sweep --save RUN:NAME` store their documents as `eval --save` does (#43)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

import labledger
from labledger.cli import main
from labledger.site import build_site

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def _ledger(tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        shutil.copy(EXAMPLES / "metrics" / name, tmp_path / name)
    shutil.copy(EXAMPLES / "sweep" / "val.jsonl", tmp_path / "val.jsonl")
    root = tmp_path / "ledger"
    with labledger.start_run("m1", ledger=root) as run:
        for name in ("a", "b", "val"):
            run.log_results(name, tmp_path / f"{name}.jsonl")
    return str(root), run.id


def test_compare_and_sweep_save_their_documents_in_a_run(tmp_path):
    root, run_id = _ledger(tmp_path)
    r = CliRunner()
    cmp = r.invoke(main, ["compare", "m1:a", "m1:b", "--save", "m1:a-vs-b", "--json", "--ledger", root])
    assert cmp.exit_code == 0, cmp.output
    stored = json.loads((Path(root) / "runs" / run_id / "evals" / "a-vs-b" / "comparison.json").read_text())
    assert stored == json.loads(cmp.output)
    args = ["sweep", "m1:val", "--positive", "cross_boundary", "--ledger", root]
    sw = r.invoke(main, [*args, "--save", "m1:threshold", "--json"])
    assert sw.exit_code == 0, sw.output
    stored = json.loads((Path(root) / "runs" / run_id / "evals" / "threshold" / "sweep.json").read_text())
    assert stored == json.loads(sw.output)
    text = r.invoke(main, [*args, "--save", "m1:threshold"])
    assert text.exit_code == 0 and "Saved sweep 'm1:threshold' to " in text.output
    show = r.invoke(main, ["show", "m1", "--json", "--ledger", root])
    names = {e["name"] for e in json.loads(show.output)["evaluations"]}
    assert {"a-vs-b", "threshold"} <= names, names
    build_site(labledger.open_ledger(root), tmp_path / "site")
    assert (tmp_path / "site" / "data" / "evals" / run_id / "a-vs-b.js").is_file()
    assert (tmp_path / "site" / "data" / "evals" / run_id / "threshold.js").is_file()


def test_a_bad_save_target_is_a_usage_error_and_stores_nothing(tmp_path):
    root, run_id = _ledger(tmp_path)
    r = CliRunner()
    bad = r.invoke(main, ["compare", "m1:a", "m1:b", "--save", "a-vs-b", "--ledger", root])
    assert bad.exit_code == 2 and "expected RUN:NAME; got 'a-vs-b'" in bad.output
    missing = r.invoke(main, ["compare", "m1:a", "m1:b", "--save", "nope:x", "--ledger", root])
    assert missing.exit_code == 1 and missing.output.startswith("Error:") and len(missing.output.splitlines()) == 1
    assert sorted(p.name for p in (Path(root) / "runs" / run_id / "evals").iterdir()) == ["a", "b", "val"]

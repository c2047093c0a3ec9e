"""The open dataset at a team's scale (#46): 1,000 runs synced to a real S3-protocol server (moto on
127.0.0.1), then DuckDB's own httpfs over the bucket, with no labledger code, gives the same runs as
``labledger runs --where`` and the same accuracies as ``labledger eval``. Minutes of CPU: marked
``scale``, left out of the default run and run in a CI step of its own (``pytest -m scale``)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from moto_s3 import duckdb_with_httpfs, s3  # noqa: F401 (s3: a fixture)

import labledger
from labledger.cli import main
from labledger.store.objects import sync_to_objects

pytestmark = [pytest.mark.scale, pytest.mark.timeout(900)]

RUNS = 1000
WHERE = "config.lr < 1e-3 and config.opt = 'adam'"


def _log_runs(root) -> None:
    """``RUNS`` runs as a sweep logs them: a config, 20 steps of 2 scalars, 40 scored items each,
    and the stored evaluation of them."""
    for i in range(RUNS):
        cfg = {"lr": (1e-4, 3e-4, 1e-3, 3e-3)[i % 4], "opt": ("adam", "sgd")[(i // 4) % 2], "seed": i}
        with labledger.start_run(f"run-{i:04d}", config=cfg, ledger=root) as run:
            for step in range(1, 21):
                run.log(step, loss=1.0 / (step + i), acc=step / 20)
            run.log_results(
                "test",
                [
                    {
                        "id": k,
                        "task": "cls",
                        "gold": "ab"[k % 2],
                        "probs": {"a": 0.7, "b": 0.3} if (k * 7 + i) % 5 else {"a": 0.2, "b": 0.8},
                    }
                    for k in range(40)
                ],
            )
    book = labledger.open_ledger(root)
    for info in book.runs():
        ev = labledger.evaluate(book.run(info.id).results_path("test"), metrics=["accuracy"], resamples=0)
        book.save_evaluation(info.id, "test", ev.to_dict())
    book.close()


def test_duckdb_over_a_bucket_of_1000_synced_runs_gives_what_runs_where_and_eval_give(tmp_path, s3):
    root = tmp_path / "ledger"
    _log_runs(root)
    url = "s3://runs/scale"
    report = sync_to_objects(root, url)
    assert (report.runs, report.datasets_written) == (RUNS, RUNS)
    assert sync_to_objects(root, url).runs_sent == 0  # nothing changed: nothing sent

    cli = CliRunner()
    listed = cli.invoke(main, ["runs", "--ledger", str(root), "--where", WHERE, "--json"])
    assert listed.exit_code == 0, listed.output
    want_runs = sorted(r["id"] for r in json.loads(listed.output)["runs"])
    assert len(want_runs) == RUNS // 4

    base = "s3://runs/scale/dataset"
    con = duckdb_with_httpfs(s3)
    try:
        got_runs = [
            r[0]
            for r in con.execute(
                f"SELECT run FROM read_parquet('{base}/kind=runs/**/*.parquet', hive_partitioning = 1) "
                "WHERE num_fields['config.lr'] < 1e-3 AND text_fields['config.opt'] = 'adam' ORDER BY run"
            ).fetchall()
        ]
        # accuracy recomputed by DuckDB from the per-item rows (argmax of probs against gold), per run
        recomputed = dict(
            con.execute(
                f"SELECT run, avg(((CASE WHEN probs['a'] >= probs['b'] THEN 'a' ELSE 'b' END) = gold)::INT) "
                f"FROM read_parquet('{base}/kind=results/**/*.parquet', hive_partitioning = 1) "
                "WHERE set = 'test' GROUP BY run"
            ).fetchall()
        )
        stored = dict(
            con.execute(
                f"SELECT run, value FROM read_parquet('{base}/kind=metrics/**/*.parquet', hive_partitioning = 1) "
                "WHERE metric = 'accuracy' AND slice = ''"
            ).fetchall()
        )
    finally:
        con.close()
    assert got_runs == want_runs
    book = labledger.open_ledger(root)
    every = {r.id: book.run(r.id).evaluation("test").tasks["cls"].metrics[0].value for r in book.runs()}
    book.close()
    assert len(every) == RUNS and stored == every
    assert recomputed.keys() == every.keys()
    assert all(abs(recomputed[k] - every[k]) < 1e-12 for k in every)
    # ``labledger eval`` of a few runs' stored results, recomputed from their files, says the same
    for run_id in sorted(every)[:: RUNS // 5]:
        out = cli.invoke(
            main,
            ["eval", "--ledger", str(root), f"{run_id}:test", "--metric", "accuracy", "--resamples", "0", "--json"],
        )
        assert out.exit_code == 0, out.output
        assert json.loads(out.output)["tasks"]["cls"]["metrics"][0]["value"] == pytest.approx(
            recomputed[run_id], abs=1e-12
        )

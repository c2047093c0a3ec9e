"""The readers give a task's label indices their narrowest type (``label_index_type``: int8 up to
128 labels, #19). Everything that reads them must give what it gives on int64 indices, bit for bit:
every metric of the registry with its interval, slices, clusters, ``compare`` and ``calibrate report``,
at label counts where ``gold * K + pred`` leaves int8 (120 labels) and int16 (300 labels)."""

from __future__ import annotations

import copy

import numpy as np
import orjson
import pytest

import labledger.calibrate as cal
from labledger.analysis.comparison import compare
from labledger.analysis.evaluation import evaluate
from labledger.inputs.results import LabelTask, ResultSet, label_index_type, read_results, results_from_rows
from labledger.metrics.registry import list_metrics


def _rows(seed: int, n: int = 1500) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    many = [f"l{j:03d}" for j in range(120)]
    for i in range(n):
        group = f"g{i // 4}"  # clusters of four items
        part = "a" if i % 3 else "b"
        gold = "yes" if rng.random() < 0.4 else "no"
        rows.append(
            {
                "id": f"b{i}",
                "task": "bin",
                "gold": gold,
                "score": float(rng.random()),
                "group": group,
                "slices": {"part": part},
            }
        )
        p = rng.dirichlet(np.ones(3))
        rows.append(
            {
                "id": f"c{i}",
                "task": "cls3",
                "gold": "xyz"[rng.integers(3)],
                "probs": dict(zip("xyz", p.tolist())),
                "group": group,
                "slices": {"part": part},
            }
        )
        q = rng.dirichlet(np.full(120, 0.3))
        rows.append(
            {
                "id": f"m{i}",
                "task": "cls120",
                "gold": many[rng.integers(120)],
                "probs": dict(zip(many, q.tolist())),
                "group": group,
                "slices": {"part": part},
            }
        )
        rows.append(
            {
                "id": f"s{i}",
                "task": "match300",
                "gold": f"w{rng.integers(300)}",
                "pred": f"w{rng.integers(300)}",
                "group": group,
                "slices": {"part": part},
            }
        )
    return rows


def _widened(rs: ResultSet) -> ResultSet:
    """The same tasks with int64 label indices (what every reader made before #19)."""
    out = copy.deepcopy(rs)
    for td in out.tasks.values():
        if isinstance(td, LabelTask):
            td.gold_index = td.gold_index.astype(np.int64)
            td.pred_index = td.pred_index.astype(np.int64)
    return out


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    folder = tmp_path_factory.mktemp("labels")
    found = []
    for seed in (1, 2):
        path = folder / f"r{seed}.jsonl"
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _rows(seed)))
        found.append(read_results(path, positive="yes", cache=False))
    return found


def test_the_readers_make_the_narrowest_type(sets):
    rs = sets[0]
    assert {name: td.gold_index.dtype.name for name, td in rs.tasks.items()} == {
        "bin": "int8",
        "cls3": "int8",
        "cls120": "int8",
        "match300": "int16",
    }
    rows = results_from_rows(_rows(1, 40), positive="yes")  # the row reader: the same types
    assert all(rows[t].pred_index.dtype == label_index_type(len(rows[t].labels)) for t in rows.tasks)


def _doc(made) -> dict:
    """A result's document without the time it was made."""
    doc = made.to_dict()
    doc.pop("created", None)
    return doc


def _metrics(kind: str) -> list[str]:
    return [m.name for m in list_metrics(kind) if m.name != "mean" and m.needs != "fields"]  # (fields: a row field)


def test_every_metric_and_interval_is_the_same_on_int64_indices(sets):
    clustered = sets[0]
    unclustered = copy.deepcopy(clustered)  # (the count tables' blockwise path: no per-item cells)
    for td in unclustered.tasks.values():
        td.group = None
    for rs, by in ((clustered, None), (unclustered, "part")):
        wide = _widened(rs)
        for name, td in rs.tasks.items():
            metrics = _metrics(td.kind)
            narrow_doc = _doc(evaluate(rs, task=name, metrics=metrics, by=by, resamples=200))
            wide_doc = _doc(evaluate(wide, task=name, metrics=metrics, by=by, resamples=200))
            assert narrow_doc == wide_doc, (name, by)


def test_compare_is_the_same_on_int64_indices(sets):
    a, b = sets
    assert _doc(compare(a, b, unpaired=True, resamples=200)) == _doc(
        compare(_widened(a), _widened(b), unpaired=True, resamples=200)
    )
    paired = _doc(compare(a, a, resamples=200))  # one set against itself: paired, the same items
    assert paired == _doc(compare(_widened(a), a, resamples=200))


def test_calibrate_fit_and_report_are_the_same_on_int64_indices():
    rs = results_from_rows(_rows(3, 400), positive="yes")
    wide = _widened(rs)
    # 120 classes where a step's cost stays small; the prior multipliers' grid search (per class,
    # minutes on a loaded machine at 120 classes) on 3 classes: the same code on the same index types
    cases = [(["cls3", "cls120"], m) for m in ("temperature", "em_prior_shift")]
    cases += [(["cls3"], "prior_multiplier"), (["cls3"], "temperature,prior_multiplier")]
    cases += [(["bin"], "threshold"), (["bin"], "positive_threshold")]
    for tasks, method in cases:
        recipe = cal.fit(rs, task=tasks, method=method, crossfit=3)
        assert _doc(recipe) == _doc(cal.fit(wide, task=tasks, method=method, crossfit=3)), method
        assert _doc(cal.report(rs, recipe, resamples=100)) == _doc(cal.report(wide, recipe, resamples=100)), method

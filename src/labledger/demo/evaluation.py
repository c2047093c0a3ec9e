"""The demo's evaluation stage: each run's full test with confidence intervals, by ``current``
state, the two runs compared on the same items, and the static site built at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Metrics the demo reports: accuracy, macro F1 and per-class recall (in ``per_class``), with CIs.
DEMO_METRICS = ("accuracy", "f1:average=macro", "per_class")
#: The suite under which the demo's runs enter the benchmark ledger.
DEMO_SUITE = "digits-test"


def evaluate_runs(
    book: Any, run_ids: list[str], *, results: str, resamples: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Evaluate ``results`` of every run (saved as evaluation ``results`` and as benchmark entries),
    by ``current`` slice; returns ``{run_id: document}``."""
    from labledger.analysis.benchmarks import record_evaluation
    from labledger.analysis.evaluation import evaluate

    docs = {}
    for run_id in run_ids:
        view = book.run(run_id)
        path = view.results_path(results)
        doc = evaluate(path, metrics=list(DEMO_METRICS), by="current", resamples=resamples, seed=seed).doc
        doc.source = f"{run_id}:{results}"
        record_evaluation(book, run_id, results, doc, model=view.name, suite=DEMO_SUITE, results_path=str(path))
        docs[run_id] = doc.to_dict()
    return docs


def compare_runs(book: Any, a: str, b: str, *, results: str, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Paired comparison B - A on the same test items, stored in run B as ``compare-<A name>``
    (in the document, ``a`` is run B and ``b`` run A, so ``diff`` = B - A)."""
    from labledger.analysis.comparison import compare

    va, vb = book.run(a), book.run(b)
    # compare(x, y) reports x - y: pass B first, so the difference is B - A
    doc = compare(
        vb.results_path(results),
        va.results_path(results),
        metrics=["accuracy", "f1:average=macro"],
        resamples=resamples,
        seed=seed,
    ).doc
    doc.a, doc.b = f"{b}:{results}", f"{a}:{results}"
    doc.names = {"a": vb.name, "b": va.name}
    book.save_evaluation(b, f"compare-{va.name}", doc)
    return doc.to_dict()


def build_demo_site(book: Any, out: Path, run_ids: list[str]):
    """Build the static site for the demo's runs into ``out``; returns the SiteBuild."""
    from labledger.site.build import build_site

    return build_site(book, out, runs=run_ids)

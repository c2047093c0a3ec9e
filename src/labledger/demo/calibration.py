"""The demo's calibration stage (issue 4): a temperature then a prior multiplier, fitted on each run's
validation predictions, applied to its full test, and reported raw vs calibrated on the full test.

Stored in each run: the recipe beside the results it was fitted on (``evals/validation/recipe.json``),
the calibrated rows beside the raw ones (``evals/full_test/results_calibrated.jsonl``, every raw
byte kept) and the report (``evals/full_test/calibration.json``), which the site shows.
"""

from __future__ import annotations

from typing import Any

#: The chain fitted on the validation predictions.
DEMO_METHODS = "temperature,prior_multiplier"
#: Metrics the demo prints raw vs calibrated (the report has more).
DEMO_SHOWN = ("accuracy", "log_loss", "ece[n_bins=15,strategy=uniform]")


def calibrate_runs(
    book: Any, run_ids: list[str], *, fit_on: str, report_on: str, resamples: int = 1000, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Fit, store, apply and report the demo's recipe for every run; returns per run id the recipe
    id, its steps, the report's status and the raw / calibrated / difference rows of DEMO_SHOWN."""
    import labledger.calibrate as cal

    out = {}
    for run_id in run_ids:
        view = book.run(run_id)
        recipe = cal.fit(view.results_path(fit_on), method=DEMO_METHODS, display=f"{run_id}:{fit_on}", seed=seed)
        book.save_evaluation(run_id, fit_on, {"kind": "calibration_recipe", **recipe.to_dict()}, kind="recipe")
        raw_path = view.results_path(report_on)
        cal.apply(
            raw_path,
            recipe,
            book.evaluation_file(run_id, report_on, "results_calibrated.jsonl"),
            display=f"{run_id}:{report_on}",
        )
        rep = cal.report(raw_path, recipe, resamples=resamples, seed=seed, display=f"{run_id}:{report_on}")
        doc = rep.to_dict()
        book.save_evaluation(run_id, report_on, doc, kind="calibration")
        ((task, body),) = doc["tasks"].items()
        rows = []
        for key in DEMO_SHOWN:
            diff = next(e for e in body["metrics"] if e["base_metric"] == key and e["variant"] == "calibrated")
            rows.append(
                {
                    "metric": next(e["metric"] for e in body["slices"]["variant"]["raw"]["metrics"] if e["key"] == key),
                    "raw": diff["raw"],
                    "calibrated": diff["calibrated"],
                    "diff": diff["value"],
                    "ci_low": diff["ci_low"],
                    "ci_high": diff["ci_high"],
                }
            )
        out[run_id] = {
            "name": view.name,
            "task": task,
            "recipe": recipe.id,
            "steps": recipe.tasks[task].describe(),
            "status": body["status"],
            "n": body["n"],
            "rows": rows,
        }
    return out


__all__ = ["DEMO_METHODS", "DEMO_SHOWN", "calibrate_runs"]

"""Post-hoc calibration: recipes fitted honestly, applied losslessly, reported raw vs calibrated.

Three functions, and the command line over them (``labledger calibrate fit|apply|report``):

- :func:`fit` a per-task recipe (``threshold``, ``positive_threshold``, ``prior_multiplier``,
  ``option_damping``, ``temperature``, ``em_prior_shift``, or a chain of them) on a fit split, on
  everything, or with a K-fold cross-fitted estimate; the recipe records what it was fitted on.
- :func:`apply` it to ``results.jsonl``: each line keeps its bytes and gains a ``calibrated`` field.
- :func:`report` raw vs calibrated on the same items with paired CIs, labelled honestly: held out,
  or "fitted on the evaluated items (optimistic)" with the cross-fitted figure beside it.

>>> import labledger.calibrate as cal
>>> rows = [{"id": i, "task": "t", "gold": "yes" if i % 4 == 0 else "no", "split": "dev" if i < 40 else "test",
...          "probs": {"yes": 0.45 if i % 4 == 0 else 0.2, "no": 0.55 if i % 4 == 0 else 0.8}} for i in range(80)]
>>> recipe = cal.fit(rows, method="threshold", positive="yes", fit_split="split=dev")
>>> recipe.tasks["t"].describe()
'threshold (positive=yes, tau=0.45)'
>>> cal.report(rows, recipe, resamples=0).value("t", "accuracy", "calibrated")
1.0
"""

from labledger.calibrate.applying import apply, calibrated_results
from labledger.calibrate.fitting import fit
from labledger.calibrate.methods import DESCRIPTIONS, METHODS, Step
from labledger.calibrate.recipe import Recipe, TaskRecipe, load_recipe
from labledger.calibrate.reporting import CalibrationReport, report

__all__ = [
    "DESCRIPTIONS",
    "METHODS",
    "CalibrationReport",
    "Recipe",
    "Step",
    "TaskRecipe",
    "apply",
    "calibrated_results",
    "fit",
    "load_recipe",
    "report",
]

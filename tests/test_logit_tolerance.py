"""``logit-diff --tol``: the non-regression check "max |logit difference| <= tol on every item" (#45)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from labledger.analysis.checkpoints import logit_diff
from labledger.errors import CheckpointError


@pytest.fixture(scope="module")
def digits_logits(tmp_path_factory):
    """Logits of a logistic regression on scikit-learn's digits (test half) as a results file keyed
    by id, from float64 weights, the same weights cast to float32, and weights rounded to 0.1."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_tr, x_te, y_tr, _ = train_test_split(x / 16.0, y, test_size=0.5, random_state=0)
    model = LogisticRegression(max_iter=2000).fit(x_tr, y_tr)
    coef, bias = model.coef_, model.intercept_
    variants = {
        "fp64": (coef, bias),
        "fp32": (coef.astype(np.float32).astype(np.float64), bias.astype(np.float32).astype(np.float64)),
        "rounded": (np.round(coef, 1), bias),
    }
    root = tmp_path_factory.mktemp("logits")
    for name, (w, b) in variants.items():
        z = x_te @ w.T + b
        (root / f"{name}.jsonl").write_text(
            "".join(
                json.dumps({"id": f"d{i}", "logits": {str(c): float(v) for c, v in enumerate(row)}}) + "\n"
                for i, row in enumerate(z)
            )
        )
    return root


def test_tolerance_on_every_item_of_real_logits(digits_logits):
    ok = logit_diff(digits_logits / "fp64.jsonl", digits_logits / "fp32.jsonl", tol=1e-4)
    head = ok["heads"]["logits"]
    assert ok["passed"] is True and head["items_over"] == 0 and head["n"] == 899
    assert 0 < head["worst_abs"] == head["max_abs"] <= 1e-4
    bad = logit_diff(digits_logits / "fp64.jsonl", digits_logits / "rounded.jsonl", tol=1e-4)
    head = bad["heads"]["logits"]
    assert bad["passed"] is False and 0 < head["items_over"] <= 899
    assert head["worst_abs"] == head["max_abs"] and head["worst_item"].startswith("d")
    assert "tol" not in logit_diff(digits_logits / "fp64.jsonl", digits_logits / "fp32.jsonl")


def test_items_are_the_first_axis_and_nan_against_nan_is_equal(tmp_path):
    a = np.zeros((4, 3))
    b = a.copy()
    b[2, 1] = 5e-4
    a[0, 0] = b[0, 0] = np.nan
    np.savez(tmp_path / "a.npz", h=a)
    np.savez(tmp_path / "b.npz", h=b)
    res = logit_diff(tmp_path / "a.npz", tmp_path / "b.npz", tol=1e-4)["heads"]["h"]
    assert (res["items_over"], res["worst_item"], res["worst_abs"], res["passed"]) == (1, 2, 5e-4, False)
    b[0, 0] = 0.0  # NaN against a number: over
    np.savez(tmp_path / "b.npz", h=b)
    assert logit_diff(tmp_path / "a.npz", tmp_path / "b.npz", tol=1e-4)["heads"]["h"]["items_over"] == 2
    with pytest.raises(CheckpointError, match="tol"):
        logit_diff(tmp_path / "a.npz", tmp_path / "b.npz", tol=-1.0)


def _labledger(*args):
    return subprocess.run([sys.executable, "-m", "labledger", *args], capture_output=True, text=True, check=False)


def test_cli_tolerance_and_strict(digits_logits):
    a, ok, bad = (str(digits_logits / f"{n}.jsonl") for n in ("fp64", "fp32", "rounded"))
    res = _labledger("logit-diff", a, ok, "--tol", "1e-4", "--strict")
    assert res.returncode == 0 and "on every item: pass (0 of 899 items over" in " ".join(res.stdout.split())
    res = _labledger("logit-diff", a, bad, "--tol", "1e-4", "--strict")
    assert res.returncode == 3 and "FAIL" in res.stdout
    assert _labledger("logit-diff", a, bad, "--tol", "1e-4").returncode == 0  # reported, not enforced
    assert json.loads(_labledger("logit-diff", a, bad, "--tol", "1e-4", "--json").stdout)["passed"] is False
    usage = _labledger("logit-diff", a, bad, "--strict")
    assert usage.returncode == 2 and "--strict needs --tol" in usage.stderr
    assert _labledger("logit-diff", a, bad, "--tol", "-1").returncode == 2

"""Calibration (issue 4): each method against a hand-computed case, fits against scikit-learn loops,
honest reporting (held out, in-sample with the cross-fitted figure beside it), recipes, and apply."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from sklearn.metrics import f1_score

import labledger
import labledger.calibrate as cal
from labledger.calibrate import Recipe, Step, TaskRecipe
from labledger.calibrate.fitting import make_folds
from labledger.calibrate.methods import apply_steps, em_priors, task_arrays
from labledger.calibrate.search import (
    _table_values,
    argmax_tables,
    item_f1,
    item_f1_grid,
    resolve_objective,
    threshold_tables,
)
from labledger.errors import CalibrationError
from labledger.inputs.results import results_from_rows
from labledger.metrics import ece, log_loss, set_f1

FAST = settings(max_examples=40, deadline=None)
LABELS = ("Negative", "Neutral", "Positive")


def write(path, rows) -> str:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return str(path)


def shifted(n: int, seed: int = 0, prior=(0.2, 0.6, 0.2), scale: float = 1.0, split: bool = False) -> list[dict]:
    """3-class rows from a model whose probabilities assume uniform priors while the data has ``prior``."""
    rng = np.random.default_rng(seed)
    gold = rng.choice(3, size=n, p=prior)
    x = np.eye(3)[gold] * 1.5 + rng.normal(size=(n, 3))
    z = (x * 1.5 - 0.5 * 1.5**2) * scale
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    rows = []
    for i in range(n):
        row = {
            "id": f"r{i}",
            "task": "fin",
            "gold": LABELS[gold[i]],
            "probs": dict(zip(LABELS, p[i].tolist())),
            "logits": dict(zip(LABELS, z[i].tolist())),
            "group": f"g{i // 2}",
        }
        if split:
            row["slices"] = {"split": "dev" if (i // 2) % 2 else "test"}
        rows.append(row)
    return rows


def td_of(rows, task, positive=None):
    return results_from_rows(rows, positive=positive)[task]


def run(steps, rows, task, positive=None):
    td = td_of(rows, task, positive)
    arr = task_arrays(td, steps)
    return arr, apply_steps(steps, arr.scores(), arr)


# ------------------------------------------------------------------------------------------------
# Each method against a hand-computed case


def test_threshold_by_hand():
    rows = [
        {"id": i, "task": "hover", "gold": g, "score": s, "positive": "NOT_SUPPORTED"}
        for i, (g, s) in enumerate(
            [("NOT_SUPPORTED", 0.46), ("SUPPORTED", 0.45), ("NOT_SUPPORTED", 0.3), ("SUPPORTED", 0.7)]
        )
    ]
    arr, s = run([Step("threshold", {"positive": "NOT_SUPPORTED", "tau": 0.46})], rows, "hover")
    assert [arr.labels[j] for j in s.pred] == ["NOT_SUPPORTED", "SUPPORTED", "SUPPORTED", "NOT_SUPPORTED"]
    assert not s.changed and s.p is arr.probs  # probabilities untouched


def test_positive_threshold_by_hand():
    # two reviews of three questions each; "yes" when P(yes) >= 0.3
    spec = [
        ("a", "yes", 0.35),
        ("a", "no", 0.31),
        ("a", "no", 0.1),
        ("b", "yes", 0.2),
        ("b", "no", 0.05),
        ("b", "no", 0.4),
    ]
    rows = [
        {"id": i, "task": "acos", "gold": g, "probs": {"yes": p, "no": 1 - p}, "group": grp}
        for i, (grp, g, p) in enumerate(spec)
    ]
    step = Step("positive_threshold", {"positive": "yes", "tau": 0.3, "item_field": "group"})
    arr, s = run([step], rows, "acos")
    assert [arr.labels[j] for j in s.pred] == ["yes", "yes", "no", "no", "no", "yes"]
    # review a: gold {0}, predicted {0, 1} -> 2*1/(1+2) = 2/3; review b: gold {3}, predicted {5} -> 0
    assert item_f1(arr, s.pred, "yes", "group").tolist() == pytest.approx([2 / 3, 0.0])
    gold_sets = [{0}, {3}]
    assert set_f1(gold=gold_sets, pred=[{0, 1}, {5}]) == pytest.approx(1 / 3)


def test_prior_multiplier_by_hand():
    rows = [{"id": 1, "task": "fin", "gold": "Neutral", "probs": {"Negative": 0.5, "Neutral": 0.3, "Positive": 0.2}}]
    # weights keyed by label name, in an order unlike the labels'
    arr, s = run(
        [Step("prior_multiplier", {"weights": {"Positive": 0.6, "Negative": 0.6, "Neutral": 1.5}})], rows, "fin"
    )
    q = np.array([0.5 * 0.6, 0.3 * 1.5, 0.2 * 0.6])
    assert s.p[0].tolist() == pytest.approx((q / q.sum()).tolist(), abs=1e-15)
    assert arr.labels[s.pred[0]] == "Neutral" and arr.labels[arr.pred[0]] == "Negative"


def test_option_damping_by_hand_pattern_and_field():
    tool = '{"name": "get_weather", "arguments": {}}'
    rows = [
        {
            "id": 1,
            "task": "w2c",
            "gold": "Which city?",
            "probs": {tool: 0.5, "Which city?": 0.4, "No.": 0.1},
            "kinds": {tool: "tool_call", "Which city?": "ask_info", "No.": "cannot_answer"},
        }
    ]
    for params in ({"pattern": r"^\s*\{", "alpha": 0.3}, {"field": "kinds", "pattern": "^tool_call$", "alpha": 0.3}):
        arr, s = run([Step("option_damping", params)], rows, "w2c")
        j = arr.labels.index(tool)
        q = arr.probs[0].copy()
        q[j] *= 0.3  # 0.15, 0.4, 0.1 -> / 0.65
        assert s.p[0].tolist() == pytest.approx((q / q.sum()).tolist(), abs=1e-15)
        assert arr.labels[s.pred[0]] == "Which city?"


def test_temperature_by_hand_logits_and_log_probabilities():
    e = math.e
    rows = [
        {
            "id": 1,
            "task": "t",
            "gold": "a",
            "probs": {"a": e**2 / (e**2 + 1), "b": 1 / (e**2 + 1)},
            "logits": {"a": 2.0, "b": 0.0},
        }
    ]
    want = [e / (e + 1), 1 / (e + 1)]  # softmax((2, 0) / 2)
    arr, s = run([Step("temperature", {"T": 2.0})], rows, "t")
    assert s.p[0].tolist() == pytest.approx(want, abs=1e-15)
    del rows[0]["logits"]  # log-probabilities differ from the logits by a constant: the same result
    _arr, s = run([Step("temperature", {"T": 2.0})], rows, "t")
    assert s.p[0].tolist() == pytest.approx(want, abs=1e-12)


def test_em_prior_shift_by_hand_fixed_point():
    p0 = np.array([0.9, 0.9, 0.9, 0.2])
    # two classes, source (0.5, 0.5): the priors solve pi = mean_i p_i pi / (p_i pi + (1 - p_i)(1 - pi))
    pi = brentq(lambda x: np.mean(p0 * x / (p0 * x + (1 - p0) * (1 - x))) - x, 0.5, 0.999)
    got, _, ok = em_priors(np.column_stack([p0, 1 - p0]), np.array([0.5, 0.5]), tol=1e-13, max_iter=10_000)
    assert ok and got[0] == pytest.approx(pi, abs=1e-9)
    rows = [{"id": i, "task": "t", "gold": "a", "probs": {"a": float(p), "b": float(1 - p)}} for i, p in enumerate(p0)]
    arr, s = run(
        [Step("em_prior_shift", {"source_prior": {"a": 0.5, "b": 0.5}, "tol": 1e-13, "max_iter": 10_000})], rows, "t"
    )
    w = np.array([pi, 1 - pi]) / 0.5
    q = arr.probs * w
    np.testing.assert_allclose(s.p, q / q.sum(1, keepdims=True), atol=1e-8)
    assert s.info["em"]["target_prior"]["a"] == pytest.approx(pi, abs=1e-9)


def test_em_recovers_a_known_prior_shift():
    rows = shifted(20_000, seed=3, prior=(0.15, 0.7, 0.15))
    _arr, s = run([Step("em_prior_shift", {"source_prior": dict.fromkeys(LABELS, 1 / 3)})], rows, "fin")
    got = s.info["em"]["target_prior"]
    assert got["Neutral"] == pytest.approx(0.7, abs=0.02) and got["Negative"] == pytest.approx(0.15, abs=0.02)


# ------------------------------------------------------------------------------------------------
# Fits: every grid value equals scikit-learn's, per fold


def test_threshold_tables_match_sklearn_per_fold_and_threshold():
    rng = np.random.default_rng(1)
    n, k = 600, 4
    gold = rng.integers(0, 2, n)
    score = np.round(np.clip(rng.normal(0.35 + 0.3 * gold, 0.2), 0, 1), 2)  # ties on the grid
    rows = [
        {"id": i, "task": "t", "gold": ["no", "yes"][g], "probs": {"yes": s, "no": 1 - s}}
        for i, (g, s) in enumerate(zip(gold.tolist(), score.tolist()))
    ]
    arr = task_arrays(td_of(rows, "t", positive="yes"), [])
    obj = resolve_objective("f1:average=binary,pos_label=yes", arr, ["threshold"], positive="yes", item_field=None)
    taus = np.round(np.arange(0, 1.0001, 0.05), 2)
    fold = make_folds(np.arange(n), k, 0)
    j = arr.labels.index("yes")
    values = _table_values(obj, arr, threshold_tables(arr.probs[:, j], arr.gold, j, taus, fold, k))
    s = arr.probs[:, j]
    for r, train in enumerate([np.ones(n, bool)] + [fold != f for f in range(k)]):
        for g, t in enumerate(taus):
            want = f1_score(arr.gold[train] == j, s[train] >= t, zero_division=0)
            assert values[r, g] == pytest.approx(want, abs=1e-12)


def test_argmax_tables_match_sklearn_macro_f1():
    rows = shifted(900, seed=2)
    arr = task_arrays(td_of(rows, "fin"), [])
    obj = resolve_objective("f1:average=macro", arr, ["prior_multiplier"], positive=None, item_field=None)
    w = np.ones((7, 3))
    w[:, 1] = [0.5, 0.8, 1, 1.3, 2, 3, 4]
    fold = make_folds(arr.group, 3, 5)
    values = _table_values(obj, arr, argmax_tables(arr.probs, arr.gold, lambda k, a, b: w[:, k][:, None], 7, fold, 3))
    for r, train in enumerate([np.ones(arr.n, bool)] + [fold != f for f in range(3)]):
        for g in range(7):
            pred = np.argmax(arr.probs[train] * w[g], axis=1)
            assert values[r, g] == pytest.approx(f1_score(arr.gold[train], pred, average="macro"), abs=1e-12)


def test_item_f1_grid_matches_set_f1():
    rng = np.random.default_rng(4)
    items = np.repeat(np.arange(40), 5)
    y = rng.random(200) < 0.2
    s = np.round(rng.random(200), 2)
    taus = np.array([0.1, 0.3, 0.5, 0.9])
    got = item_f1_grid(s, y, items, taus, None, 0)[0]
    for g, t in enumerate(taus):
        gold = [set(np.flatnonzero(y & (items == i)).tolist()) for i in range(40)]
        pred = [set(np.flatnonzero((s >= t) & (items == i)).tolist()) for i in range(40)]
        assert got[g] == pytest.approx(set_f1(gold=gold, pred=pred), abs=1e-12)


@pytest.mark.simulation
def test_fitted_multiplier_recovers_a_known_prior_shift():
    rows = shifted(20_000, seed=0, prior=(0.2, 0.6, 0.2))
    recipe = cal.fit(
        rows, method="prior_multiplier", objective="log_loss", grid={"Neutral": "1:5:0.05", "Positive": "0.5:2:0.05"}
    )
    w = recipe.tasks["fin"].steps[0].params["weights"]
    # Bayes: the model assumes uniform priors, the data has (0.2, 0.6, 0.2): w = (1, 3, 1)
    assert w["Neutral"] / w["Negative"] == pytest.approx(3.0, abs=0.25)
    assert w["Positive"] / w["Negative"] == pytest.approx(1.0, abs=0.1)


def test_cross_fitted_gains_are_smaller_than_in_sample_gains():
    # little data, a fine grid: fitting on the evaluated items flatters; cross-fitting does not
    gains = []
    for seed in range(4):
        recipe = cal.fit(
            shifted(240, seed=seed, prior=(1 / 3, 1 / 3, 1 / 3)),
            method="prior_multiplier",
            grid={"Neutral": "0.5:2:0.02", "Positive": "0.5:2:0.1"},
            crossfit=5,
            seed=seed,
        )
        v = recipe.tasks["fin"].values
        gains.append((v["in_sample"] - v["raw"], v["crossfit"] - v["raw"]))
    assert all(ins >= 0 for ins, _ in gains)  # the grid contains no change: in-sample can only gain
    assert all(cross < ins for ins, cross in gains)
    # and with a real shift, cross-fitting keeps most of the gain
    v = cal.fit(shifted(3000, seed=9), method="prior_multiplier", crossfit=5).tasks["fin"].values
    assert v["raw"] < v["crossfit"] <= v["in_sample"]


@FAST
@given(st.integers(0, 10_000), st.integers(2, 5), st.floats(0.05, 20.0))
def test_temperature_never_changes_the_argmax(seed, k, t):
    rng = np.random.default_rng(seed)
    z = np.round(rng.normal(size=(30, k)) * 3, 1)  # rounded: ties happen
    labels = [f"l{i}" for i in range(k)]
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    rows = [
        {
            "id": i,
            "task": "t",
            "gold": labels[0],
            "probs": dict(zip(labels, p[i].tolist())),
            "logits": dict(zip(labels, z[i].tolist())),
        }
        for i in range(30)
    ]
    arr, s = run([Step("temperature", {"T": t})], rows, "t")
    assert np.array_equal(s.pred, arr.pred)


def test_temperature_fit_cools_an_overconfident_model():
    rows = shifted(3000, seed=1, prior=(1 / 3, 1 / 3, 1 / 3), scale=2.5)
    recipe = cal.fit(rows, method="temperature", crossfit=3)
    t = recipe.tasks["fin"]
    grid = np.exp(np.linspace(np.log(0.5), np.log(5), 2001))
    arr = task_arrays(td_of(rows, "fin"), t.steps)
    nll = [
        log_loss(
            gold=arr.gold, probs=apply_steps([Step("temperature", {"T": g})], arr.scores(), arr).p, labels=range(3)
        )
        for g in grid[::50]
    ]
    assert t.steps[0].params["T"] == pytest.approx(grid[::50][int(np.argmin(nll))], rel=0.1)
    assert t.steps[0].params["T"] == pytest.approx(2.5, rel=0.15)
    assert t.values["in_sample"] < t.values["raw"] and t.values["crossfit"] < t.values["raw"]
    assert t.fit["scale"] == "logits" and t.objective == "log_loss"


# ------------------------------------------------------------------------------------------------
# Recipes


def test_recipe_round_trips_with_a_stable_id(tmp_path):
    recipe = cal.fit(shifted(300, seed=1), method="temperature,prior_multiplier", crossfit=3)
    assert recipe.tasks["fin"].methods == ["temperature", "prior_multiplier"]
    for name in ("r.toml", "r.json", "r.yaml"):
        if name.endswith("yaml"):
            pytest.importorskip("yaml")
        path = tmp_path / name
        if name.endswith("json"):
            path.write_bytes(orjson.dumps(recipe.to_dict()))
        else:
            recipe.save(path)
        again = Recipe.load(path)
        assert again.id == recipe.id and again.to_dict() == recipe.to_dict()


BASE = 'format = "labledger-calibration-recipe"\nversion = 1\n'
MALFORMED = [
    ("", "key 'tasks' is missing"),
    (
        '[tasks.t]\nmethod = "treshold"\npositive = "y"\ntau = 0.4\n',
        "key 'tasks.t.method' is 'treshold', not a calibration method. Did you mean 'threshold'?",
    ),
    ('[tasks.t]\nmethod = "threshold"\npositive = "y"\ntau = "0.4"\n', "key 'tasks.t.tau' must be a number; got '0.4'"),
    ('[tasks.t]\nmethod = "threshold"\npositive = "y"\ntau = 1.4\n', "key 'tasks.t.tau' must be a number in [0, 1]"),
    (
        '[tasks.t]\nmethod = "threshold"\npositive = "y"\ntua = 0.4\n',
        "key 'tasks.t.tua' is not a recipe key here. Did you mean 'tau'?",
    ),
    ('[tasks.t]\nmethod = "threshold"\ntau = 0.4\n', "key 'tasks.t.positive' is missing"),
    ('[tasks.t]\nmethod = "prior_multiplier"\nweights = { a = 1.0, b = -2 }\n', "key 'tasks.t.weights.b' must be > 0"),
    (
        '[tasks.t]\nmethod = "option_damping"\nalpha = 0.3\npattern = "(["\n',
        "key 'tasks.t.pattern' is not a valid regular expression",
    ),
    ('[tasks.t]\nmethod = "option_damping"\nalpha = 0.3\n', "key 'tasks.t.pattern' is missing"),
    ('[tasks.t]\nmethod = "temperature"\nT = 1.0\nsteps = []\n', "are both given"),
    ("[tasks.t]\nsteps = []\n", "key 'tasks.t.steps' must be a non-empty list"),
    ('[tasks.t]\nsteps = [{ method = "temperature", T = 0 }]\n', "key 'tasks.t.steps[0].T' must be > 0"),
    ('[tasks.t]\nmethod = "temperature"\nT = 1.0\ntransductive = true\n', "key 'tasks.t.transductive' is true but"),
    ('[tasks.t]\nmethod = "temperature"\nT = 1.0\nobjective = "f1score"\n', "key 'tasks.t.objective' is not a metric"),
    ('[tasks.t]\nmethod = "temperature"\nT = 1.0\n[tasks.t.fit]\nn = "12"\n', "key 'tasks.t.fit.n' must be an integer"),
    (
        '[tasks.t]\nmethod = "em_prior_shift"\nsource_prior = { a = 0.5, b = 0.6 }\n',
        "key 'tasks.t.source_prior' must sum to 1",
    ),
    ('id = "0123456789abcdef"\n[tasks.t]\nmethod = "temperature"\nT = 1.0\n', "key 'id' is '0123456789abcdef' but"),
    ('version = 9\n[tasks.t]\nmethod = "temperature"\nT = 1.0\n', "key 'version' is 9: this recipe is newer"),
    ('colour = 1\n[tasks.t]\nmethod = "temperature"\nT = 1.0\n', "key 'colour' is not a recipe key here"),
    ("[tasks.t\n", "not valid TOML"),
]


@pytest.mark.parametrize("text,message", MALFORMED)
def test_malformed_recipes_name_the_key(tmp_path, text, message):
    path = tmp_path / "recipe.toml"
    path.write_text(text if text.startswith(("version = 9", "[tasks.t\n")) else BASE + text)
    with pytest.raises(CalibrationError) as exc:
        Recipe.load(path)
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value)


def test_an_edited_recipe_is_refused_until_its_id_is_removed(tmp_path):
    recipe = cal.fit(shifted(200, seed=1), method="prior_multiplier")
    path = recipe.save(tmp_path / "r.toml")
    text = path.read_text().replace("Negative = 1.0", "Negative = 1.5")
    path.write_text(text)
    with pytest.raises(CalibrationError, match="changed after it was written"):
        Recipe.load(path)
    path.write_text("\n".join(line for line in text.splitlines() if not line.startswith("id =")))
    assert Recipe.load(path).tasks["fin"].steps[0].params["weights"]["Negative"] == 1.5


# ------------------------------------------------------------------------------------------------
# Apply: raw bytes kept, refusals


RAW_LINES = [
    b'{"id": "a1", "task": "fin", "gold": "Neutral", "probs": {"Positive": 0.2, "Negative": 0.5, "Neutral": 0.3}}',
    b'{ "task":"fin","id":"a2" ,"gold":"Negative","probs":{"Negative":0.6,"Neutral":0.3,"Positive":0.1},'
    b'"note":"caf\xc3\xa9 \\u00e9 \\"q\\"", "extra": [1, 2.50, {"k": null}] }  ',
    b'{"id": "a3", "task": "fin", "gold": "Positive", "probs": {"Negative": 0.1, "Neutral": 0.45, "Positive": 0.45}}\r',
    b"",
    b'{"id": "b1", "task": "other", "gold": "x", "probs": {"x": 1.0}}',
]


def test_apply_keeps_every_raw_byte(tmp_path):
    src = tmp_path / "results.jsonl"
    src.write_bytes(b"\n".join(RAW_LINES) + b"\n")
    recipe = Recipe(
        {"fin": TaskRecipe([Step("prior_multiplier", {"weights": {"Negative": 0.6, "Neutral": 1.5, "Positive": 0.6}})])}
    )
    with pytest.raises(CalibrationError, match="task\\(s\\) 'other' that recipe .* does not know"):
        cal.apply(src, recipe, tmp_path / "out.jsonl")
    summary = cal.apply(src, recipe, tmp_path / "out.jsonl", keep_other_tasks=True)
    assert summary["kept"] == {"other": 1} and summary["tasks"]["fin"]["n"] == 3
    out = (tmp_path / "out.jsonl").read_bytes().split(b"\n")
    assert len(out) == len(RAW_LINES) + 1
    for raw, new in zip(RAW_LINES, out):
        if b'"fin"' not in raw:
            assert new == raw  # blank lines and other tasks: untouched
            continue
        cut = raw.rstrip().rfind(b"}")
        assert new[:cut] == raw[:cut] and new.endswith(raw[cut:])  # every byte before the brace, and after it
        row, raw_row = orjson.loads(new), orjson.loads(raw)
        added = row.pop("calibrated")
        assert row == raw_row and list(row) == list(raw_row)
        assert added["recipe"] == recipe.id and added["method"] == "prior_multiplier"
        assert list(added["probs"]) == ["Positive", "Negative", "Neutral"]  # the first row's key order
    first = orjson.loads(out[0])["calibrated"]
    assert first["prediction"] == "Neutral" and first["probs"]["Neutral"] == pytest.approx(0.45 / 0.87)
    with pytest.raises(CalibrationError, match="already calibrated"):
        cal.apply(tmp_path / "out.jsonl", recipe, tmp_path / "twice.jsonl", keep_other_tasks=True)
    with pytest.raises(CalibrationError, match="would overwrite the raw results"):
        cal.apply(src, recipe, src, keep_other_tasks=True)


def test_apply_refuses_tasks_and_labels_it_does_not_know(tmp_path):
    src = write(tmp_path / "r.jsonl", shifted(20))
    unknown = Recipe({"hover": TaskRecipe([Step("temperature", {"T": 2.0})])})
    with pytest.raises(CalibrationError, match="calibrates task\\(s\\) 'hover', which .* does not have"):
        cal.apply(src, unknown, tmp_path / "o.jsonl")
    partial = Recipe({"fin": TaskRecipe([Step("prior_multiplier", {"weights": {"Negative": 1.0, "Neutral": 2.0}})])})
    with pytest.raises(CalibrationError, match="no multiplier for label\\(s\\) 'Positive'"):
        cal.apply(src, partial, tmp_path / "o.jsonl")


def test_calibrated_results_evaluate_to_the_report_numbers(tmp_path):
    src = write(tmp_path / "r.jsonl", shifted(400, seed=5, split=True))
    recipe = cal.fit(src, method="prior_multiplier", fit_split="split=dev")
    cal.apply(src, recipe, tmp_path / "c.jsonl")
    rs = cal.calibrated_results(tmp_path / "c.jsonl")
    test = rs["fin"].subset(rs["fin"].slices["split"] == "test")
    ev = labledger.evaluate(
        labledger.inputs.results.ResultSet({"fin": test}), metrics=["accuracy", "log_loss"], resamples=0
    )
    rep = cal.report(src, recipe, resamples=0)
    assert rep.document["tasks"]["fin"]["in_sample"] == "no" and rep.document["tasks"]["fin"]["n"] == test.n
    assert rep.value("fin", "accuracy") == pytest.approx(ev.value("fin", "accuracy"), abs=1e-12)
    assert rep.value("fin", "log_loss") == pytest.approx(ev.value("fin", "log_loss"), abs=1e-12)


# ------------------------------------------------------------------------------------------------
# Report: honest labels, cross-fitted beside in-sample, probabilities before and after


def test_in_sample_report_shows_the_cross_fitted_figure(tmp_path):
    src = write(tmp_path / "r.jsonl", shifted(600, seed=6))
    recipe = cal.fit(src, method="prior_multiplier", crossfit=5, seed=2)
    doc = cal.report(src, recipe, resamples=100).to_dict()
    body = doc["tasks"]["fin"]
    assert body["in_sample"] == "yes" and body["status"] == "fitted on the evaluated items (optimistic)"
    assert body["honest"] == "cross-fitted" and body["crossfit"] == {"k": 5, "seed": 2, "folds_by": "group"}
    values = recipe.tasks["fin"].values
    slices = body["slices"]["variant"]
    head = lambda v: next(e["value"] for e in slices[v]["metrics"] if e["key"] == "accuracy")  # noqa: E731
    assert head("cross-fitted") == pytest.approx(values["crossfit"], abs=1e-12)
    assert head("calibrated") == pytest.approx(values["in_sample"], abs=1e-12)
    rows = [r for r in doc["table"] if r["task"] == "fin"]
    assert [r["fitted"] for r in rows] == [
        "fitted on the evaluated items (optimistic)",
        "cross-fitted (honest), 5 folds by group",
    ]
    assert [r["honest"] for r in rows] == [False, True]
    md = cal.report(src, recipe, resamples=0).to_markdown()
    assert "fitted on the evaluated items (optimistic)" in md and "**accuracy**" in md


def test_report_finds_the_fit_items_in_a_rewritten_copy(tmp_path):
    rows = shifted(300, seed=7)
    recipe = cal.fit(write(tmp_path / "a.jsonl", rows), method="prior_multiplier")
    copy = tmp_path / "copy.jsonl"  # other bytes (indented, reordered), same items
    copy.write_bytes(b"".join(orjson.dumps(dict(reversed(list(r.items())))) + b"\n" for r in rows[::-1]))
    assert cal.report(copy, recipe, resamples=0).document["tasks"]["fin"]["in_sample"] == "yes"
    half = write(tmp_path / "half.jsonl", rows[:150] + shifted(300, seed=8)[150:])
    body = cal.report(half, recipe, resamples=0).document["tasks"]["fin"]
    assert body["in_sample"] == "partly" and "cross-fitted" in body["slices"]["variant"]
    other = write(tmp_path / "other.jsonl", [dict(r, id=f"x{i}") for i, r in enumerate(shifted(100, seed=9))])
    assert cal.report(other, recipe, resamples=0).document["tasks"]["fin"]["in_sample"] == "no"


def test_report_probabilities_bins_and_mean_row(tmp_path):
    rows = shifted(400, seed=10, split=True, scale=2.0)
    hover = [
        {
            "id": i,
            "task": "hover",
            "gold": "yes" if i % 3 == 0 else "no",
            "score": 0.3 + 0.3 * (i % 3 == 0) + 0.1 * (i % 5 == 0),
            "positive": "yes",
            "slices": {"split": "dev" if i % 2 else "test"},
        }
        for i in range(200)
    ]
    src = write(tmp_path / "r.jsonl", rows + hover)
    r1 = cal.fit(src, task="fin", method="temperature", fit_split="split=dev")
    r2 = cal.fit(src, task="hover", method="threshold", fit_split="split=dev")
    recipe = Recipe({**r1.tasks, **r2.tasks})
    rep = cal.report(src, recipe, resamples=50, bins=10)
    doc = rep.to_dict()
    fin = doc["tasks"]["fin"]
    assert fin["headline"] == "log_loss" and fin["in_sample"] == "no"
    bins = fin["reliability"]["bins"]
    assert len(bins) == 10 and sum(b["count"] for b in bins) == fin["n"]
    assert sum(b["count"] for b in fin["reliability"]["raw_bins"]) == fin["n"]
    # ECE with equal-width and equal-mass bins, before and after, as the registry computes them
    test = [r for r in rows if r["slices"]["split"] == "test"]
    td = td_of(test, "fin")
    arr = task_arrays(td, recipe.tasks["fin"].steps)
    calp = apply_steps(recipe.tasks["fin"].steps, arr.scores(), arr).p
    for strategy in ("uniform", "quantile"):
        key = f"ece[n_bins=10,strategy={strategy}]"
        assert rep.value("fin", key, "raw") == pytest.approx(
            ece(gold=td.gold_index, probs=td.probs, labels=range(3), n_bins=10, strategy=strategy), abs=1e-12
        )
        assert rep.value("fin", key) == pytest.approx(
            ece(gold=td.gold_index, probs=calp, labels=range(3), n_bins=10, strategy=strategy), abs=1e-12
        )
    assert rep.value("fin", "accuracy") == rep.value("fin", "accuracy", "raw")  # a temperature keeps decisions
    assert rep.value("fin", "log_loss") < rep.value("fin", "log_loss", "raw")
    assert doc["mean"]["tasks"] == ["hover"] and doc["mean"]["excluded"] == ["fin"]  # log loss: lower is better
    hv = doc["tasks"]["hover"]
    want = f1_score(
        [r["gold"] == "yes" for r in hover if r["slices"]["split"] == "test"],
        [r["score"] >= recipe.tasks["hover"].steps[0].params["tau"] for r in hover if r["slices"]["split"] == "test"],
    )
    assert rep.value("hover", hv["headline"]) == pytest.approx(want, abs=1e-12)


def test_transductive_em_is_marked_in_recipe_and_report(tmp_path):
    src = write(tmp_path / "r.jsonl", shifted(400, seed=11, split=True))
    recipe = cal.fit(src, method="em_prior_shift", fit_split="split=dev")
    assert recipe.tasks["fin"].transductive and "transductive = true" in recipe.to_toml()
    body = cal.report(src, recipe, resamples=0).document["tasks"]["fin"]
    assert body["transductive"] and "label-free" in body["transductive_note"]
    assert sum(body["em"]["target_prior"].values()) == pytest.approx(1.0)


def test_hand_written_recipe_is_reported_with_unknown_provenance(tmp_path):
    src = write(tmp_path / "r.jsonl", shifted(300, seed=12))
    path = tmp_path / "v4.toml"
    path.write_text(
        '[tasks.fin]\nmethod = "prior_multiplier"\nweights = { Negative = 0.6, Neutral = 1.5, Positive = 0.6 }\n'
    )
    body = cal.report(src, path, resamples=0).document["tasks"]["fin"]
    assert body["in_sample"] == "unknown" and "provenance unknown" in body["status"]
    assert body["honest"] == "cross-fitted"


def test_fit_refuses_what_it_cannot_do(tmp_path):
    rows = shifted(50)
    with pytest.raises(CalibrationError, match="needs a task with two labels"):
        cal.fit(rows, method="threshold", positive="Neutral")
    with pytest.raises(CalibrationError, match="exclusive"):
        cal.fit(rows, method="temperature", fit_split="split=dev", crossfit=3)
    with pytest.raises(labledger.errors.UnknownNameError, match="Did you mean 'temperature'"):
        cal.fit(rows, method="temprature")
    with pytest.raises(CalibrationError, match="no field 'split'"):
        cal.fit(rows, method="temperature", fit_split="split=dev")
    with pytest.raises(CalibrationError, match="needs at least 10 clusters"):
        cal.fit(rows[:12], method="temperature", crossfit=10)


def test_demo_calibration_stage_stores_recipe_calibrated_rows_and_report(tmp_path):
    from labledger.demo.calibration import calibrate_runs

    book = labledger.open_ledger(tmp_path / "ledger", create=True)
    with labledger.start_run("m", ledger=book) as run:
        run.log_results("validation", shifted(300, seed=13))
        run.log_results("full_test", [dict(r, id=f"t{i}") for i, r in enumerate(shifted(300, seed=14))])
    out = calibrate_runs(book, [run.id], fit_on="validation", report_on="full_test", resamples=50)
    view = book.run(run.id)
    recipe = view.evaluation("validation", kind="recipe")
    report = view.evaluation("full_test", kind="calibration")
    assert out[run.id]["recipe"] == recipe["id"] == report["recipe_id"]
    assert recipe["tasks"]["fin"]["steps"][0]["method"] == "temperature"
    assert report["tasks"]["fin"]["in_sample"] == "no" and out[run.id]["status"].startswith("held out")
    raw = view.results_path("full_test").read_bytes().split(b"\n")
    cal_lines = (view.dir / "evals" / "full_test" / "results_calibrated.jsonl").read_bytes().split(b"\n")
    assert all(c.startswith(r[:-1]) for r, c in zip(raw, cal_lines) if r)
    assert [r["metric"] for r in out[run.id]["rows"]] == ["accuracy", "log_loss", "ece (15 equal-width bins)"]
    book.close()


def test_many_labels_fall_back_to_coordinate_ascent_and_thresholds_need_decision_metrics():
    rng = np.random.default_rng(15)
    labels = [f"c{k}" for k in range(6)]
    gold = rng.choice(6, size=900, p=[0.05, 0.1, 0.15, 0.2, 0.2, 0.3])
    z = np.eye(6)[gold] * 2 + rng.normal(size=(900, 6))
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    rows = [
        {"id": i, "task": "t", "gold": labels[g], "probs": dict(zip(labels, p[i].tolist()))}
        for i, g in enumerate(gold.tolist())
    ]
    t = cal.fit(rows, method="prior_multiplier", crossfit=3).tasks["t"]
    assert t.fit["search"][0].startswith("coordinate ascent over 5 labels")
    assert t.values["in_sample"] > t.values["raw"]
    binary = [
        {"id": i, "task": "h", "gold": "y" if i % 3 == 0 else "n", "score": (i % 10) / 10, "positive": "y"}
        for i in range(60)
    ]
    with pytest.raises(CalibrationError, match="a threshold does not change"):
        cal.fit(binary, method="threshold", objective="log_loss")

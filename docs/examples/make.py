"""Write the example files that the docs' examples run against (``python docs/examples/make.py``).

Seeded and small: running it again writes the same bytes. Every folder belongs to one page of the
docs (``docs/run_examples.py`` runs that page's examples in a copy of its folder):

- ``metrics/``: ``results.jsonl`` with one task of every kind (the rows of docs/results.md), a
  ``length`` slice and a ``group`` on every row; ``a.jsonl`` / ``b.jsonl``, two models on the same
  items, for ``labledger compare``;
- ``calibration/``: ``results.jsonl`` with four tasks (3-class ``finentity`` whose model ignores
  the label priors, binary ``hover``, multiple-choice ``when2call`` whose model over-calls tools,
  yes/no questions per review ``acos``), each row with a ``split`` slice (``dev`` / ``test``), and
  ``v4_recipe.toml``, a hand-written recipe;
- ``sweep/``: ``val.jsonl`` and ``test.jsonl``, a binary task (``single_symbol`` vs
  ``cross_boundary``) with a ``length`` slice, and ``boundary-aux-smoke.json``, a
  threshold-selection report whose ``history`` has a validation F1 per epoch;
- ``tables/``: ``HANDOFF.md``, a hand-written version table in percent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _r(x: float, d: int = 6) -> float:
    return round(float(x), d)


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _probs(labels: tuple[str, ...], p: np.ndarray) -> dict[str, float]:
    """Rounded probabilities that still sum to 1 (the rounding error goes to the largest)."""
    vals = [_r(v) for v in p]
    k = int(np.argmax(vals))
    vals[k] = _r(1.0 - sum(v for i, v in enumerate(vals) if i != k))
    return dict(zip(labels, vals))


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows))


# ------------------------------------------------------------------------------------------------
# metrics/: one task of every kind


def metrics_rows(rng: np.random.Generator, skill: float = 1.0) -> list[dict]:
    rows: list[dict] = []
    lengths = ("short", "long")

    def common(i: int) -> dict:
        return {"slices": {"length": lengths[i % 2]}, "group": f"doc{i // 2}"}

    labels = ("negative", "neutral", "positive")
    for i in range(120):
        g = int(rng.integers(3))
        z = np.eye(3)[g] * 2.0 * skill + rng.normal(size=3)
        rows.append(
            {"id": f"s{i}", "task": "sentiment", "gold": labels[g], "probs": _probs(labels, _softmax(z))} | common(i)
        )
    for i in range(120):
        g = int(rng.integers(2))
        s = 1 / (1 + np.exp(-(2.0 * skill * (2 * g - 1) + rng.normal())))
        gold = "cross_boundary" if g else "single_symbol"
        rows.append(
            {"id": f"b{i}", "task": "boundary", "gold": gold, "score": _r(s), "positive": "cross_boundary"} | common(i)
        )
    for i in range(60):
        gold = float(rng.integers(-3, 4))
        pred = gold + rng.normal() / skill
        rows.append({"id": f"r{i}", "task": "intensity", "gold": gold, "pred": _r(pred, 3)} | common(i))
    for i in range(40):
        docs = [f"d{j}" for j in range(5)]
        rel = {d: int(v) for d, v in zip(docs, rng.integers(0, 3, size=5)) if v > 0}
        scores = {d: _r(rel.get(d, 0) * skill + rng.normal(), 4) for d in docs}
        rows.append({"id": f"q{i}", "task": "retrieval", "gold": rel, "scores": scores} | common(i))
    aspects = ("price", "service", "food", "ambience")
    for i in range(40):
        gold = sorted(a for a in aspects if rng.random() < 0.4)
        pred = sorted(
            {a for a in gold if rng.random() < 0.5 + 0.3 * skill} | {a for a in aspects if rng.random() < 0.1}
        )
        rows.append({"id": f"a{i}", "task": "aspects", "gold": gold, "pred": pred} | common(i))
    calls = ('{"name": "get_weather"}', '{"name": "search"}', "no tool")
    for i in range(40):
        gold = calls[int(rng.integers(3))]
        pred = gold if rng.random() < 0.6 + 0.2 * skill else calls[int(rng.integers(3))]
        rows.append({"id": f"t{i}", "task": "tool_call", "gold": gold, "pred": pred} | common(i))
    return rows


# ------------------------------------------------------------------------------------------------
# calibration/: four tasks, each with a dev and a test split


def calibration_rows(rng: np.random.Generator) -> list[dict]:
    rows: list[dict] = []

    def split(i: int) -> dict:
        return {"slices": {"split": "dev" if i % 2 == 0 else "test"}}

    # finentity: 3 classes, Neutral is 60% of the data but the model assumes uniform priors
    labels = ("Negative", "Neutral", "Positive")
    for i in range(600):
        g = int(rng.choice(3, p=(0.2, 0.6, 0.2)))
        z = np.eye(3)[g] * 1.2 + rng.normal(size=3)
        rows.append(
            {"id": f"fin-{i}", "task": "finentity", "gold": labels[g], "probs": _probs(labels, _softmax(z))} | split(i)
        )
    # hover: binary, the model's scores run high for NOT_SUPPORTED
    for i in range(400):
        g = bool(rng.random() < 0.5)
        s = 1 / (1 + np.exp(-(1.5 * (2 * g - 1) + 1.2 + rng.normal())))
        gold = "NOT_SUPPORTED" if g else "SUPPORTED"
        rows.append(
            {"id": f"hover-{i}", "task": "hover", "gold": gold, "score": _r(s), "positive": "NOT_SUPPORTED"} | split(i)
        )
    # when2call: multiple choice, the model over-calls the tool
    options = ('{"name": "get_weather", "arguments": {"city": "Seoul"}}', "Which city?", "I cannot help with that.")
    for i in range(300):
        g = int(rng.choice(3, p=(0.3, 0.5, 0.2)))
        z = np.eye(3)[g] * 1.5 + np.array([1.2, 0.0, 0.0]) + rng.normal(size=3)
        rows.append(
            {"id": f"w2c-{i}", "task": "when2call", "gold": options[g], "probs": _probs(options, _softmax(z))}
            | split(i)
        )
    # acos: 10 yes/no questions per review; the model says "yes" too rarely
    for r in range(150):
        for q in range(10):
            g = bool(rng.random() < 0.2)
            p = 1 / (1 + np.exp(-(2.0 * (2 * g - 1) - 1.8 + rng.normal())))
            rows.append(
                {
                    "id": f"acos-{r}-{q}",
                    "task": "acos",
                    "gold": "yes" if g else "no",
                    "probs": _probs(("no", "yes"), np.array([1 - p, p])),
                    "group": f"review-{r}",
                }
                | split(r)
            )
    return rows


V4_RECIPE = """\
[tasks.finentity]
method = "prior_multiplier"
weights = { Negative = 0.6, Neutral = 1.5, Positive = 0.6 }

[tasks.when2call]
method = "option_damping"
pattern = '^\\s*\\{'
alpha = 0.30

[tasks.acos]
method = "positive_threshold"
positive = "yes"
tau = 0.30
"""


# ------------------------------------------------------------------------------------------------
# sweep/: a binary validation set and its paired test set


def sweep_rows(rng: np.random.Generator, n: int, prefix: str) -> list[dict]:
    rows = []
    for i in range(n):
        g = bool(rng.random() < 0.5)
        long = bool(rng.random() < 0.4)
        margin = (2.8 if not long else 2.2) * (2 * g - 1) + 0.5
        s = 1 / (1 + np.exp(-(margin + rng.normal() * 1.3)))
        rows.append(
            {
                "id": f"{prefix}{i}",
                "task": "boundary",
                "gold": "cross_boundary" if g else "single_symbol",
                "score": _r(s),
                "slices": {"length": "long" if long else "short"},
            }
        )
    return rows


def cost_rows(rng: np.random.Generator, right: float, price: float, tokens: float) -> list[dict]:
    """400 multiple-choice questions in 80 passages answered by one model: each answer right with
    probability ``right`` (a passage shares a difficulty), its output tokens gamma-distributed around
    ``tokens``, its cost those tokens at ``price`` dollars each, its latency growing with them."""
    hard = np.random.default_rng(5).normal(0, 0.8, 80)
    out = []
    for i in range(400):
        g = "ABCD"[i % 4]
        logit = np.log(right / (1 - right)) - hard[i // 5]
        ok = rng.random() < 1 / (1 + np.exp(-logit))
        toks = int(rng.gamma(4.0, tokens / 4.0)) + 1
        out.append(
            {
                "id": f"q{i}",
                "task": "mcqa",
                "gold": g,
                "pred": g if ok else "ABCD"[(i + 1) % 4],
                "group": f"p{i // 5}",
                "tokens_out": toks,
                "cost": _r(toks * price, 8),
                "latency_ms": _r(40 + toks * 0.9 + rng.exponential(15), 1),
            }
        )
    return out


def smoke_report(rng: np.random.Generator) -> dict:
    history: list[dict] = []
    f1 = 0.80
    for epoch in range(1, 25):
        history.append({"epoch": epoch, "step": epoch * 50, "loss": _r(0.9 / epoch**0.5, 4)})
        f1 = min(0.97, f1 + 0.02 * rng.random())
        history.append({"epoch": epoch, "step": epoch * 50, "f1": _r(f1 - 0.01 * rng.random(), 4)})
    return {
        "experiment": "boundary-aux-smoke",
        "generated_at": "2026-06-18T09:00:00+00:00",
        "history": history,
        "device": "cpu",
    }


# ------------------------------------------------------------------------------------------------
# tables/: a hand-written version table


def handoff(rng: np.random.Generator) -> str:
    models = ("Base", "V3 Raw", "V4 Raw", "V5 Raw", "V5 Calibrated")
    public = [
        ("Sentiment", "FinEntity", "Acc."),
        ("Sentiment", "FPB", "Macro-F1"),
        ("NLI", "ContractNLI", "Acc."),
        ("NLI", "NLI4CT", "Macro-F1"),
        ("Reasoning", "CLadder", "Acc."),
        ("Retrieval", "FiQA", "nDCG@10"),
    ]
    heldout = [("미공개 일반화 평가", "VAST", "Macro-F1"), ("미공개 일반화 평가", "ACOS", "Per-Review F1")]
    lines = [
        "# Hand-off",
        "",
        "| Category | Benchmark (Metric) | " + " | ".join(models) + " |",
        "|---|---|" + "---:|" * len(models),
    ]

    def block(rows: list[tuple[str, str, str]], label: str) -> None:
        cols: list[list[float]] = [[] for _ in models]
        for cat, bench, metric in rows:
            base = 50 + 30 * rng.random()
            vals = [base + k * 1.5 + rng.normal() for k in range(len(models))]
            for c, v in zip(cols, vals):
                c.append(round(v, 2))
            lines.append(f"| {cat} | {bench} ({metric}) | " + " | ".join(f"{c[-1]:.2f}%" for c in cols) + " |")
        means = [round(sum(c) / len(c), 2) for c in cols]
        lines.append(f"| | {label} | " + " | ".join(f"{m:.2f}%" for m in means) + " |")

    block(public, "Public Core Mean")
    block(heldout, "Held-out Mean")
    return "\n".join(lines) + "\n"


#: docs/tables.md, "The noise floor of a setup": a script the page runs (five seeds of one setup).
SEEDS_PY = '''"""Five runs of one setup that differ only by their seed (docs/tables.md, "The noise floor of a setup"):
a linear classifier trained by SGD on scikit-learn's digits, each run's test predictions stored."""

from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split

import labledger

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.5, random_state=0)
for seed in range(5):
    config = {"model": "sgd-logreg", "epochs": 5, "seed": seed}
    clf = SGDClassifier(loss="log_loss", max_iter=5, tol=None, random_state=seed).fit(X_train, y_train)
    pred = clf.predict(X_test)
    rows = [
        {"id": f"d{i}", "task": "digits", "gold": str(g), "pred": str(p)} for i, (g, p) in enumerate(zip(y_test, pred))
    ]
    with labledger.start_run(f"sgd-seed{seed}", group="sgd", config=config) as run:
        run.log_results("test", rows)
'''


#: docs/tables.md, "Contamination": a fine-tuning run whose training mix leaked some test questions.
LEAK_PY = '''"""A fine-tuning run whose training mix holds 60 of its 300 test questions (docs/tables.md,
"Contamination"): word problems made from names, objects, places and numbers; the test predictions
are those of a model that answers what it trained on 95% of the time and anything else 70%."""

import random

import labledger

rng = random.Random(0)
NAMES = ["Ada", "Ben", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun"]
THINGS = ["apples", "books", "coins", "stamps", "shells", "pens", "cards", "marbles"]
PLACES = ["market", "library", "station", "harbour", "museum", "garden"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]


def problem():
    name, thing, place, day = rng.choice(NAMES), rng.choice(THINGS), rng.choice(PLACES), rng.choice(DAYS)
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    text = f"{name} finds {a} {thing} at the {place} on {day} and {b} more the next day. How many {thing} now?"
    return text, str(a + b)


test = dict(problem() for _ in range(300))  # question -> answer (a repeated question is kept once)
questions = list(test)
leaked = questions[:60]
train = [problem() for _ in range(5000)] + [(q, test[q]) for q in leaked]
rng.shuffle(train)
with labledger.start_run("finetune-v2") as run:
    for i in range(0, len(train), 32):
        batch = train[i : i + 32]
        samples = [{"input": f"Question: {q} Answer: {a}", "gold": a} for q, a in batch]
        run.log_batch({"microbatch": i // 32 + 1, "loss": 1.0, "samples": samples})
    rows = []
    for i, q in enumerate(questions):
        right = rng.random() < (0.95 if q in leaked else 0.70)
        pred = test[q] if right else str(int(test[q]) + 1)
        rows.append({"id": f"q{i}", "task": "word-problems", "gold": test[q], "pred": pred, "prompt": q})
    run.log_results("test", rows)
'''


#: docs/tables.md, "Which benchmarks tell checkpoints apart": one run evaluated after every epoch.
CHECKPOINTS_PY = '''"""One training run evaluated on two benchmarks after each of 8 epochs (docs/tables.md, "Which
benchmarks tell checkpoints apart"): a linear classifier trained by SGD on scikit-learn's digits, its
predictions on the held-out half stored per epoch as the result set test-<epoch>, with two tasks:
every digit, and the zeros alone (which it gets right from the first epoch)."""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import train_test_split

import labledger

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.5, random_state=0)
clf = SGDClassifier(loss="log_loss", learning_rate="constant", eta0=0.0002, random_state=0)
classes = np.unique(y)
rng = np.random.default_rng(0)
with labledger.start_run("sgd-slow", config={"eta0": 0.0002, "epochs": 8}) as run:
    for epoch in range(1, 9):
        order = rng.permutation(len(X_train))
        clf.partial_fit(X_train[order], y_train[order], classes=classes)
        pred = clf.predict(X_test)
        rows = [
            {"id": f"d{i}", "task": "digits", "gold": str(g), "pred": str(p)}
            for i, (g, p) in enumerate(zip(y_test, pred))
        ]
        rows += [
            {"id": f"z{i}", "task": "zeros", "gold": str(g), "pred": str(p)}
            for i, (g, p) in enumerate(zip(y_test, pred))
            if g == 0
        ]
        run.log_results(f"test-{epoch}", rows)
        run.log(epoch, accuracy=float((pred == y_test).mean()))
'''


def main() -> None:
    write_jsonl(HERE / "metrics" / "results.jsonl", metrics_rows(np.random.default_rng(0)))
    a = metrics_rows(np.random.default_rng(1), skill=1.3)
    b = metrics_rows(np.random.default_rng(1), skill=1.0)
    write_jsonl(HERE / "metrics" / "a.jsonl", [r for r in a if r["task"] == "sentiment"])
    write_jsonl(HERE / "metrics" / "b.jsonl", [r for r in b if r["task"] == "sentiment"])
    for name, right, price, tokens in (
        ("small", 0.70, 0.15e-6, 420),
        ("medium", 0.80, 0.60e-6, 380),
        ("medium-old", 0.74, 0.60e-6, 560),
        ("large", 0.82, 3.0e-6, 350),
    ):
        write_jsonl(
            HERE / "metrics" / f"{name}.jsonl", cost_rows(np.random.default_rng(len(name)), right, price, tokens)
        )
    write_jsonl(HERE / "calibration" / "results.jsonl", calibration_rows(np.random.default_rng(1)))
    (HERE / "calibration" / "v4_recipe.toml").write_text(V4_RECIPE)
    rng = np.random.default_rng(0)
    write_jsonl(HERE / "sweep" / "val.jsonl", sweep_rows(rng, 2400, "v"))
    write_jsonl(HERE / "sweep" / "test.jsonl", sweep_rows(rng, 2400, "t"))
    (HERE / "sweep" / "boundary-aux-smoke.json").write_text(json.dumps(smoke_report(rng), indent=1) + "\n")
    (HERE / "tables").mkdir(exist_ok=True)
    (HERE / "tables" / "HANDOFF.md").write_text(handoff(np.random.default_rng(3)))
    (HERE / "tables" / "seeds.py").write_text(SEEDS_PY)
    (HERE / "tables" / "leak.py").write_text(LEAK_PY)
    (HERE / "tables" / "checkpoints.py").write_text(CHECKPOINTS_PY)


if __name__ == "__main__":
    main()

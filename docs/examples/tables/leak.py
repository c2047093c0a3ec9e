"""A fine-tuning run whose training mix holds 60 of its 300 test questions (docs/tables.md,
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

"""Run lm-evaluation-harness's ``dummy`` model on tiny local tasks of lm-eval's other multiple-choice
forms and write its output as ``lm_eval --output_path OUT --log_samples`` does.

- ``wino_field``: winogrande's form, one context per choice and a shared continuation, the gold
  index from ``doc_to_text`` naming an integer field;
- ``wino_func``: the same form with ``doc_to_text`` a Python function (``!function``), as
  lm-eval's own ``winogrande`` task has it;
- ``gold_text``: ``doc_to_target`` gives the gold answer's text (lm-eval takes its index among the
  choices);
- ``plain_mc``: the usual form (gold index, one continuation per choice).

Usage: ``python lm_eval_forms_run.py DIR [SEED]``. Nothing is downloaded: the tasks read JSONL files
this script writes (lm_eval_tasks.py), with the Hub disabled.
"""

# ruff: noqa: E402  (the offline switches must be set before the harness is imported)

import os
import pathlib
import sys

from lm_eval_tasks import OFFLINE, Function, save_output, write_task

os.environ.update(OFFLINE)
d = pathlib.Path(sys.argv[1])
d.mkdir(parents=True, exist_ok=True)
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
tasks = d / "tasks"

names = [("Ann", "Bob"), ("the cup", "the jug"), ("Sam", "Samantha"), ("red", "blue"), ("it", "they"), ("x", "y")]
wino = [
    {
        "sentence": f"Because {a} helped {b}, _ was thanked {i}.",
        "option1": a,
        "option2": b,
        "answer": str(1 + i % 2),
        "label": i % 2,
        "contexts": [f"Because {a} helped {b}, {a}", f"Because {a} helped {b}, {b}"],
        "rest": f"was thanked {i}.",
    }
    for i, (a, b) in enumerate(names)
]
write_task(
    tasks, "wino_field", wino, doc_to_text="label", doc_to_choice="contexts", doc_to_target="rest", metrics=["acc"]
)
(tasks / "wino_utils.py").write_text("""def doc_to_text(doc):
    answer_to_num = {"1": 0, "2": 1}
    return answer_to_num[doc["answer"]]


def doc_to_target(doc):
    idx = doc["sentence"].index("_") + 1
    return doc["sentence"][idx:].strip()


def doc_to_choice(doc):
    idx = doc["sentence"].index("_")
    options = [doc["option1"], doc["option2"]]
    return [doc["sentence"][:idx] + opt for opt in options]
""")
write_task(
    tasks,
    "wino_func",
    wino,
    doc_to_text=Function("wino_utils.doc_to_text"),
    doc_to_target=Function("wino_utils.doc_to_target"),
    doc_to_choice=Function("wino_utils.doc_to_choice"),
    metrics=["acc"],
)
colours = ["red", "green", "blue"]
write_task(
    tasks,
    "gold_text",
    [{"question": f"Which colour is number {i}?", "choices": colours, "answer": colours[i % 3]} for i in range(7)],
    doc_to_text="Q: {{question}}\nA:",
    doc_to_choice="choices",
    doc_to_target="answer",
    metrics=["acc", "acc_norm"],
)
write_task(
    tasks,
    "plain_mc",
    [{"question": f"Is {i} even?", "choices": ["yes", "no", "maybe not"], "answer": i % 3} for i in range(5)],
    doc_to_text="{{question}}",
    doc_to_choice="{{choices}}",
    doc_to_target="{{answer}}",
    metrics=["acc", "acc_norm"],
)
import lm_eval
from lm_eval.tasks import TaskManager

res = lm_eval.simple_evaluate(
    model="dummy",
    tasks=["wino_field", "wino_func", "gold_text", "plain_mc"],
    task_manager=TaskManager(include_path=str(tasks)),
    log_samples=True,
    bootstrap_iters=0,
    random_seed=seed,
    numpy_random_seed=seed,
    torch_random_seed=seed,
)
save_output(res, d / "out")

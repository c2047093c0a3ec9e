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
this script writes, with the Hub disabled.
"""

# ruff: noqa: E402  (the offline switches must be set before the harness is imported)

import json
import os
import pathlib
import sys

os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1")
d = pathlib.Path(sys.argv[1])
d.mkdir(parents=True, exist_ok=True)
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
tasks = d / "tasks"
tasks.mkdir(exist_ok=True)

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
(tasks / "wino.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wino))
(tasks / "wino_field.yaml").write_text(f"""task: wino_field
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / "wino.jsonl"}
test_split: test
output_type: multiple_choice
doc_to_text: label
doc_to_choice: contexts
doc_to_target: rest
metric_list:
  - metric: acc
metadata:
  version: 1.0
""")
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
(tasks / "wino_func.yaml").write_text(f"""task: wino_func
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / "wino.jsonl"}
test_split: test
output_type: multiple_choice
doc_to_text: !function wino_utils.doc_to_text
doc_to_target: !function wino_utils.doc_to_target
doc_to_choice: !function wino_utils.doc_to_choice
metric_list:
  - metric: acc
metadata:
  version: 1.0
""")
qa = [
    {
        "question": f"Which colour is number {i}?",
        "choices": ["red", "green", "blue"],
        "answer": ["red", "green", "blue"][i % 3],
    }
    for i in range(7)
]
(tasks / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qa))
(tasks / "gold_text.yaml").write_text(f"""task: gold_text
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / "qa.jsonl"}
test_split: test
output_type: multiple_choice
doc_to_text: "Q: {{{{question}}}}\\nA:"
doc_to_choice: choices
doc_to_target: answer
metric_list:
  - metric: acc
  - metric: acc_norm
metadata:
  version: 1.0
""")
mc = [{"question": f"Is {i} even?", "choices": ["yes", "no", "maybe not"], "answer": i % 3} for i in range(5)]
(tasks / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mc))
(tasks / "plain_mc.yaml").write_text(f"""task: plain_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / "mc.jsonl"}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
metadata:
  version: 1.0
""")
import lm_eval
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager

tm = TaskManager(include_path=str(tasks))
res = lm_eval.simple_evaluate(
    model="dummy",
    tasks=["wino_field", "wino_func", "gold_text", "plain_mc"],
    task_manager=tm,
    log_samples=True,
    bootstrap_iters=0,
    random_seed=seed,
    numpy_random_seed=seed,
    torch_random_seed=seed,
)
tr = EvaluationTracker(output_path=str(d / "out"))
samples = res.pop("samples")
tr.save_results_aggregated(results=res, samples=samples)
for t in res["configs"]:
    tr.save_results_samples(task_name=t, samples=samples[t])

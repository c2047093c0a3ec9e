"""Run lm-evaluation-harness's ``dummy`` model on three tiny local tasks (multiple choice, generative with
two filters, binary with f1/mcc) and write its output as ``lm_eval --output_path OUT --log_samples`` does.

Usage: ``python lm_eval_run.py DIR [SEED]`` (the dummy model's log-likelihoods follow the seed). Nothing is
downloaded: the tasks read JSONL files this script writes (lm_eval_tasks.py), with the Hub disabled.
"""

# ruff: noqa: E402  (the offline switches must be set before the harness is imported)

import os
import pathlib
import sys

from lm_eval_tasks import OFFLINE, save_output, write_task

os.environ.update(OFFLINE)
d = pathlib.Path(sys.argv[1])
d.mkdir(parents=True, exist_ok=True)
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
tasks = d / "tasks"
write_task(
    tasks,
    "tiny_mc",
    [{"question": f"Is {i} even?", "choices": ["yes", "no", "maybe not"], "answer": i % 3} for i in range(8)],
    doc_to_text="{{question}}",
    doc_to_choice="{{choices}}",
    doc_to_target="{{answer}}",
    metrics=["acc", "acc_norm"],
)
write_task(
    tasks,
    "tiny_bool",
    [{"question": f"Is {i} big?", "answer": i % 2} for i in range(7)],
    doc_to_text="{{question}}",
    doc_to_choice=["no", "yes"],
    doc_to_target="{{answer}}",
    metrics=["acc", "f1", "mcc"],
    version=None,
)
write_task(
    tasks,
    "tiny_gen",
    [{"question": f"What is {i}+1?", "answer": "lol" if i % 2 else str(i + 1)} for i in range(6)],
    output_type="generate_until",
    doc_to_text="Q: {{question}}\nA:",
    doc_to_target="{{answer}}",
    until=["\n"],
    metrics=["exact_match"],
    filters={
        "strict-match": [{"function": "regex", "regex_pattern": "(\\d+)"}, {"function": "take_first"}],
        "none": [{"function": "take_first"}],
    },
    version=2.0,
)
import lm_eval
from lm_eval.tasks import TaskManager

res = lm_eval.simple_evaluate(
    model="dummy",
    tasks=["tiny_mc", "tiny_gen", "tiny_bool"],
    task_manager=TaskManager(include_path=str(tasks)),
    log_samples=True,
    bootstrap_iters=200,
    random_seed=seed,
    numpy_random_seed=seed,
    torch_random_seed=seed,
)
save_output(res, d / "out")

"""Run lm-evaluation-harness's ``dummy`` model twice on one tiny local multiple-choice task: zero-shot with
seed 0 into ``DIR/a/out`` and two-shot with seed 1 into ``DIR/b/out``, as ``lm_eval --output_path OUT
--log_samples`` writes them. The same documents with other prompts: their ``prompt_hash`` differs, their
``doc_hash`` does not.

Usage: ``python lm_eval_fewshot_run.py DIR``. Nothing is downloaded: the task reads a JSONL file this script
writes (lm_eval_tasks.py), with the Hub disabled.
"""

# ruff: noqa: E402  (the offline switches must be set before the harness is imported)

import os
import pathlib
import sys

from lm_eval_tasks import OFFLINE, save_output, write_task

os.environ.update(OFFLINE)
d = pathlib.Path(sys.argv[1])
tasks = d / "tasks"
write_task(
    tasks,
    "tiny_mc",
    [{"question": f"Is {i} even?", "choices": ["yes", "no", "maybe not"], "answer": i % 3} for i in range(12)],
    doc_to_text="{{question}}",
    doc_to_choice="{{choices}}",
    doc_to_target="{{answer}}",
    metrics=["acc"],
    fewshot=True,
)
import lm_eval
from lm_eval.tasks import TaskManager

tm = TaskManager(include_path=str(tasks))
for side, shots, seed in (("a", 0, 0), ("b", 2, 1)):
    res = lm_eval.simple_evaluate(
        model="dummy",
        tasks=["tiny_mc"],
        task_manager=tm,
        num_fewshot=shots,
        log_samples=True,
        bootstrap_iters=0,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )
    save_output(res, d / side / "out")

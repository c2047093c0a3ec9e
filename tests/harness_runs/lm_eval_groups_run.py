"""Run lm-evaluation-harness's ``dummy`` model on lm-eval groups and a perplexity task, and write its output
as ``lm_eval --output_path OUT --log_samples`` does.

Two groups: ``grp_size`` (two multiple-choice tasks of 5 and 9 documents, weighted by size) and ``grp_eq``
(a third task and ``grp_size`` as a subgroup, not weighted by size); and ``ppl``, a
``loglikelihood_rolling`` task with ``word_perplexity``, ``byte_perplexity`` and ``bits_per_byte``.
``bootstrap_iters`` is above 0, so lm-eval reports each task's stderr and each group's pooled stderr.

Usage: ``python lm_eval_groups_run.py DIR``. Nothing is downloaded: the tasks read JSONL files this script
writes (lm_eval_tasks.py), with the Hub disabled.
"""

# ruff: noqa: E402  (the offline switches must be set before the harness is imported)

import os
import pathlib
import sys

from lm_eval_tasks import OFFLINE, save_output, write_group, write_task

os.environ.update(OFFLINE, DISABLE_MULTIPROC="1")
d = pathlib.Path(sys.argv[1])
tasks = d / "tasks"
for name, n, k in (("mem_a", 5, 3), ("mem_b", 9, 4), ("mem_c", 4, 2)):
    write_task(
        tasks,
        name,
        [
            {"question": f"{name} q{i}?", "choices": [f"c{j}" + "y" * j for j in range(k)], "answer": i % k}
            for i in range(n)
        ],
        doc_to_text="{{question}}",
        doc_to_choice="{{choices}}",
        doc_to_target="{{answer}}",
        metrics=["acc", "acc_norm"],
    )
write_group(tasks, "grp_size", ["mem_a", "mem_b"], {"acc": True, "acc_norm": True})
write_group(tasks, "grp_eq", ["mem_c", "grp_size"], {"acc": False})
write_task(
    tasks,
    "ppl",
    [{"text": f"The quick brown fox {i} jumps over the lazy dog. " * (1 + i % 3)} for i in range(6)],
    output_type="loglikelihood_rolling",
    doc_to_text="",
    doc_to_target="{{text}}",
    metrics=["word_perplexity", "byte_perplexity", "bits_per_byte"],
)
import lm_eval
from lm_eval.tasks import TaskManager

res = lm_eval.simple_evaluate(
    model="dummy",
    tasks=["grp_eq", "ppl"],
    task_manager=TaskManager(include_path=str(tasks)),
    log_samples=True,
    bootstrap_iters=100,
    random_seed=0,
    numpy_random_seed=0,
    torch_random_seed=0,
)
save_output(res, d / "out")

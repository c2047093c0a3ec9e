"""Run lm-evaluation-harness's ``dummy`` model twice on one tiny local multiple-choice task: zero-shot with
seed 0 into ``DIR/a/out`` and two-shot with seed 1 into ``DIR/b/out``, as ``lm_eval --output_path OUT
--log_samples`` writes them. The same documents with other prompts: their ``prompt_hash`` differs, their
``doc_hash`` does not.

Usage: ``python lm_eval_fewshot_run.py DIR``. Nothing is downloaded: the task reads a JSONL file this script
writes, with the Hub disabled.
"""

# ruff: noqa: E402  (the offline switches must be set before the harness is imported)

import json
import os
import pathlib
import sys

os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1")
d = pathlib.Path(sys.argv[1])
tasks = d / "tasks"
tasks.mkdir(parents=True, exist_ok=True)
mc = [{"question": f"Is {i} even?", "choices": ["yes", "no", "maybe not"], "answer": i % 3} for i in range(12)]
(tasks / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mc))
(tasks / "tiny_mc.yaml").write_text(f"""task: tiny_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / "mc.jsonl"}
    train: {tasks / "mc.jsonl"}
test_split: test
fewshot_split: train
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
metadata:
  version: 1.0
""")
import lm_eval
from lm_eval.loggers import EvaluationTracker
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
    tr = EvaluationTracker(output_path=str(d / side / "out"))
    samples = res.pop("samples")
    tr.save_results_aggregated(results=res, samples=samples)
    tr.save_results_samples(task_name="tiny_mc", samples=samples["tiny_mc"])

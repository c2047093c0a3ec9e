"""Run lm-evaluation-harness's ``dummy`` model on three tiny local tasks (multiple choice, generative with
two filters, binary with f1/mcc) and write its output as ``lm_eval --output_path OUT --log_samples`` does.

Usage: ``python lm_eval_run.py DIR [SEED]`` (the dummy model's log-likelihoods follow the seed). Nothing is
downloaded: the tasks read JSONL files this script writes, with the Hub disabled.
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
mc = [{"question": f"Is {i} even?", "choices": ["yes", "no", "maybe not"], "answer": i % 3} for i in range(8)]
(tasks / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mc))
(tasks / "tiny_mc.yaml").write_text(f"""task: tiny_mc
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
bl = [{"question": f"Is {i} big?", "answer": i % 2} for i in range(7)]
(tasks / "bool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bl))
(tasks / "tiny_bool.yaml").write_text(f"""task: tiny_bool
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / "bool.jsonl"}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: ["no", "yes"]
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
  - metric: f1
  - metric: mcc
""")
gen = [{"question": f"What is {i}+1?", "answer": "lol" if i % 2 else str(i + 1)} for i in range(6)]
(tasks / "gen.jsonl").write_text("".join(json.dumps(r) + "\n" for r in gen))
(tasks / "tiny_gen.yaml").write_text(f"""task: tiny_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {tasks / "gen.jsonl"}
test_split: test
output_type: generate_until
doc_to_text: "Q: {{{{question}}}}\\nA:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
metric_list:
  - metric: exact_match
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "(\\\\d+)"
      - function: take_first
  - name: none
    filter:
      - function: take_first
metadata:
  version: 2.0
""")
import lm_eval
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager

tm = TaskManager(include_path=str(tasks))
res = lm_eval.simple_evaluate(
    model="dummy",
    tasks=["tiny_mc", "tiny_gen", "tiny_bool"],
    task_manager=tm,
    log_samples=True,
    bootstrap_iters=200,
    random_seed=seed,
    numpy_random_seed=seed,
    torch_random_seed=seed,
)
tr = EvaluationTracker(output_path=str(d / "out"))
samples = res.pop("samples")
tr.save_results_aggregated(results=res, samples=samples)
for t in res["configs"]:
    tr.save_results_samples(task_name=t, samples=samples[t])

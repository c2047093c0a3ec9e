"""Run lighteval's dummy model on a tiny local multiple-choice task with corpus-level metrics
(``loglikelihood_f1``, ``mcc``) beside ``acc``, at two few-shot counts (``tiny_mc|0`` and
``tiny_mc|1``) in one invocation, and save results and details.

Usage: ``python lighteval_forms_run.py DIR``. Two shims make lighteval 0.13 run offline: its task registry
imports every built-in task module (some download at import time), so only the custom tasks file is
loaded; and it hashes ``str`` with xxhash, which takes bytes since xxhash 4.
"""

# ruff: noqa: E402  (the offline switches must be set before the harness is imported)

import json
import os
import pathlib
import sys

os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1")
d = pathlib.Path(sys.argv[1])
d.mkdir(parents=True, exist_ok=True)
data = d / "data"
data.mkdir(exist_ok=True)
rows = [{"question": f"Is {i} odd?", "choices": ["no", "yes", "maybe"], "gold": i % 3, "id": str(i)} for i in range(9)]
(data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
(d / "tiny_tasks.py").write_text(f"""
from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc

def prompt(line, task_name: str = None):
    return Doc(task_name=task_name, query=line["question"], choices=[" " + c for c in line["choices"]], gold_index=line["gold"], id=line["id"])

tiny_mc = LightevalTaskConfig(name="tiny_mc", prompt_function=prompt, hf_repo={str(data)!r}, hf_subset="default",
    metrics=[Metrics.loglikelihood_acc, Metrics.loglikelihood_f1, Metrics.mcc], evaluation_splits=["test"],
    few_shots_split="test", few_shots_select="sequential", generation_size=-1)
TASKS_TABLE = [tiny_mc]
""")
import xxhash

# lighteval 0.13 hashes str with xxhash, which (4.x) takes only bytes
_xxh64 = xxhash.xxh64
xxhash.xxh64 = lambda data=b"", *a, **k: _xxh64(data.encode() if isinstance(data, str) else data, *a, **k)
from lighteval.tasks.registry import Registry

# lighteval's registry imports every built-in task module; some download at import time (tiny_benchmarks)
# or query the Hub (mt_bench): load only the custom tasks file.
Registry.load_all_task_configs = staticmethod(
    lambda custom_tasks=None, load_multilingual=False: Registry._extract_configs(
        Registry.create_custom_tasks_module(custom_tasks)
    )
)
from lighteval.logging.evaluation_tracker import EvaluationTracker
from lighteval.models.dummy.dummy_model import DummyModelConfig
from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters

tracker = EvaluationTracker(output_dir=str(d / "out"), save_details=True)
params = PipelineParameters(
    launcher_type=ParallelismManager.NONE, custom_tasks_directory=str(d / "tiny_tasks.py"), bootstrap_iters=100
)
pipe = Pipeline(
    tasks="tiny_mc|0,tiny_mc|1",
    pipeline_parameters=params,
    evaluation_tracker=tracker,
    model_config=DummyModelConfig(model_name="dummy", seed=42),
)
pipe.evaluate()
pipe.save_and_push_results()

"""Run inspect_ai's ``mockllm/model`` on a tiny MemoryDataset (6 samples x 2 epochs, a ``passage`` metadata
field as the cluster) and write one ``.eval`` and one ``.json`` log.

Usage: ``python inspect_run.py DIR``. The mock's outputs carry token usage, so inspect does not fetch a
tiktoken encoding (it would download one otherwise).
"""

import itertools
import os
import pathlib
import sys

os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", INSPECT_DISPLAY="none")
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import accuracy, includes, stderr
from inspect_ai.solver import generate

d = pathlib.Path(sys.argv[1])
d.mkdir(parents=True, exist_ok=True)
samples = [
    Sample(id=f"q{i}", input=f"Say something {i}", target="yes" if i % 3 else "no", metadata={"passage": f"p{i // 2}"})
    for i in range(6)
]
counter = itertools.count()


def outputs(input, tools, tool_choice, config):
    k = next(counter)
    text = "yes" if k % 4 else "no"
    out = ModelOutput.from_content(model="mockllm", content=text)
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


task = Task(
    name="tiny-qa",
    dataset=MemoryDataset(samples),
    solver=[generate()],
    scorer=includes(),
    epochs=2,
    metrics=[accuracy(), stderr(), stderr(cluster="passage")],
)
for fmt in ("eval", "json"):
    model = get_model("mockllm/model", custom_outputs=outputs)
    logs = inspect_eval(task, model=model, log_dir=str(d / fmt), log_format=fmt, display="none", max_samples=1)
    print(logs[0].location, logs[0].status)

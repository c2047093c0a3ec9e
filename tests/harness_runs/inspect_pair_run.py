"""Run inspect_ai's ``mockllm/model`` as two models (other fixed answers) on one tiny MemoryDataset with a
``passage`` metadata field as the cluster (``stderr(cluster="passage")``), and write each one's ``.eval``
log into ``DIR/a`` and ``DIR/b``: the same samples, so the two can be compared item by item.

Usage: ``python inspect_pair_run.py DIR``. The mock's outputs carry token usage, so inspect does not
fetch a tiktoken encoding (it would download one otherwise).
"""

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
samples = [
    Sample(id=f"q{i}", input=f"Is {i} odd?", target="yes" if i % 2 else "no", metadata={"passage": f"p{i // 4}"})
    for i in range(12)
]


def answers(model: str):
    """Model ``a`` says yes to every third question, ``b`` to the odd ones but q5 and q9."""

    def outputs(input, tools, tool_choice, config):
        i = int(str(input[-1].content).split()[1])
        yes = i % 3 == 0 if model == "a" else (i % 2 == 1 and i not in (5, 9))
        out = ModelOutput.from_content(model="mockllm", content="yes" if yes else "no")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    return outputs


task = Task(
    name="odd-qa",
    dataset=MemoryDataset(samples),
    solver=[generate()],
    scorer=includes(),
    metrics=[accuracy(), stderr(), stderr(cluster="passage")],
)
for side in ("a", "b"):
    model = get_model("mockllm/model", custom_outputs=answers(side))
    (log,) = inspect_eval(task, model=model, log_dir=str(d / side), display="none", max_samples=1)
    print(log.location, log.status)

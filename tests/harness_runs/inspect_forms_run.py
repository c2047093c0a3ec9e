"""Run inspect_ai's ``mockllm/model`` on a tiny MemoryDataset with the forms the plain run lacks, and
write one ``.eval`` log:

- a scorer whose value is a dict (``judge``: ``{"a": ..., "b": ...}``, a mean and a stderr per key)
  beside a plain one (``includes``);
- two epoch reducers (``Epochs(2, ["mean", "max"])``): inspect reports each scorer once per reducer;
- errored samples: the solver raises on two of the eight samples, and ``fail_on_error=0.5`` lets
  the evaluation finish (status ``success``) with 6 of 8 samples completed.

Usage: ``python inspect_forms_run.py DIR``. The mock's outputs carry token usage, so inspect does not
fetch a tiktoken encoding (it would download one otherwise).
"""

import itertools
import os
import pathlib
import sys

os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", INSPECT_DISPLAY="none")
from inspect_ai import Epochs, Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, includes, mean, scorer, stderr
from inspect_ai.solver import Generate, TaskState, generate, solver

d = pathlib.Path(sys.argv[1])
d.mkdir(parents=True, exist_ok=True)
samples = [Sample(id=f"q{i}", input=f"Say something {i}", target="yes" if i % 3 else "no") for i in range(8)]
counter = itertools.count()


def outputs(input, tools, tool_choice, config):
    k = next(counter)
    text = "yes" if k % 4 else "no"
    out = ModelOutput.from_content(model="mockllm", content=text)
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


@solver
def flaky():
    """Raise on samples q3 and q6 (every epoch): inspect records the error and scores nothing."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.sample_id in ("q3", "q6"):
            raise RuntimeError(f"tool crashed on {state.sample_id}")
        return state

    return solve


@scorer(metrics={"a": [mean(), stderr()], "b": [mean(), stderr()]})
def judge():
    """A dict-valued score: ``a`` = the answer contains the target, ``b`` = its length, in tenths."""

    async def score(state: TaskState, target: Target) -> Score:
        text = state.output.completion
        return Score(value={"a": float(target.text in text), "b": len(text) / 10}, answer=text)

    return score


task = Task(
    name="forms-qa",
    dataset=MemoryDataset(samples),
    solver=[flaky(), generate()],
    scorer=[includes(), judge()],
    epochs=Epochs(2, ["mean", "max"]),
    fail_on_error=0.5,
)
model = get_model("mockllm/model", custom_outputs=outputs)
logs = inspect_eval(task, model=model, log_dir=str(d / "eval"), log_format="eval", display="none", max_samples=1)
print(logs[0].location, logs[0].status)

"""An inspect_ai eval whose mock model reports usage (tokens and cost) on every call: 4 samples x 2
epochs through inspect's own `mockllm/model` with custom outputs. Writes the log under ARGV[1]/logs."""

import sys

from inspect_ai import Task, task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

outputs = []
for i in range(8):
    out = ModelOutput.from_content("mockllm/model", "2" if i % 3 else "3")
    out.usage = ModelUsage(
        input_tokens=10 + i, output_tokens=5 + 2 * i, total_tokens=15 + 3 * i, total_cost=0.00001 * (i + 1)
    )
    outputs.append(out)


@task
def usage_qa():
    samples = [Sample(input=f"What is {k} minus {k - 2}?", target="2", id=f"s{k}") for k in range(4)]
    return Task(dataset=samples, solver=generate(), scorer=match(), epochs=2)


inspect_eval(
    usage_qa(),
    model=get_model("mockllm/model", custom_outputs=outputs),
    log_dir=f"{sys.argv[1]}/logs",
    display="none",
)

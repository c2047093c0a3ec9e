"""Run crfm-helm 0.5.16's ``helm-run`` with its built-in ``simple/model1`` (it answers the last word
of the prompt) on a tiny local scenario with a train, a valid and a test split, two train trials and
two perturbations (``lowercase``, ``typos``); the output is tests/fixtures/helm/splits/.

Usage: ``python helm_run.py DIR`` (writes ``DIR/benchmark_output/runs/splits/<run>/``). crfm-helm
cannot be installed beside the other harnesses (it pins torch and pandas), so the tests do not run
this script: they read its committed output (see tests/fixtures/helm/README.md). Nothing is
downloaded.
"""

import random
import sys
from pathlib import Path
from typing import ClassVar

from helm.benchmark.adaptation.adapter_spec import AdapterSpec
from helm.benchmark.augmentations.data_augmenter import DataAugmenterSpec
from helm.benchmark.augmentations.perturbation import PerturbationSpec
from helm.benchmark.metrics.common_metric_specs import get_exact_match_metric_specs
from helm.benchmark.run_spec import RunSpec, run_spec_function
from helm.benchmark.scenarios.scenario import (
    CORRECT_TAG,
    TEST_SPLIT,
    TRAIN_SPLIT,
    VALID_SPLIT,
    Input,
    Instance,
    Output,
    Reference,
    Scenario,
    ScenarioSpec,
)

WORDS = ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine"]


class ArithScenario(Scenario):
    """``What is a+b? I think <word>``: the word is right for some instances, wrong for others."""

    name = "arith_words"
    description = "Sums of one-digit numbers, answered in words."
    tags: ClassVar[list[str]] = ["question answering"]

    def get_instances(self, output_path: str) -> list[Instance]:
        rng = random.Random(0)
        out = []
        for split, n in ((TRAIN_SPLIT, 3), (VALID_SPLIT, 5), (TEST_SPLIT, 8)):
            for _ in range(n):
                a, b = rng.randrange(5), rng.randrange(5)
                right = WORDS[a + b]
                guess = right if rng.random() < (0.7 if split == TEST_SPLIT else 0.4) else WORDS[(a + b + 1) % 10]
                out.append(
                    Instance(
                        input=Input(text=f"What is {a}+{b}? I think {guess}"),
                        references=[Reference(Output(text=right), tags=[CORRECT_TAG])],
                        split=split,
                    )
                )
        return out


@run_spec_function("arith_words")
def get_arith_words_run_spec() -> RunSpec:
    adapter_spec = AdapterSpec(
        method="generation",
        instructions="",
        input_prefix="",
        input_suffix="\n",
        output_prefix="",
        output_suffix="\n",
        max_train_instances=1,
        num_train_trials=2,
        max_eval_instances=100,
        num_outputs=1,
        max_tokens=5,
        temperature=0.0,
        stop_sequences=["\n"],
        model_deployment="simple/model1",
        model="simple/model1",
    )
    perturbations = [
        PerturbationSpec(
            class_name="helm.benchmark.augmentations.lowercase_perturbation.LowerCasePerturbation", args={}
        ),
        PerturbationSpec(
            class_name="helm.benchmark.augmentations.typos_perturbation.TyposPerturbation", args={"prob": 0.1}
        ),
    ]
    return RunSpec(
        name="arith_words",
        scenario_spec=ScenarioSpec(class_name=f"{__name__}.ArithScenario", args={}),
        adapter_spec=adapter_spec,
        metric_specs=get_exact_match_metric_specs(),
        data_augmenter_spec=DataAugmenterSpec(
            perturbation_specs=perturbations,
            should_augment_train_instances=False,
            should_include_original_train=True,
            should_augment_eval_instances=True,
            should_include_original_eval=True,
        ),
        groups=["arith_words"],
    )


if __name__ == "__main__":
    from helm.benchmark.run import main

    out = Path(sys.argv[1])
    sys.argv = [
        "helm-run",
        "--run-entries",
        "arith_words:model=simple/model1",
        "--suite",
        "splits",
        "--output-path",
        str(out / "benchmark_output"),
        "--local-path",
        str(out / "prod_env"),
        "--max-eval-instances",
        "100",
    ]
    main()

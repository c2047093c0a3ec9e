"""LedgerCallback / LedgerTrainer: a tiny BERT built from a config (no downloads) trained for a few
steps on generated text; the ledger is read back and checked record by record."""

from __future__ import annotations

import hashlib
import math
import os
import random

import orjson
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from click.testing import CliRunner  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForSequenceClassification,
    BertTokenizerFast,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

import labledger  # noqa: E402
from labledger.cli import main  # noqa: E402
from labledger.integrations.hf import LOSS_REPORTING, LedgerCallback, LedgerTrainer  # noqa: E402

WORDS = ["the", "movie", "plot", "was", "very", "actor"]
KEYWORD = {0: "bad", 1: "fine", 2: "good"}
ID2LABEL = {0: "negative", 1: "neutral", 2: "positive"}
MAX_LEN = 12
GA = 2
STEPS = 6


def make_tokenizer(folder):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *KEYWORD.values()]
    path = folder / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n")
    return BertTokenizerFast(vocab=str(path))


def make_rows(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        y = rng.randrange(3)
        words = [rng.choice(WORDS) for _ in range(4)]
        words.insert(rng.randrange(5), KEYWORD[y])
        rows.append((" ".join(words), y))
    return rows


class TextDataset(torch.utils.data.Dataset):
    def __init__(self, rows, tok):
        self.rows = rows
        self.enc = tok([r[0] for r in rows], padding="max_length", max_length=MAX_LEN, truncation=True)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {
            "input_ids": torch.tensor(self.enc["input_ids"][i]),
            "attention_mask": torch.tensor(self.enc["attention_mask"][i]),
            "labels": torch.tensor(self.rows[i][1]),
        }


def make_model():
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=5 + len(WORDS) + len(KEYWORD),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=3,
        id2label=ID2LABEL,
        label2id={v: k for k, v in ID2LABEL.items()},
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertForSequenceClassification(config)


def make_args(out, **kw):
    base = dict(
        output_dir=str(out),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=GA,
        max_steps=STEPS,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=3,
        save_strategy="steps",
        save_steps=3,
        report_to="none",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        learning_rate=1e-3,
        dataloader_num_workers=0,
    )
    base.update(kw)
    return TrainingArguments(**base)


def accuracy(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((logits.argmax(-1) == labels).mean())}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("hf")
    tok = make_tokenizer(tmp)
    train_rows, eval_rows = make_rows(64, 0), make_rows(16, 1)
    cb = LedgerCallback("tiny-bert", group="hf", tags=("test",), ledger=tmp / "ledger")
    trainer = LedgerTrainer(
        model=make_model(),
        args=make_args(tmp / "out", metric_for_best_model="accuracy"),
        train_dataset=TextDataset(train_rows, tok),
        eval_dataset=TextDataset(eval_rows, tok),
        processing_class=tok,
        compute_metrics=accuracy,
        callbacks=[cb],
    )
    trainer.train()
    view = labledger.open_ledger(tmp / "ledger").run(cb.run.id)
    return {"tmp": tmp, "tok": tok, "trainer": trainer, "cb": cb, "view": view, "train_rows": train_rows}


def test_run_config_and_status(trained):
    view, trainer = trained["view"], trained["trainer"]
    assert view.status == "finished" and view.name == "tiny-bert" and view.group == "hf"
    cfg = view.config
    assert cfg["training_args"]["gradient_accumulation_steps"] == GA
    assert cfg["training_args"]["learning_rate"] == 1e-3
    assert cfg["model"]["hidden_size"] == 32 and cfg["model"]["num_hidden_layers"] == 2
    assert cfg["model"]["id2label"] == {str(k): v for k, v in ID2LABEL.items()}
    assert cfg["effective_batch_size"] == 4 * GA and cfg["world_size"] == 1
    assert cfg["parameters"] == sum(p.numel() for p in trainer.model.parameters())
    assert cfg["loss_reporting"] == LOSS_REPORTING
    assert cfg["trainer"]["model_accepts_loss_kwargs"] == trainer.model_accepts_loss_kwargs
    assert view.meta["packages"]["transformers"] == transformers.__version__


def test_history_is_what_the_trainer_reported(trained):
    view, trainer = trained["view"], trained["trainer"]
    history = list(view.history())
    log_history = trainer.state.log_history
    assert len(history) == len(log_history)
    kinds = []
    for mine, theirs in zip(history, log_history):
        assert mine["step"] == theirs["step"]
        for k, v in theirs.items():
            if k != "step":
                assert mine[k] == v, k
        kinds.append(mine["kind"])
    assert kinds == ["train", "eval", "train", "train", "eval", "summary"]
    train = [h for h in history if h["kind"] == "train"]
    assert all(h["gradient_accumulation_steps"] == GA and h["interval_steps"] == 2 for h in train)
    # What the loss means: from the microbatch records of each interval.
    batches = list(view.batches())
    last = 0
    for h in train:
        mbs = [b for b in batches if last < b["optimizer_step"] <= h["step"]]
        last = h["step"]
        assert h["microbatches"] == len(mbs) == GA * h["interval_steps"]
        assert h["microbatch_mean_loss"] == pytest.approx(sum(b["loss"] for b in mbs) / len(mbs), rel=1e-12)
        divisor = 1 if trainer.model_accepts_loss_kwargs else GA
        expected = sum(b["trainer_loss"] for b in mbs) / h["interval_steps"] / divisor
        assert h["loss"] == pytest.approx(expected, rel=1e-5)
    notes = [n["text"] for n in view.notes()]
    ratio = train[0]["loss"] / train[0]["microbatch_mean_loss"]
    if abs(ratio - GA) < 0.05 * GA:
        assert any(f"gradient_accumulation_steps = {GA}" in n for n in notes)
    else:
        assert notes == []


def test_every_microbatch_and_sample(trained):
    view, trained_rows, tok = trained["view"], trained["train_rows"], trained["tok"]
    text_to_label = {tok.decode(tok(t)["input_ids"], skip_special_tokens=True): ID2LABEL[y] for t, y in trained_rows}
    batches = list(view.batches())
    assert [b["microbatch"] for b in batches] == list(range(1, STEPS * GA + 1))
    assert [b["optimizer_step"] for b in batches] == [1 + i // GA for i in range(STEPS * GA)]
    assert [b["examples_seen"] for b in batches] == [4 * (i + 1) for i in range(STEPS * GA)]
    for b in batches:
        assert b["batch_size"] == len(b["samples"]) == 4
        ces = []
        for s in b["samples"]:
            assert s["gold"] == text_to_label[s["input"]]
            assert set(s["probabilities"]) == set(ID2LABEL.values())
            assert sum(s["probabilities"].values()) == pytest.approx(1.0, abs=1e-12)
            assert s["prediction"] == max(s["probabilities"], key=s["probabilities"].get)
            assert s["cross_entropy"] == pytest.approx(-math.log(s["probabilities"][s["gold"]]), rel=1e-12)
            ces.append(s["cross_entropy"])
        assert b["loss"] == pytest.approx(sum(ces) / len(ces), rel=1e-12)
        # BERT's classification loss is the mean cross-entropy of the microbatch
        assert b["trainer_loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert b["forward_ms"] > 0 and b["gpu_allocated_mib"] is None


def test_probabilities_recomputed_from_the_saved_checkpoint(trained):
    """Microbatches of optimizer step 4 ran on the weights saved at step 3: recompute them."""
    from safetensors.torch import load_file

    view, tok = trained["view"], trained["tok"]
    ck = next(c for c in view.checkpoints() if c["step"] == 3)
    model = make_model()
    model.load_state_dict(load_file(ck["path"]), strict=False)
    model.eval()
    for b in (b for b in view.batches() if b["optimizer_step"] == 4):
        enc = tok([s["input"] for s in b["samples"]], padding="max_length", max_length=MAX_LEN, return_tensors="pt")
        with torch.no_grad():
            probs = torch.softmax(model(**enc).logits.double(), -1).numpy()
        for s, p in zip(b["samples"], probs):
            assert [s["probabilities"][ID2LABEL[j]] for j in range(3)] == pytest.approx(p.tolist(), abs=1e-5)


def test_checkpoints_with_sha256(trained):
    view = trained["view"]
    cks = list(view.checkpoints())
    assert [c["step"] for c in cks] == [3, 6]
    evals = [h for h in view.history() if h["kind"] == "eval"]
    for c, e in zip(cks, evals):
        assert c["path"].endswith(f"checkpoint-{c['step']}/model.safetensors")
        data = open(c["path"], "rb").read()
        assert c["sha256"] == hashlib.sha256(data).hexdigest() and c["size"] == len(data)
        assert c["metrics"]["eval_loss"] == e["eval_loss"]


def test_round_trip_export_then_import(trained, tmp_path):
    view = trained["view"]
    folder = tmp_path / "exported"
    folder.mkdir()
    runner = CliRunner()
    for what, name in (("batches", "batches.jsonl"), ("history", "history.jsonl")):
        res = runner.invoke(
            main, ["export", view.id, "--what", what, "--out", str(folder / name), "--ledger", str(view.ledger.root)]
        )
        assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["import", str(folder), "--ledger", str(tmp_path / "fresh"), "--json"])
    assert res.exit_code == 0, res.output
    fresh = labledger.open_ledger(tmp_path / "fresh")
    [info] = fresh.runs()
    copy = fresh.run(info.id)
    assert list(copy.batches()) == list(view.batches())
    assert list(copy.history()) == list(view.history())
    assert copy.meta["started"] == view.batches().__next__()["time"]


class Boom(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 2:
            raise RuntimeError("out of memory (simulated)")


def test_failure_marks_the_run_failed(tmp_path):
    tok = make_tokenizer(tmp_path)
    cb = LedgerCallback("boom", ledger=tmp_path / "ledger")
    trainer = LedgerTrainer(
        model=make_model(),
        args=make_args(tmp_path / "out", eval_strategy="no", save_strategy="no"),
        train_dataset=TextDataset(make_rows(32, 2), tok),
        processing_class=tok,
        callbacks=[cb, Boom()],
    )
    with pytest.raises(RuntimeError, match="simulated"):
        trainer.train()
    view = labledger.open_ledger(tmp_path / "ledger").run(cb.run.id)
    assert view.status == "failed" and "out of memory (simulated)" in view.meta["error"]
    assert len(list(view.batches())) == 2 * GA


def test_only_the_main_process_writes(tmp_path):
    cb = LedgerCallback("rank1", ledger=tmp_path / "ledger")
    args = make_args(tmp_path / "out")
    state = TrainerState(is_world_process_zero=False, is_local_process_zero=False)
    control = TrainerControl()
    model = make_model()
    cb.on_train_begin(args, state, control, model=model)
    cb.on_log(args, state, control, logs={"loss": 1.0})
    cb.on_evaluate(args, state, control, metrics={"eval_loss": 1.0})
    cb.on_save(args, state, control)
    cb.on_train_end(args, state, control)
    assert cb.run is None
    assert not (tmp_path / "ledger").exists()


def test_plain_callback_as_context_manager_marks_failure(tmp_path):
    tok = make_tokenizer(tmp_path)
    from transformers import Trainer

    with pytest.raises(RuntimeError, match="simulated"):
        with LedgerCallback("ctx", ledger=tmp_path / "ledger", finish_on_train_end=False) as cb:
            trainer = Trainer(
                model=make_model(),
                args=make_args(tmp_path / "out", eval_strategy="no", save_strategy="no", logging_steps=1),
                train_dataset=TextDataset(make_rows(32, 3), tok),
                processing_class=tok,
                callbacks=[cb, Boom()],
            )
            trainer.train()
    view = labledger.open_ledger(tmp_path / "ledger").run(cb.run.id)
    assert view.status == "failed"
    assert [h["step"] for h in view.history()] == [1]  # step 2 raised before its logging
    assert list(view.batches()) == []  # a plain Trainer logs no microbatches


def test_scalars_at_the_global_step(trained):
    """Every number the Trainer logged (training intervals and evaluations, not the end summary) is a
    scalar at global_step under the Trainer's name, so runs have curves and can be overlaid."""
    view, trainer = trained["view"], trained["trainer"]
    logged = [e for e in trainer.state.log_history if "train_runtime" not in e]
    assert [sorted(k for k in e if k != "step") for e in logged][:2] == [
        ["epoch", "grad_norm", "learning_rate", "loss"],
        ["epoch", "eval_accuracy", "eval_loss", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second"],
    ]
    records = [{k: v for k, v in r.items() if k != "time"} for r in view.scalars()]
    assert records == [dict(e) for e in logged]
    assert [r["step"] for r in records] == [2, 3, 4, 6, 6]
    [info] = view.ledger.runs()
    assert info.summary["steps"] == STEPS
    res = CliRunner().invoke(main, ["runs", "--json", "--ledger", str(view.ledger.root)])
    [doc] = orjson.loads(res.stdout)["runs"]
    assert doc["summary"]["steps"] == STEPS and doc["summary"]["scalar_records"] == 5


def test_headline_is_the_chosen_metric_never_timings(trained):
    view, trainer = trained["view"], trained["trainer"]
    last_eval = [e for e in trainer.state.log_history if "eval_loss" in e][-1]
    summary = next(e for e in trainer.state.log_history if "train_runtime" in e)
    headline = view.summary["headline"]
    assert list(headline) == ["eval_accuracy", "eval_loss", "train_loss"]
    assert headline == {
        "eval_accuracy": last_eval["eval_accuracy"],
        "eval_loss": last_eval["eval_loss"],
        "train_loss": summary["train_loss"],
    }
    res = CliRunner().invoke(main, ["runs", "--ledger", str(view.ledger.root)], env={"COLUMNS": "160"})
    assert res.exit_code == 0 and "eval_accuracy=" in res.output and "runtime" not in res.output


def test_show_lists_the_arguments_that_differ_from_the_defaults(trained):
    view = trained["view"]
    root = str(view.ledger.root)
    defaults = view.meta["config_defaults"]
    # what the run set differently from TrainingArguments(output_dir=...) and BertConfig()
    assert {"learning_rate", "max_steps", "gradient_accumulation_steps", "metric_for_best_model"} <= set(
        defaults["training_args"]
    )
    assert "adam_beta1" not in defaults["training_args"] and len(defaults["training_args"]) < 25
    assert defaults["training_args"]["learning_rate"] == TrainingArguments.__dataclass_fields__["learning_rate"].default
    assert {"hidden_size", "num_hidden_layers", "id2label"} <= set(defaults["model"])
    assert defaults["model"]["hidden_size"] == BertConfig().hidden_size

    env = {"COLUMNS": "100"}
    short = CliRunner().invoke(main, ["show", view.id, "--ledger", root], env=env)
    assert short.exit_code == 0, short.output
    lines = short.output.splitlines()
    config = lines[
        lines.index(next(ln for ln in lines if ln.startswith("config"))) : lines.index(
            next(ln for ln in lines if ln.startswith("records"))
        )
    ]
    assert len(config) < 70, len(config)  # was one row per key: 227 lines
    assert sum("training_args." in ln for ln in config) == len(defaults["training_args"]) + 1
    assert any("training_args.learning_rate" in ln and "0.001  (default 5e-05)" in ln for ln in lines)
    assert any("model.hidden_size" in ln and "32  (default 768)" in ln for ln in lines)
    rest = sum(  # leaves: accelerator_config counts its keys
        len(v) if isinstance(v, dict) and v else 1
        for k, v in view.config["training_args"].items()
        if k not in defaults["training_args"]
    )
    assert any("training_args.*" in ln and f"{rest} more at their defaults" in ln for ln in lines)
    assert "adam_beta1" not in short.output
    assert f"({len(LOSS_REPORTING)} characters)" in short.output  # long prose is cut
    assert f"labledger show {view.id} --all-config lists them all" in lines[-1]

    full = CliRunner().invoke(main, ["show", view.id, "--all-config", "--ledger", root], env=env)
    assert full.exit_code == 0 and "training_args.adam_beta1" in full.output and "default" not in full.output
    assert len(full.output.splitlines()) > len(lines) + rest
    doc = orjson.loads(CliRunner().invoke(main, ["show", view.id, "--json", "--ledger", root]).stdout)
    assert doc["config"] == view.config  # the JSON keeps every key

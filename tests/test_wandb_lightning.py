"""Lightning's own ``WandbLogger`` with labledger.wandb standing in for ``wandb`` (#43): a tiny torch
model trains through ``trainer.fit``; the run holds what Lightning's CSVLogger saw, the hyperparameters
and the checkpoint ``log_model=True`` asks for."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import sys

import pytest

torch = pytest.importorskip("torch")
pl = pytest.importorskip("lightning.pytorch")
from lightning.pytorch.loggers import CSVLogger, WandbLogger  # noqa: E402

import labledger  # noqa: E402
import labledger.wandb  # noqa: E402


@pytest.fixture
def stand_in(monkeypatch):
    """``sys.modules["wandb"]`` is labledger.wandb for the test, with no real ``wandb.*`` submodule left
    in ``sys.modules`` (``from wandb.sdk.lib import RunDisabled`` must find labledger's); all restored after."""
    saved = {k: v for k, v in sys.modules.items() if k == "wandb" or k.startswith("wandb.")}
    for key in saved:
        del sys.modules[key]
    sys.modules["wandb"] = labledger.wandb
    yield labledger.wandb
    if labledger.wandb.run is not None:
        labledger.wandb.finish()
    for key in [k for k in sys.modules if k == "wandb" or k.startswith("wandb.")]:
        del sys.modules[key]
    sys.modules.update(saved)


class Tiny(pl.LightningModule):
    def __init__(self, lr: float = 0.1, hidden: int = 4):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def _loader(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(32, 4, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


def test_lightning_wandb_logger_trains_into_a_ledger(tmp_path, stand_in, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    logger = WandbLogger(project="pl", name="tiny", save_dir=str(tmp_path), log_model=True, tags=["pl"])
    csv_logger = CSVLogger(str(tmp_path / "csv"))
    ckpt = pl.callbacks.ModelCheckpoint(monitor="val_loss", save_top_k=1)
    trainer = pl.Trainer(
        max_epochs=2,
        logger=[logger, csv_logger],
        callbacks=[ckpt],
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(Tiny(), _loader(0), _loader(1))
    run = logger.experiment
    assert isinstance(run, stand_in.Run) and run is stand_in.run
    logger.log_table("preds", columns=["x", "y"], data=[[1, 0], [2, 1]])
    stand_in.finish()

    view = labledger.open_ledger(tmp_path / ".labledger").run(logger.version)
    assert view.name == "tiny" and view.group == "pl" and view.tags == ["pl"] and view.status == "finished"
    assert view.config == {"lr": 0.1, "hidden": 4}
    # every value Lightning's CSVLogger wrote, at the same global step (WandbLogger adds trainer/global_step)
    with open(f"{csv_logger.log_dir}/metrics.csv") as f:
        expected = sorted(
            (int(row["step"]), k, float(v)) for row in csv.DictReader(f) for k, v in row.items() if k != "step" and v
        )
    rows = list(view.scalars())
    got = sorted(
        (r["trainer/global_step"], k, v)
        for r in rows
        for k, v in r.items()
        if k not in ("step", "time", "trainer/global_step")
    )
    assert len(got) == len(expected) > 10
    for (gs, gk, gv), (es, ek, ev) in zip(got, expected, strict=True):
        assert (gs, gk) == (es, ek) and math.isclose(gv, ev, rel_tol=1e-6)
    defs = json.loads((view.dir / "files" / "wandb-metrics.json").read_text())
    assert [d["name"] for d in defs] == ["trainer/global_step", "*"] and defs[1]["step_metric"] == "trainer/global_step"
    # log_model=True: the best checkpoint as a model artifact, byte for byte
    media = [json.loads(x) for x in (view.dir / "media.jsonl").read_text().splitlines()]
    (art,) = [m for m in media if m["kind"] == "artifact"]
    assert art["type"] == "model" and art["name"] == f"model-{view.id}" and art["aliases"] == ["latest", "best"]
    (stored,) = art["files"]
    with open(ckpt.best_model_path, "rb") as f:
        assert stored["sha256"] == hashlib.sha256(f.read()).hexdigest()
    assert [m["rows"] for m in media if m["kind"] == "table"] == [2]

"""LedgerLogger: a tiny Lightning module trained for a few steps next to Lightning's own CSVLogger;
the ledger is read back and compared with what Lightning wrote."""

from __future__ import annotations

import csv
import hashlib
import math

import pytest

torch = pytest.importorskip("torch")
pl = pytest.importorskip("lightning.pytorch")
from click.testing import CliRunner  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402
from lightning.pytorch.utilities.rank_zero import rank_zero_only  # noqa: E402

import labledger  # noqa: E402
from labledger.cli import main  # noqa: E402
from labledger.integrations.lightning import LedgerLogger  # noqa: E402


class TinyText(pl.LightningModule):
    """A bag-of-words classifier over generated token ids."""

    def __init__(self, vocab: int = 20, hidden: int = 8, lr: float = 0.1, fail_at: int | None = None):
        super().__init__()
        self.save_hyperparameters()
        self.emb = torch.nn.EmbeddingBag(vocab, hidden)
        self.out = torch.nn.Linear(hidden, 2)

    def forward(self, x):
        return self.out(self.emb(x))

    def training_step(self, batch, batch_idx):
        if self.hparams.fail_at is not None and self.global_step == self.hparams.fail_at:
            raise RuntimeError("diverged (simulated)")
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def loader(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 20, (48, 6), generator=g)
    y = (x < 10).sum(dim=1).gt(3).long()
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


def fit(tmp_path, **logger_kw):
    torch.manual_seed(0)
    ledger_logger = LedgerLogger("tiny-text", ledger=tmp_path / "ledger", **logger_kw)
    csv_logger = CSVLogger(str(tmp_path / "csv"))
    ckpt = pl.callbacks.ModelCheckpoint(monitor="val_loss", save_top_k=2, save_last=True)
    trainer = pl.Trainer(
        max_epochs=3,
        logger=[ledger_logger, csv_logger],
        callbacks=[ckpt],
        log_every_n_steps=2,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        default_root_dir=str(tmp_path / "root"),
    )
    return trainer, ledger_logger, csv_logger, ckpt


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("pl")
    trainer, logger, csv_logger, ckpt = fit(tmp, group="lightning", tags=("t",))
    trainer.fit(TinyText(), loader(0), loader(1))
    view = labledger.open_ledger(tmp / "ledger").run(logger.version)
    return {"tmp": tmp, "trainer": trainer, "logger": logger, "csv": csv_logger, "ckpt": ckpt, "view": view}


def test_status_and_hyperparameters(trained):
    view = trained["view"]
    assert view.status == "finished" and view.name == "tiny-text" and view.group == "lightning"
    assert view.tags == ["t"]
    assert view.config == {"vocab": 20, "hidden": 8, "lr": 0.1, "fail_at": None}


def test_metrics_match_lightnings_csv_logger(trained):
    view, csv_logger = trained["view"], trained["csv"]
    with open(f"{csv_logger.log_dir}/metrics.csv") as f:
        expected = []
        for row in csv.DictReader(f):
            for key, value in row.items():
                if key != "step" and value != "":
                    expected.append((int(row["step"]), key, float(value)))
    got = [(r["step"], k, v) for r in view.scalars() for k, v in r.items() if k not in ("step", "time")]
    assert len(got) == len(expected)
    for (gs, gk, gv), (es, ek, ev) in zip(sorted(got), sorted(expected)):
        assert (gs, gk) == (es, ek) and math.isclose(gv, ev, rel_tol=1e-6)
    assert {k for _, k, _ in got} == {"train_loss", "val_loss", "epoch"}


def test_checkpoints_with_sha256(trained):
    view, ckpt = trained["view"], trained["ckpt"]
    cks = list(view.checkpoints())
    # each save: the top-k file and last.ckpt, three epochs
    assert len(cks) == 6
    assert {c["path"].rsplit("/", 1)[-1] for c in cks} >= {"last.ckpt"}
    assert all(f"/tiny-text/{view.id}/checkpoints/" in c["path"] for c in cks)
    steps = sorted({c["step"] for c in cks})
    assert steps == [6, 12, 18]
    last = [c for c in cks if c["path"].endswith("last.ckpt")][-1]
    data = open(last["path"], "rb").read()
    assert last["sha256"] == hashlib.sha256(data).hexdigest() and last["size"] == len(data)
    best = next(c for c in cks if c["path"] == ckpt.best_model_path)
    assert best["metrics"]["val_loss"] == pytest.approx(float(ckpt.best_model_score))


def test_round_trip_export_then_import(trained, tmp_path):
    view = trained["view"]
    folder = tmp_path / "exported"
    folder.mkdir()
    runner = CliRunner()
    for what, name in (("scalars", "metrics.jsonl"), ("checkpoints", "checkpoints.jsonl")):
        res = runner.invoke(
            main, ["export", view.id, "--what", what, "--out", str(folder / name), "--ledger", str(view.ledger.root)]
        )
        assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["import", str(folder), "--ledger", str(tmp_path / "fresh"), "--name", "again"])
    assert res.exit_code == 0, res.output
    fresh = labledger.open_ledger(tmp_path / "fresh")
    copy = fresh.run("again")
    assert list(copy.scalars()) == list(view.scalars())
    keep = ("path", "sha256", "size", "step", "metrics")
    assert [{k: c[k] for k in keep} for c in copy.checkpoints()] == [
        {k: c[k] for k in keep} for c in view.checkpoints()
    ]


def test_failure_marks_the_run_failed(tmp_path):
    trainer, logger, _, _ = fit(tmp_path)
    with pytest.raises(RuntimeError, match="diverged"):
        trainer.fit(TinyText(fail_at=3), loader(0), loader(1))
    view = labledger.open_ledger(tmp_path / "ledger").run(logger.version)
    assert view.status == "failed" and "failed" in view.meta["error"]
    assert max(r["step"] for r in view.scalars()) < 3


def test_other_ranks_write_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    logger = LedgerLogger("rank1", ledger=tmp_path / "ledger")
    logger.log_hyperparams({"lr": 0.1})
    logger.log_metrics({"loss": 1.0}, step=1)
    logger.finalize("success")
    assert logger.run is None and logger.version is None
    assert not (tmp_path / "ledger").exists()

"""Soups of real small torch models, hashing, logit differences."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

import labledger  # noqa: E402
from labledger.analysis.checkpoints import hash_files, logit_diff, soup  # noqa: E402
from labledger.cli import main  # noqa: E402
from labledger.errors import CheckpointError  # noqa: E402


def _model(seed: int):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 3))
    m(torch.randn(4, 8))  # updates running stats and num_batches_tracked
    return m


def _save(model, path, fmt, dtype=None):
    sd = {
        k: (v.to(dtype) if dtype is not None and v.is_floating_point() else v).contiguous()
        for k, v in model.state_dict().items()
    }
    if fmt == "safetensors":
        safetensors_torch.save_file(sd, str(path))
    else:
        torch.save(sd, path)
    return sd


@pytest.mark.parametrize("fmt", ["safetensors", "pt"])
def test_soup_equals_hand_computation(tmp_path, fmt):
    weights = [0.08, 0.32, 0.60]
    sds, paths = [], []
    for i in range(3):
        p = tmp_path / f"m{i}.{fmt}"
        sds.append(_save(_model(i), p, fmt))
        paths.append(p)
    out = tmp_path / f"soup.{fmt}"
    res = soup(paths, weights, out, integers="first", ledger=tmp_path / "ledger")
    got = safetensors_torch.load_file(str(out)) if fmt == "safetensors" else torch.load(out, weights_only=True)
    for key, t in sds[0].items():
        if t.is_floating_point():
            expected = sum(w * sd[key].double() for w, sd in zip(weights, sds))
            assert torch.allclose(got[key].double(), expected, atol=1e-6), key
            assert got[key].dtype == t.dtype
        else:
            assert torch.equal(got[key], t)  # integer buffers: the first's
    assert res.integer_tensors == ["1.num_batches_tracked"]
    assert res.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    # the averaged weights load into the model
    m = _model(0)
    m.load_state_dict(got)
    # lineage in the ledger
    view = labledger.open_ledger(tmp_path / "ledger").run(res.run_id)
    assert "soup" in view.tags
    lineage = view.config["soup"]
    assert [i["weight"] for i in lineage["inputs"]] == weights
    assert [i["sha256"] for i in lineage["inputs"]] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    [ck] = list(view.checkpoints())
    assert ck["sha256"] == res.sha256


def test_soup_bf16_accumulates_in_float32(tmp_path):
    paths = []
    sds = []
    for i in range(2):
        p = tmp_path / f"m{i}.safetensors"
        sds.append(_save(_model(i), p, "safetensors", dtype=torch.bfloat16))
        paths.append(p)
    out = tmp_path / "soup.safetensors"
    soup(paths, [0.5, 0.5], out, integers="first")
    got = safetensors_torch.load_file(str(out))
    key = "0.weight"
    expected = (sds[0][key].float() * 0.5 + sds[1][key].float() * 0.5).to(torch.bfloat16)
    assert got[key].dtype == torch.bfloat16 and torch.equal(got[key], expected)


def test_mismatches_fail_clearly(tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    _save(_model(0), a, "safetensors")
    sd = dict(_model(1).state_dict().items())
    sd["0.weight"] = torch.zeros(16, 9)
    safetensors_torch.save_file(sd, str(b))
    with pytest.raises(CheckpointError, match=r"tensor '0.weight': shape \[16, 9\]"):
        soup([a, b], [0.5, 0.5], tmp_path / "o.safetensors", integers="first")
    del sd["0.weight"]
    safetensors_torch.save_file(sd, str(b))
    with pytest.raises(CheckpointError, match="lacks '0.weight'"):
        soup([a, b], [0.5, 0.5], tmp_path / "o.safetensors")
    _save(_model(1), b, "safetensors", dtype=torch.float16)
    with pytest.raises(CheckpointError, match="dtype float16"):
        soup([a, b], [0.5, 0.5], tmp_path / "o.safetensors")
    _save(_model(1), b, "safetensors")
    with pytest.raises(CheckpointError, match="sum to 0.9"):
        soup([a, b], [0.5, 0.4], tmp_path / "o.safetensors")
    # integer buffers differ (both ran one batch -> equal) : make them differ
    sd = dict(_model(1).state_dict())
    sd["1.num_batches_tracked"] = torch.tensor(7)
    safetensors_torch.save_file(sd, str(b))
    with pytest.raises(CheckpointError, match="integer tensor '1.num_batches_tracked' differs"):
        soup([a, b], [0.5, 0.5], tmp_path / "o.safetensors")
    res = soup([a, b], [1, 3], tmp_path / "o.safetensors", normalize=True, integers="first")
    assert [i["weight"] for i in res.inputs] == [0.25, 0.75]
    assert not (tmp_path / "o.pt").exists()


def test_soup_cli(tmp_path):
    paths = []
    for i in range(3):
        p = tmp_path / f"m{i}.safetensors"
        _save(_model(i), p, "safetensors")
        paths.append(str(p))
    runner = CliRunner()
    res = runner.invoke(
        main,
        [
            "soup",
            *paths,
            "--weights",
            "0.08 0.32 0.60",
            "--out",
            str(tmp_path / "s.safetensors"),
            "--integers",
            "first",
            "--ledger",
            str(tmp_path / "l"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["run_id"] and len(doc["inputs"]) == 3
    res = runner.invoke(main, ["soup", *paths, "--weights", "0.5 0.5", "--out", str(tmp_path / "x.safetensors")])
    assert res.exit_code == 2 and "3 checkpoints but 2 weights" in res.output
    res = runner.invoke(
        main, ["soup", *paths, "--weights", "0.5 0.5 0.5", "--out", str(tmp_path / "x.safetensors"), "--no-record"]
    )
    assert res.exit_code == 1 and "Error: weights sum to 1.5" in res.output


def test_hash_cli(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 3_000_000)
    assert hash_files([p])[0] == {
        "path": str(p),
        "sha256": hashlib.sha256(b"x" * 3_000_000).hexdigest(),
        "size": 3_000_000,
    }
    res = CliRunner().invoke(main, ["hash", str(p)])
    assert res.exit_code == 0 and hashlib.sha256(b"x" * 3_000_000).hexdigest() in res.output
    res = CliRunner().invoke(main, ["hash", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "no such file" in res.output


def test_logit_diff_arrays_and_results(tmp_path):
    rng = np.random.default_rng(0)
    a = {"exact": rng.normal(size=(50, 3)), "family": rng.normal(size=(50, 5))}
    b = {"exact": a["exact"].copy(), "family": a["family"] + 0.01}
    b["family"][3, 2] += 0.5
    np.savez(tmp_path / "a.npz", **a)
    np.savez(tmp_path / "b.npz", **b)
    res = logit_diff(tmp_path / "a.npz", tmp_path / "b.npz")
    assert res["heads"]["exact"]["max_abs"] == 0.0
    assert res["heads"]["family"]["max_abs"] == pytest.approx(0.51)
    rows_a = [{"id": f"i{i}", "task": "t", "gold": "x", "logits": {"x": float(i), "y": 0.0}} for i in range(5)]
    rows_b = [
        dict(r, logits={"x": r["logits"]["x"] + (0.25 if i == 2 else 0.0), "y": 0.0}) for i, r in enumerate(rows_a)
    ]
    for name, rows in (("a.jsonl", rows_a), ("b.jsonl", list(reversed(rows_b)))):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = logit_diff(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert res["heads"]["logits"]["max_abs"] == pytest.approx(0.25)
    out = CliRunner().invoke(main, ["logit-diff", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["heads"]["exact"]["max_abs"] == 0.0
    np.save(tmp_path / "c.npy", rng.normal(size=(4, 3)))
    np.save(tmp_path / "d.npy", rng.normal(size=(5, 3)))
    with pytest.raises(CheckpointError, match=r"shape \[4, 3\]"):
        logit_diff(tmp_path / "c.npy", tmp_path / "d.npy")

"""Checkpoints: streamed hashes, weighted averages ("model soups") and logit differences.

A soup averages checkpoints tensor by tensor: each output tensor is accumulated in float32 from
one input tensor at a time (safetensors are opened lazily with ``safe_open``; PyTorch files are
memory-mapped with ``torch.load(mmap=True, weights_only=True)``), so peak memory stays near the
size of the output, not the sum of the inputs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from labledger.errors import CheckpointError
from labledger.store.manifest import sha256_file

__all__ = ["SoupResult", "hash_files", "logit_diff", "soup"]


def hash_files(paths: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Streamed sha256 and size of each file.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "w.bin"; _ = p.write_bytes(b"abc")
    >>> hash_files([p])[0]["sha256"][:12]
    'ba7816bf8f01'
    """
    out = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise CheckpointError(f"{path}: no such file")
        digest, size = sha256_file(path)
        out.append({"path": str(path), "sha256": digest, "size": size})
    return out


# -- reading checkpoints lazily ------------------------------------------------------------------
class _Reader:
    """Tensor-by-tensor access to a safetensors or PyTorch checkpoint."""

    def __init__(self, path: Path):
        import torch

        self.path = path
        self.kind = "safetensors" if path.suffix == ".safetensors" else "pt"
        if self.kind == "safetensors":
            from safetensors import safe_open

            try:
                self._f = safe_open(str(path), framework="pt")
            except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
                raise CheckpointError(f"{path}: not a readable safetensors file ({exc})") from None
            self.keys = list(self._f.keys())
            self.metadata = self._f.metadata() or {}
        else:
            try:
                obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except Exception as exc:  # noqa: BLE001 - torch raises many kinds
                raise CheckpointError(
                    f"{path}: not a PyTorch checkpoint loadable with weights_only=True "
                    f"({type(exc).__name__}: {str(exc)[:200]})"
                ) from None
            if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
                obj = obj["state_dict"]
            if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
                raise CheckpointError(f"{path}: expected a state dict of tensors")
            self._sd = obj
            self.keys = list(obj.keys())
            self.metadata = {}

    def get(self, key: str):
        if self.kind == "safetensors":
            return self._f.get_tensor(key)
        return self._sd[key]

    def meta(self, key: str) -> tuple[tuple[int, ...], str]:
        if self.kind == "safetensors":
            sl = self._f.get_slice(key)
            return tuple(sl.get_shape()), str(sl.get_dtype())
        t = self._sd[key]
        return tuple(t.shape), str(t.dtype).replace("torch.", "")


def _norm_dtype(name: str) -> str:
    table = {
        "F32": "float32",
        "F16": "float16",
        "BF16": "bfloat16",
        "F64": "float64",
        "I64": "int64",
        "I32": "int32",
        "I16": "int16",
        "I8": "int8",
        "U8": "uint8",
        "BOOL": "bool",
    }
    return table.get(name, name)


@dataclass
class SoupResult:
    """What a soup wrote and where it came from."""

    out: str
    sha256: str
    size: int
    tensors: int
    inputs: list[dict[str, Any]] = field(default_factory=list)  # path, sha256, size, weight
    integer_tensors: list[str] = field(default_factory=list)
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "sha256": self.sha256,
            "size": self.size,
            "tensors": self.tensors,
            "inputs": self.inputs,
            "integer_tensors": self.integer_tensors,
            "run_id": self.run_id,
        }


def soup(
    inputs: Sequence[str | os.PathLike[str]],
    weights: Sequence[float],
    out: str | os.PathLike[str],
    *,
    normalize: bool = False,
    integers: str = "equal",
    ledger=None,
    name: str = "soup",
    group: str | None = None,
) -> SoupResult:
    """Weighted average of checkpoints with the same keys, shapes and dtypes.

    Floating tensors are accumulated in float32 and written in the inputs' dtype. Integer and bool
    tensors (step counters, buffers) are not averaged: with ``integers="equal"`` they must be equal
    in every input, with ``integers="first"`` the first input's are taken. Weights must sum to 1
    unless ``normalize``. The output format follows ``out``'s suffix (``.safetensors`` or ``.pt``).
    With ``ledger`` (a path or Ledger), the soup is recorded as a run tagged ``soup`` with its
    lineage (inputs, weights, sha256 of each) and the output as its checkpoint.

    >>> # soup(["a.safetensors", "b.safetensors"], [0.3, 0.7], "soup.safetensors")
    """
    import torch

    paths = [Path(p) for p in inputs]
    if len(paths) < 2:
        raise CheckpointError("a soup needs at least two checkpoints")
    if len(weights) != len(paths):
        raise CheckpointError(f"{len(paths)} checkpoints but {len(weights)} weights")
    w = [float(x) for x in weights]
    if any(not math.isfinite(x) or x < 0 for x in w):
        raise CheckpointError(f"weights must be finite and >= 0; got {w}")
    total = sum(w)
    if normalize:
        if total <= 0:
            raise CheckpointError("weights sum to 0; nothing to normalise")
        w = [x / total for x in w]
    elif abs(total - 1.0) > 1e-6:
        raise CheckpointError(f"weights sum to {total:.6g}, not 1 (pass --normalize to rescale them)")
    if integers not in ("equal", "first"):
        raise CheckpointError(f"integers must be 'equal' or 'first'; got {integers!r}")
    out_path = Path(out)
    if out_path.suffix not in (".safetensors", ".pt"):
        raise CheckpointError(f"{out_path}: the output must end in .safetensors or .pt")
    for p in paths:
        if not p.is_file():
            raise CheckpointError(f"{p}: no such file")

    readers = [_Reader(p) for p in paths]
    first = readers[0]
    # Same keys, shapes and dtypes: name the first mismatch.
    for r in readers[1:]:
        missing = [k for k in first.keys if k not in set(r.keys)]
        extra = [k for k in r.keys if k not in set(first.keys)]
        if missing or extra:
            what = f"lacks '{missing[0]}'" if missing else f"has an extra tensor '{extra[0]}'"
            raise CheckpointError(f"{r.path} {what} (compared with {first.path})")
    for key in first.keys:
        shape0, dtype0 = first.meta(key)
        for r in readers[1:]:
            shape, dtype = r.meta(key)
            if shape != shape0:
                raise CheckpointError(
                    f"tensor '{key}': shape {list(shape)} in {r.path} but {list(shape0)} in {first.path}"
                )
            if _norm_dtype(dtype) != _norm_dtype(dtype0):
                raise CheckpointError(
                    f"tensor '{key}': dtype {_norm_dtype(dtype)} in {r.path} but {_norm_dtype(dtype0)} in {first.path}"
                )

    result: dict[str, Any] = {}
    integer_keys = []
    for key in first.keys:
        t0 = first.get(key)
        if t0.is_floating_point():
            dtype = t0.dtype
            acc = t0.to(torch.float32) * w[0]
            del t0
            for r, wi in zip(readers[1:], w[1:]):
                acc.add_(r.get(key).to(torch.float32), alpha=wi)
            result[key] = acc.to(dtype)
            del acc
        else:
            integer_keys.append(key)
            if integers == "equal":
                for r in readers[1:]:
                    if not torch.equal(t0, r.get(key)):
                        raise CheckpointError(
                            f"integer tensor '{key}' differs between {first.path} and {r.path}; integer "
                            f"tensors are not averaged (pass --integers first to take the first's)"
                        )
            result[key] = t0.clone()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    from labledger.store.jsonl import atomic_open

    with atomic_open(out_path, sweep=True) as f:  # whole or not at all, even on a full disk (#17)
        if out_path.suffix == ".safetensors":
            from safetensors.torch import save_file

            # written in place into the temporary file (File::create truncates the same inode)
            save_file({k: v.contiguous() for k, v in result.items()}, f.name, metadata={"labledger_soup": "1"})
        else:
            torch.save(result, f)
    del result

    in_hashes = hash_files(paths)
    for h, wi in zip(in_hashes, w):
        h["weight"] = wi
    digest, size = sha256_file(out_path)
    res = SoupResult(
        out=str(out_path.resolve()),
        sha256=digest,
        size=size,
        tensors=len(first.keys),
        inputs=in_hashes,
        integer_tensors=integer_keys,
    )
    if ledger is not None:
        from labledger.store.run import start_run

        with start_run(
            name,
            group=group,
            tags=("soup",),
            ledger=ledger,
            config={
                "soup": {
                    "inputs": in_hashes,
                    "weights": w,
                    "normalize": normalize,
                    "integers": integers,
                    "accumulate": "float32",
                }
            },
        ) as run:
            run.log_checkpoint(out_path, metrics={})
            run.note(
                "weighted checkpoint average: "
                + ", ".join(f"{wi:g} x {Path(h['path']).name} ({h['sha256'][:12]})" for h, wi in zip(in_hashes, w))
            )
        res.run_id = run.id
    return res


# -- logit differences ---------------------------------------------------------------------------
def _load_heads(path: Path) -> dict[str, Any]:
    """Named arrays from .npy/.npz, or per-row logits/probs from a results file keyed by id."""
    if path.suffix == ".npy":
        return {"default": np.load(path, allow_pickle=False)}
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    if path.suffix in (".jsonl", ".json"):
        from labledger.store.jsonl import decode_line, iter_lines

        heads: dict[str, dict[str, dict[str, float]]] = {}
        for lineno, raw in iter_lines(path):
            row = decode_line(raw, str(path), lineno)
            rid = row.get("id")
            if rid is None:
                raise CheckpointError(f"{path}:{lineno}: field 'id' is missing")
            for fld in ("logits", "probs", "scores", "score"):
                if fld in row:
                    val = row[fld]
                    heads.setdefault(fld, {})[str(rid)] = val if isinstance(val, dict) else {"": val}
        return heads
    raise CheckpointError(f"{path}: expected .npy, .npz or a results .jsonl file")


def logit_diff(a: str | os.PathLike[str], b: str | os.PathLike[str], *, tol: float | None = None) -> dict[str, Any]:
    """Maximum (and mean) absolute difference between two models' outputs, per named head.

    Arrays must have the same shapes; results files are matched by item id and label (like seed
    000's ``non_regression``: ``exact_logit_max_abs``). With ``tol``: the non-regression check "max
    |a - b| <= tol on every item", exact over all items (no sampling): each head gets ``items_over``
    (items, the first axis, whose largest absolute difference exceeds ``tol``), ``worst_item`` (its
    id, or position) and ``passed``; the document ``tol`` and ``passed`` (every head). NaN against
    NaN counts as equal; NaN against a number as over.

    >>> import tempfile, numpy as np, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> np.save(d / "a.npy", np.zeros((3, 2))); np.save(d / "b.npy", np.array([[0, 0], [0, 2e-4], [0, 0]]))
    >>> r = logit_diff(d / "a.npy", d / "b.npy", tol=1e-4)
    >>> r["passed"], r["heads"]["default"]["items_over"], r["heads"]["default"]["worst_item"]
    (False, 1, 1)
    """
    if tol is not None and not (math.isfinite(tol) and tol >= 0):
        raise CheckpointError(f"tol must be a finite number >= 0; got {tol}")
    pa, pb = Path(a), Path(b)
    ha, hb = _load_heads(pa), _load_heads(pb)
    common = [k for k in ha if k in hb]
    if not common:
        raise CheckpointError(f"{pa} and {pb} have no head in common ({sorted(ha)} vs {sorted(hb)})")
    heads: dict[str, dict[str, Any]] = {}
    for k in common:
        x, y = ha[k], hb[k]
        ids: list[str] | None = None
        if isinstance(x, dict):
            ids = sorted(set(x) & set(y))
            if set(x) != set(y):
                only = sorted(set(x) ^ set(y))[:5]
                raise CheckpointError(f"head '{k}': the files cover different items (e.g. {only})")
            labels = sorted({lab for i in ids for lab in x[i]})
            try:
                x = np.array([[x[i][lab] for lab in labels] for i in ids], dtype=np.float64)
                y = np.array([[y[i][lab] for lab in labels] for i in ids], dtype=np.float64)
            except KeyError as exc:
                raise CheckpointError(f"head '{k}': label {exc} missing for some item") from None
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if x.shape != y.shape:
            raise CheckpointError(f"head '{k}': shape {list(x.shape)} in {pa} but {list(y.shape)} in {pb}")
        d = np.abs(x - y)
        heads[k] = {
            "max_abs": float(d.max()) if d.size else 0.0,
            "mean_abs": float(d.mean()) if d.size else 0.0,
            "n": int(x.shape[0]) if x.ndim else 1,
            "shape": list(x.shape),
        }
        if x.ndim == 2 and x.shape[1] > 1:
            heads[k]["argmax_agreement"] = float(np.mean(x.argmax(1) == y.argmax(1)))
        if tol is not None:
            heads[k].update(_tolerance_check(x, y, tol, ids))
    only_a = sorted(set(ha) - set(hb))
    only_b = sorted(set(hb) - set(ha))
    out: dict[str, Any] = {
        "a": str(pa),
        "b": str(pb),
        "heads": heads,
        "only_in_a": only_a,
        "only_in_b": only_b,
        "max_abs": max(h["max_abs"] for h in heads.values()),
    }
    if tol is not None:
        out["tol"] = float(tol)
        out["passed"] = all(h["passed"] for h in heads.values())
        out["check"] = f"max |a - b| <= {tol:g} on every item of every head in common (exact, over all items)"
    return out


def _tolerance_check(x: np.ndarray, y: np.ndarray, tol: float, ids: list[str] | None) -> dict[str, Any]:
    """``items_over``, ``worst_item``, ``worst_abs`` and ``passed`` of "max |x - y| <= tol on every
    item" (items: the first axis; a 0-d array is one item); NaN on both sides is equal, on one over."""
    d = np.abs(x - y)
    d = np.where(np.isnan(x) & np.isnan(y), 0.0, np.where(np.isnan(d), np.inf, d))
    per_item = d.reshape(d.shape[0], -1).max(axis=1) if d.ndim and d.size else d.reshape(-1)
    if per_item.size == 0:
        return {"items_over": 0, "worst_item": None, "worst_abs": 0.0, "passed": True}
    worst = int(np.argmax(per_item))
    over = int(np.count_nonzero(per_item > tol))
    return {
        "items_over": over,
        "worst_item": ids[worst] if ids is not None else worst,
        "worst_abs": float(per_item[worst]),
        "passed": over == 0,
    }

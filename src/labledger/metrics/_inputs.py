"""Turning user inputs (label sequences, probability mappings) into the encoded arrays metrics use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from labledger.errors import MetricInputError


def as_1d(x: Any, what: str, *, dtype: Any = None) -> np.ndarray:
    """``x`` as a 1-D array (a clear error otherwise)."""
    arr = np.asarray(x, dtype=dtype) if dtype is not None else np.asarray(x)
    if arr.ndim != 1:
        raise MetricInputError(f"{what} must be one-dimensional; got shape {arr.shape}")
    return arr


def same_length(**arrays: Any) -> int:
    """The common length of the named arrays; raises naming them when they differ."""
    lengths = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(lengths.values())) > 1:
        raise MetricInputError("inputs differ in length: " + ", ".join(f"{k}={n}" for k, n in lengths.items()))
    return next(iter(lengths.values()), 0)


def numbers(x: Any, what: str) -> np.ndarray:
    """A finite float64 1-D array."""
    try:
        arr = as_1d(x, what, dtype=np.float64)
    except (TypeError, ValueError):
        raise MetricInputError(f"{what} must be numbers") from None
    if not np.isfinite(arr).all():
        raise MetricInputError(f"{what} has NaN or infinite values")
    return arr


def _key(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _unique_inverse(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(x, return_inverse=True)``, in O(n) for small-range integers and booleans."""
    if x.dtype.kind in "biu" and len(x):
        if x.dtype.kind == "b":
            x = x.view(np.uint8)
        lo, hi = int(x.min()), int(x.max())
        if hi - lo < 16:  # a few byte-wide passes; the codes are the values themselves when 0..K-1
            present = np.array([bool(np.any(x == v)) for v in range(lo, hi + 1)])
            values = np.flatnonzero(present) + lo
            if lo >= 0 and len(values) == hi + 1:
                return values.astype(x.dtype), x
            lookup = np.cumsum(present) - 1
            return values.astype(x.dtype), lookup[x.astype(np.int64) - lo]
        base = x.astype(np.int64, copy=False)
        lo, hi = int(base.min()), int(base.max())
        if hi - lo < 1 << 20:
            present = np.bincount(base - lo, minlength=hi - lo + 1) > 0
            values = np.flatnonzero(present)
            lookup = np.cumsum(present) - 1
            uniq = (values + lo).astype(x.dtype)
            return uniq, lookup[base - lo]
    try:
        uniq, inv = np.unique(x, return_inverse=True)
    except TypeError:
        raise MetricInputError("labels must all be of one comparable type (all strings or all numbers)") from None
    return uniq, inv.reshape(-1)


def _small_int_codes(arrays: list[np.ndarray]) -> tuple[list[np.ndarray], tuple[Any, ...]] | None:
    """Integer label columns whose values are exactly 0..K-1 together: the codes are the columns."""
    if not all(len(a) for a in arrays):
        return None
    views = [a.view(np.uint8) if a.dtype.kind == "b" else a for a in arrays]
    lo = min(int(a.min()) for a in views)
    hi = max(int(a.max()) for a in views)
    if lo != 0 or hi >= 16:
        return None
    if not all(any(bool(np.any(a == v)) for a in views) for v in range(hi + 1)):
        return None
    names = tuple(bool(v) if arrays[0].dtype.kind == "b" else v for v in range(hi + 1))
    return list(views), names


def encode(
    *columns: Any, labels: Sequence[Any] | None = None, extra: Sequence[Any] = ()
) -> tuple[list[np.ndarray], tuple[Any, ...]]:
    """Encode label columns as int64 indices into ``labels`` (default: the sorted union).

    ``extra`` labels are added to the default label list (e.g. a ``pos_label`` absent from the data).
    """
    arrays = [as_1d(c, "labels") for c in columns]
    sizes = [len(a) for a in arrays]
    if (
        len(arrays) == 2
        and arrays[0].dtype == arrays[1].dtype
        and arrays[0].dtype.kind in "biu"
        and labels is None
        and not any(e is not None for e in extra)
    ):
        fast = _small_int_codes(arrays)
        if fast is not None:
            return fast
    joined = np.concatenate(arrays) if arrays else np.zeros(0)
    uniq, inv = _unique_inverse(joined)
    if labels is None:
        names = [_key(u) for u in uniq]
        for e in extra:
            if e is not None and e not in names:
                names.append(e)
        try:
            names = sorted(names)
        except TypeError:
            raise MetricInputError("labels must all be of one comparable type") from None
    else:
        names = [_key(v) for v in labels]
        if len(set(names)) != len(names):
            raise MetricInputError("labels has duplicates")
    index = {v: i for i, v in enumerate(names)}
    try:
        mapping = np.array([index[_key(u)] for u in uniq], dtype=np.int64)
    except KeyError as exc:
        raise MetricInputError(f"label {exc.args[0]!r} is not in labels ({', '.join(map(repr, names))})") from None
    codes = mapping[inv] if len(inv) else np.zeros(0, np.int64)
    out, start = [], 0
    for s in sizes:
        out.append(codes[start : start + s])
        start += s
    return out, tuple(names)


def prob_matrix(probs: Any, labels: Sequence[Any] | None) -> tuple[np.ndarray, tuple[Any, ...]]:
    """(n, K) probabilities with the label of each column: from mappings (keyed by label) or a 2-D array."""
    if isinstance(probs, Sequence) and len(probs) and isinstance(probs[0], Mapping):
        names = tuple(labels) if labels is not None else tuple(sorted({k for d in probs for k in d}))
        index = {k: j for j, k in enumerate(names)}
        mat = np.zeros((len(probs), len(names)))
        for i, d in enumerate(probs):
            for k, p in d.items():
                if k not in index:
                    raise MetricInputError(f"probs[{i}] has label {k!r}, not in labels")
                mat[i, index[k]] = p
    else:
        mat = np.asarray(probs, dtype=np.float64)
        if mat.ndim != 2:
            raise MetricInputError(
                f"probs must be a 2-D array (items x labels) or a list of mappings; got shape {mat.shape}"
            )
        if labels is None:
            raise MetricInputError("probs given as an array needs labels= (the label of each column)")
        names = tuple(_key(v) for v in labels)
        if len(names) != mat.shape[1]:
            raise MetricInputError(f"labels has {len(names)} names but probs has {mat.shape[1]} columns")
    if not np.isfinite(mat).all() or (mat < 0).any() or (mat > 1).any():
        raise MetricInputError("probs has values outside [0, 1] (or NaN)")
    return mat, names


def binary_gold(
    gold: Any, pos_label: Any, *, negative: Any = None, only_two: bool = False, name: str = "pos_label"
) -> tuple[np.ndarray, Any, Any]:
    """``(gold == positive as bool, positive, negative)``: the one binary-gold encoder (metrics, sweeps).

    ``pos_label`` None: 1 (True for boolean gold) when gold is 0/1 or boolean, else an error naming
    ``name=``. ``only_two`` (the threshold sweep): every other item must be ``negative`` (default:
    0/False for 0/1 gold, else the first value that is not the positive); otherwise a given
    ``pos_label`` must be one of the labels present (when at least two are) and ``negative`` is None.

    >>> binary_gold(["a", "b", "a"], "a")[0].tolist()
    [True, False, True]
    >>> binary_gold([0, 1, 1], None, only_two=True)[1:]
    (1, 0)
    """
    g = as_1d(gold, "gold")
    if pos_label is None:
        if g.dtype.kind in "biu":
            ok = not len(g) or (int(g.min()) >= 0 and int(g.max()) <= 1)
            values = {0, 1} if ok else {int(g.min()), int(g.max())}
        else:
            values = set(np.unique(g).tolist()) if len(g) else set()
        if (len(g) or not only_two) and (values <= {0, 1} or values <= {False, True}):
            pos_label = True if g.dtype == bool else 1
            if only_two and negative is None:
                negative = False if g.dtype == bool else 0
        else:
            raise MetricInputError(
                f"gold labels are {sorted(map(str, values))}: give {name}= the positive label ({name}= is required "
                "unless gold is boolean or 0/1)"
            )
    elif not only_two:
        check_pos_label(pos_label, np.unique(g).tolist() if len(g) else [])
    is_pos = g == pos_label
    if not isinstance(is_pos, np.ndarray):  # comparison of incompatible types
        is_pos = np.array([x == pos_label for x in g], dtype=bool)
    if not only_two:
        return is_pos, pos_label, None
    rest = ~is_pos
    if negative is None:
        first = np.flatnonzero(rest)
        if first.size == 0:
            raise MetricInputError(
                f"gold holds only the positive class {pos_label!r}; pass negative= to name the other."
            )
        negative = _py(g[first[0]])
    bad = rest & (g != negative)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise MetricInputError(
            f"gold[{i}] is {_py(g[i])!r}; a binary sweep expects only {_py(negative)!r} and {_py(pos_label)!r}."
        )
    return is_pos, pos_label, negative


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def check_pos_label(pos_label: Any, present: Sequence[Any]) -> None:
    """Refuse a ``pos_label`` that is not one of the labels present (when at least two are), as
    scikit-learn does: a typo must not turn every item negative."""
    if len(present) >= 2 and pos_label not in present:
        raise MetricInputError(
            f"pos_label {pos_label!r} is not a label of the data (labels: {', '.join(map(repr, present))})"
        )


def score_inputs(gold: Any, score: Any, pos_label: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    """Binary (gold, score) -> (gold is positive, score as float64, the positive label)."""
    is_pos, pos_label, _ = binary_gold(gold, pos_label)
    s = numbers(score, "score")
    same_length(gold=is_pos, score=s)
    if len(s) and (s.min() < 0 or s.max() > 1):
        raise MetricInputError("score has values outside [0, 1] (it is P(positive))")
    return is_pos, s, pos_label

"""Metrics bound to their inputs: one class per way of computing a value under item weights.

Each metric turns its inputs into a prepared object, which knows how to compute the value under
any set of item weights. That single code path gives the point value (unit weights),
``sample_weight`` support, and the bootstrap (:mod:`labledger.metrics.resample`), in one of three
vectorised shapes:

- :class:`TablePrepared` (``strategy == "table"``): the value is a function of a count table (the
  confusion matrix, or a 2x2 table of derived labels); the bootstrap draws multinomial counts over
  the table's cells;
- :class:`MeanPrepared` (``"mean"``): the value is a (transformed) mean of per-item values; the
  bootstrap is ``W @ v``;
- :class:`WeightsPrepared` (``"weights"``): anything else (ROC-AUC, AP, ECE, Pearson, Spearman);
  computed from a (B, n) matrix of integer resample weights, in chunks.

:data:`Prepared` is their union; ``strategy`` tells them apart (a ``Literal``, so a type checker
narrows on it).

>>> import numpy as np
>>> p = MeanPrepared(metric="mae", params={}, n=2, n_used=2, values=np.array([1.0, 3.0]))
>>> p.value(), p.value(sample_weight=[3, 1])
(2.0, 1.5)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

from labledger.errors import MetricInputError
from labledger.metrics.kernels import BlockColumn, by_blocks, exact_sum, exact_sum_of

#: A (B, n_cells) batch of count tables -> (B,) or (B, columns) values.
TableFunction: TypeAlias = Callable[[np.ndarray], np.ndarray]
Strategy: TypeAlias = Literal["table", "mean", "weights"]


class WeightsFunction(Protocol):
    """The metric under each row of a (B, n) weight matrix; ``exchangeable``: a fresh bootstrap draw
    whose columns may be read in any order."""

    def __call__(self, w: np.ndarray, exchangeable: bool = False) -> np.ndarray: ...


@dataclass(kw_only=True)
class _Bound:
    """What every prepared metric has: its name, parameters and item counts.

    ``n`` is the number of items (the resampling unit unless clusters are given); ``n_used`` the
    number that count (e.g. ``non0_f1`` uses only items with non-zero truth). ``columns`` names
    the entries of a vector-valued metric (``per_class``); scalar metrics have ``columns=None``.
    """

    metric: str
    params: dict[str, Any]
    n: int
    n_used: int
    columns: tuple[str, ...] | None = None
    #: the unit-weight value, computed on first ask (the prepared data never changes)
    _unit: Any = field(default=None, init=False, repr=False, compare=False)
    #: influence values by whether clusters are summed (:func:`labledger.metrics.analytic.influence`)
    _influence: dict[bool, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def _check_weights(self, weights: npt.ArrayLike) -> np.ndarray:
        w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        if w.shape[1] != self.n:
            raise MetricInputError(f"{self.metric}: weights have {w.shape[1]} items, the data {self.n}")
        return w

    def _unit_value(self) -> Any:
        raise NotImplementedError

    def weighted(self, weights: npt.ArrayLike) -> np.ndarray:
        """The metric under each row of ``weights`` (B, n): shape (B,) or (B, len(columns))."""
        raise NotImplementedError

    def value(self, sample_weight: npt.ArrayLike | None = None) -> Any:
        """The point value (unit weights unless ``sample_weight``): a float, or a dict for tables."""
        if sample_weight is None:
            if self._unit is None:
                self._unit = self._unit_value()
            out = self._unit
        else:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.shape != (self.n,):
                raise MetricInputError(f"{self.metric}: sample_weight has shape {w.shape}, expected ({self.n},)")
            if not np.isfinite(w).all() or (w < 0).any():
                raise MetricInputError(f"{self.metric}: sample_weight must be finite and >= 0")
            out = self.weighted(w[None, :])[0]
        if self.columns is not None:
            return {c: float(v) for c, v in zip(self.columns, out, strict=True)}
        return float(out)


def cell_codes(gold: np.ndarray, pred: np.ndarray, k: int) -> np.ndarray:
    """Each item's cell ``gold * K + pred`` in a ``K x K`` count table (int64: a copy of the gold
    codes, then in place: one array of the items').

    >>> cell_codes(np.array([0, 1, 1]), np.array([1, 1, 0]), 2).tolist()
    [1, 3, 2]
    """
    cells = gold.astype(np.int64)
    cells *= k
    cells += pred
    return cells


@dataclass(kw_only=True)
class TablePrepared(_Bound):
    """A metric that is a function of a count table (``from_tables``) over ``n_cells`` cells.

    Each item falls in one cell (``cells``; -1: the item does not count), given directly or built
    lazily from ``parts`` = (gold codes, pred codes, K) as ``gold * K + pred``.
    """

    from_tables: TableFunction
    n_cells: int
    cells: np.ndarray | None = None
    parts: tuple[np.ndarray, np.ndarray, int] | None = None
    #: Each cell's count over all items (int, ``n_cells`` long), when the caller has it and every
    #: item counts: one bincount shared by a task's count-table metrics instead of one each.
    cell_counts: np.ndarray | None = None
    strategy: Literal["table"] = field(default="table", init=False)

    def get_cells(self) -> np.ndarray:
        """Each item's cell in the count table (-1: the item does not count)."""
        if self.cells is None:
            if self.parts is None:
                raise MetricInputError(f"{self.metric}: a count-table metric needs cells or parts")
            self.cells = cell_codes(*self.parts)
        return self.cells

    def counts(self) -> np.ndarray:
        """The unweighted count table (n_cells,), without building ``cells`` for small tables."""
        if self.cell_counts is not None:
            return self.cell_counts.astype(np.float64)
        if self.cells is None and self.parts is not None and self.parts[2] <= 4:
            g, p, k = self.parts
            pred_is = [p == j for j in range(k)]
            out = np.empty(k * k)
            for i in range(k):
                gi = g == i
                for j in range(k):
                    out[i * k + j] = np.count_nonzero(gi & pred_is[j])
            return out
        cells = self.get_cells()
        return np.bincount(cells[cells >= 0], minlength=self.n_cells).astype(np.float64)

    def tables(self, weights: npt.ArrayLike) -> np.ndarray:
        """(B, n_cells) weighted counts of each cell for weight rows (B, n)."""
        w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        all_cells = self.get_cells()
        keep = all_cells >= 0
        cells = all_cells[keep]
        b = w.shape[0]
        flat = (cells[None, :] + self.n_cells * np.arange(b)[:, None]).ravel()
        out = np.bincount(flat, weights=w[:, keep].ravel(), minlength=b * self.n_cells)
        return out.reshape(b, self.n_cells)

    def weighted(self, weights: npt.ArrayLike) -> np.ndarray:
        """The metric under each row of ``weights`` (B, n): shape (B,) or (B, len(columns))."""
        return self.from_tables(self.tables(self._check_weights(weights)))

    def _unit_value(self) -> Any:
        return self.from_tables(self.counts()[None, :])[0]


@dataclass(kw_only=True)
class MeanPrepared(_Bound):
    """A metric that is ``post`` of the mean of per-item ``values`` (over the items where ``mask``)."""

    values: np.ndarray
    mask: np.ndarray | None = None
    post: Callable[[np.ndarray], np.ndarray] | None = None
    strategy: Literal["mean"] = field(default="mean", init=False)

    def masked_values(self) -> np.ndarray:
        """``values`` with the items outside ``mask`` set to 0."""
        return self.values if self.mask is None else np.where(self.mask, self.values, 0.0)

    def mask_float(self) -> np.ndarray:
        """1.0 for the items that count, 0.0 for the others."""
        return np.ones(self.n) if self.mask is None else self.mask.astype(np.float64)

    def mean_of(self, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The metric from weighted sums of the values and weighted counts of the items (nan: none)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            m = np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)
        return self.post(m) if self.post is not None else m

    def weighted(self, weights: npt.ArrayLike) -> np.ndarray:
        """The metric under each row of ``weights`` (B, n): shape (B,)."""
        w = self._check_weights(weights)
        return self.mean_of(w @ self.masked_values(), w @ self.mask_float())

    def _unit_value(self) -> Any:
        vals = self.values if self.mask is None else self.values[self.mask]
        total = exact_sum(vals)  # math.fsum's value, in vector passes
        return self.mean_of(np.array([total]), np.array([float(len(vals))]))[0]


@dataclass(kw_only=True)
class BlockMean(MeanPrepared):
    """A :class:`MeanPrepared` of every item whose per-item values are made a block at a time by
    ``block(a, b)`` (the values of items ``[a, b)``: an elementwise formula, the same floats
    whatever the blocks) and not kept: its value, its unclustered analytic variance and its 0/1
    check read them a block at a time; whatever reads ``values`` itself (the bootstrap, clusters,
    a paired difference) makes the whole array once, the floats it would have held.

    >>> x = np.array([1.0, 3.0, 5.0]); p = BlockMean(metric="mae", params={}, n=3, n_used=3, block=lambda a, b: x[a:b])
    >>> p.value(), p.made(), p.values.tolist(), p.made()
    (3.0, False, [1.0, 3.0, 5.0], True)
    """

    block: Callable[[int, int], np.ndarray]
    values: np.ndarray = field(init=False, repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        # only for attributes not set: ``values`` until it is made, then it is an attribute
        if name != "values":
            raise AttributeError(name)
        made = by_blocks(self.n, self.block)
        self.values = made
        return made

    def made(self) -> bool:
        """Whether the whole array of values was made (then it is read as any mean's)."""
        return "values" in vars(self)

    def _unit_value(self) -> Any:
        if self.made():
            return super()._unit_value()
        total = exact_sum_of(self.block, self.n)
        return self.mean_of(np.array([total]), np.array([float(self.n)]))[0]


@dataclass(kw_only=True)
class WeightsPrepared(_Bound):
    """A metric computed from a weight matrix by ``from_weights``; ``point`` is a leaner exact path
    for the unweighted value, where there is one."""

    from_weights: WeightsFunction
    point: Callable[[], float] | None = None
    #: Per-item influence values for an analytic interval (:mod:`labledger.metrics.analytic`); the
    #: argument says whether clusters will be summed.
    influence: Callable[[bool], np.ndarray] | None = None
    #: A binned metric's count-table form (ECE, equal-width bins): (bin of each item, correct 0/1,
    #: confidence, which may be a :class:`~labledger.metrics.kernels.BlockColumn`); the bootstrap then
    #: draws bin cells instead of items (:mod:`labledger.metrics.resample`).
    binned: tuple[np.ndarray, np.ndarray, np.ndarray | BlockColumn] | None = None
    strategy: Literal["weights"] = field(default="weights", init=False)

    def weighted(self, weights: npt.ArrayLike) -> np.ndarray:
        """The metric under each row of ``weights`` (B, n): shape (B,)."""
        return self.from_weights(self._check_weights(weights))

    def _unit_value(self) -> Any:
        if self.point is not None:
            return self.point()
        return self.from_weights(np.ones((1, self.n)))[0]


#: A metric bound to its inputs, able to compute its value under any item weights.
Prepared: TypeAlias = TablePrepared | MeanPrepared | WeightsPrepared

__all__ = [
    "BlockMean",
    "MeanPrepared",
    "Prepared",
    "Strategy",
    "TableFunction",
    "TablePrepared",
    "WeightsFunction",
    "WeightsPrepared",
    "cell_codes",
]

"""The queryable fields of a run, as the index keeps them (issue 12).

Two JSON columns of ``runs`` hold one flat object each, keyed by the field names that the query
language (:mod:`labledger.store.query`) uses:

* ``fields``: ``config.<dotted.key>`` (the config flattened at any depth), ``scalars.<name>.last``,
  ``scalars.<name>.min``, ``scalars.<name>.max`` (over every logged step; NaN skipped),
  ``summary.<key>`` (``Run.set_summary`` values) and ``counts.<kind>`` (steps, scalar_records,
  batches, history, checkpoints). The run rewrites it at each periodic sync and at finish.
* ``eval_fields``: ``eval.<result set>.<metric key>`` (and ``eval.<set>.<task>.<metric key>``) of
  the run's stored evaluations, rewritten by ``Ledger.save_evaluation``.

Values are JSON numbers, strings, booleans or null; lists stay lists (they match no comparison).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any

#: Keys of the run summary that become ``counts.<key>``.
COUNT_KEYS = ("steps", "scalar_records", "batches", "history", "checkpoints")
#: Kinds of stored evaluation whose metric values become ``eval.*`` fields.
EVAL_KINDS = ("evaluation", "report")


def flatten(value: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, leaf)`` pairs of a nested mapping; an empty mapping is a leaf.

    >>> dict(flatten({"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "seed": 1}))
    {'optim.lr': 0.1, 'optim.betas': [0.9, 0.99], 'seed': 1}
    """
    for k, v in value.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            yield from flatten(v, key + ".")
        else:
            yield key, v


class ScalarStats:
    """Running last/min/max of each logged scalar, folded in from records in batches.

    >>> s = ScalarStats()
    >>> s.fold([{"loss": 0.9}, {"loss": 0.4, "acc": 0.5}, {"loss": float("nan")}])
    >>> s.fields({"loss": 0.7, "acc": 0.5})["scalars.loss.min"]
    0.4
    """

    __slots__ = ("high", "low")

    def __init__(self) -> None:
        self.low: dict[str, float] = {}
        self.high: dict[str, float] = {}

    def fold(
        self, records: Iterable[Mapping[str, Any]], keys: Iterable[str] | None = None, *, numbers: bool = False
    ) -> None:
        """Take the values of ``records`` (dicts of name -> number; ``step``/``time`` skipped) into account.

        ``keys`` (without ``step`` and ``time``) are the names to fold when the caller already has
        them; by default every key of ``records``. ``numbers``: see :meth:`fold_column`.
        """
        if not isinstance(records, list):
            records = list(records)
        if not records:
            return
        if keys is None:
            keys = set().union(*records)  # one C-level pass; then a few C-level passes per key
            keys.discard("step")
            keys.discard("time")
        for k in keys:
            try:
                col = list(map(itemgetter(k), records))
            except KeyError:  # a key that only some records have (an eval metric every N steps)
                col = [r[k] for r in records if k in r]
            self.fold_column(k, col, numbers=numbers)

    def fold_column(self, key: str, values: list[Any], *, numbers: bool = False) -> None:
        """Take the logged values of one scalar into account (NaN, infinities, None, booleans skipped).

        ``numbers=True`` promises that ``values`` holds only floats, ints and None, never a boolean
        (what :meth:`labledger.store.run.Run.log` stores), which saves a pass over them.

        >>> s = ScalarStats()
        >>> s.fold_column("loss", [0.5, float("nan"), 2, None, True, float("-inf")])
        >>> s.low["loss"], s.high["loss"]
        (0.5, 2)
        """
        span = _finite_min_max(values, numbers)
        if span is None:
            return
        lo, hi = span
        low, high = self.low, self.high
        if key not in low or lo < low[key]:
            low[key] = lo
        if key not in high or hi > high[key]:
            high[key] = hi

    def fields(self, last: Mapping[str, Any]) -> dict[str, Any]:
        """``scalars.<name>.last|min|max`` given the last value of each scalar."""
        out: dict[str, Any] = {}
        for k in sorted(set(last) | set(self.low)):
            if k in ("step", "time"):
                continue
            out[f"scalars.{k}.last"] = _finite(last.get(k))
            out[f"scalars.{k}.min"] = self.low.get(k)
            out[f"scalars.{k}.max"] = self.high.get(k)
        return out


_PLAIN_NUMBERS = frozenset((float, int))


def _finite_min_max(col: list[Any], numbers: bool = False) -> tuple[Any, Any] | None:
    """``(min, max)`` of the finite numbers of ``col`` (NaN, infinities, None and booleans skipped).

    The common column, plain floats and ints, takes two C-level passes, ``min`` and ``max`` (a third,
    of the types, unless ``numbers`` says there is no boolean): a NaN never wins a comparison, so
    it changes neither unless it comes first, when the result is NaN and the column is filtered;
    None raises TypeError, and is filtered too. Anything else is filtered first.

    >>> _finite_min_max([0.5, float("nan"), 2, None, True, float("inf")])
    (0.5, 2)
    >>> _finite_min_max([float("nan")]) is None
    True
    """
    if not col:
        return None
    if numbers or _PLAIN_NUMBERS.issuperset(map(type, col)):
        try:
            lo, hi = min(col), max(col)
            if lo == lo and hi == hi and not math.isinf(lo) and not math.isinf(hi):
                return lo, hi
        except TypeError:  # a None
            pass
    # NaN (v != v), None and booleans are not values
    col = [v for v in col if v is not None and v == v and type(v) is not bool]
    if not col:
        return None
    lo, hi = min(col), max(col)
    if math.isinf(lo) or math.isinf(hi):
        col = [x for x in col if not math.isinf(x)]
        if not col:
            return None
        lo, hi = min(col), max(col)
    return lo, hi


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def run_fields(config: Mapping[str, Any], summary: Mapping[str, Any], stats: ScalarStats | None) -> dict[str, Any]:
    """The ``fields`` object of a run: config, scalar summaries, ``set_summary`` values, counts.

    >>> run_fields({"opt": {"name": "adam"}}, {"steps": 3, "last": {"loss": 0.2}, "headline": {"acc": 0.9}}, None)
    {'config.opt.name': 'adam', 'scalars.loss.last': 0.2, 'scalars.loss.min': None, 'scalars.loss.max': None, 'summary.acc': 0.9, 'counts.steps': 3}
    """
    out: dict[str, Any] = {f"config.{k}": _finite(v) for k, v in flatten(config)}
    last = summary.get("last") or {}
    out.update((stats or ScalarStats()).fields(last))
    for k, v in (summary.get("headline") or {}).items():
        out[f"summary.{k}"] = _finite(v)
    for k in COUNT_KEYS:
        if summary.get(k) is not None:
            out[f"counts.{k}"] = summary[k]
    return out


def eval_fields(rows: Iterable[tuple[str, str, str, str, Any]]) -> dict[str, Any]:
    """``eval.*`` fields from ``(evaluation name, task, metric key, kind, value)`` rows (whole-set
    values only). ``eval.<set>.<task>.<metric>`` always; ``eval.<set>.<metric>`` when one task of
    the set has that metric (``evaluation`` documents win over imported ``report`` ones). Each is
    also there under the key ``labledger eval`` prints (:attr:`~labledger.schema.MetricId.short`,
    without ``zero_division=0``) unless another metric has that key.

    >>> eval_fields([("test", "digits", "accuracy", "evaluation", 0.97)])
    {'eval.test.digits.accuracy': 0.97, 'eval.test.accuracy': 0.97}
    >>> list(eval_fields([("test", "t", "f1[average=macro,zero_division=0]", "evaluation", 0.5)]))[-1]
    'eval.test.f1[average=macro]'
    """
    from labledger.errors import LedgerError
    from labledger.schema.ids import MetricId

    rows = sorted(rows, key=lambda r: EVAL_KINDS.index(r[3]) if r[3] in EVAL_KINDS else 99, reverse=True)
    out: dict[str, Any] = {}
    tasks_of: dict[tuple[str, str], set[str]] = {}
    short: dict[tuple[str, str], Any] = {}
    for name, task, key, _kind, value in rows:
        out[f"eval.{name}.{task}.{key}"] = _finite(value)
        tasks_of.setdefault((name, key), set()).add(task)
        short[(name, key)] = _finite(value)
    for (name, key), tasks in tasks_of.items():
        if len(tasks) == 1 and f"eval.{name}.{key}" not in out:
            out[f"eval.{name}.{key}"] = short[(name, key)]
    for field, value in list(out.items()):
        head, _, key = field.partition("[")  # eval.<set>[.<task>].<name>, then the parameters
        if not key:
            continue
        prefix, _, metric = head.rpartition(".")
        try:
            quiet = MetricId.parse(f"{metric}[{key}").short
        except LedgerError:  # not a metric key of the registry's form: no second name
            continue
        out.setdefault(f"{prefix}.{quiet}", value)
    return out


def eval_fields_of_run(db: Any, run_id: str) -> str:
    """The ``eval_fields`` JSON of one run, from the index's metric values (``db``: a connection)."""
    import orjson

    from labledger.metrics.registry import metric_key

    marks = ",".join("?" * len(EVAL_KINDS))
    q = (
        "SELECT e.name, m.task, m.metric, m.params, e.kind, m.value FROM metric_values m "
        f"JOIN evaluations e ON e.id = m.eval_id WHERE e.run_id = ? AND m.slice = '' AND e.kind IN ({marks}) "
        "ORDER BY e.created, m.rowid"
    )
    rows = [
        (name, task, metric_key(metric, orjson.loads(params or "{}")), kind, value)
        for name, task, metric, params, kind, value in db.execute(q, (run_id, *EVAL_KINDS)).fetchall()
    ]
    return orjson.dumps(eval_fields(rows)).decode()


def dumps_fields(fields: Mapping[str, Any]) -> str:
    """The JSON text stored in the index (NaN and infinities as null)."""
    import orjson

    return orjson.dumps(fields, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS).decode()


def backfill_fields(ledger: Any) -> int:
    """Fill ``fields`` of the runs that have none (logged before the index kept them) from their
    folders: config.json and the scalar records. Returns how many runs were filled."""
    missing = [r[0] for r in ledger.db.execute("SELECT id FROM runs WHERE fields IS NULL").fetchall()]
    if not missing:  # the usual case: opening a ledger (`labledger runs`) loads no record readers
        return 0
    from labledger.errors import LedgerError
    from labledger.store.jsonl import read_json

    done = []
    for run_id in missing:
        run_dir = ledger.run_dir(run_id)
        try:
            config = read_json(run_dir / "config.json") if (run_dir / "config.json").exists() else {}
        except (OSError, LedgerError):
            config = {}
        stats = ScalarStats()
        try:
            summary = summarize_run_dir(run_dir, stats=stats)
        except (OSError, LedgerError):
            summary = {}
        row = ledger.db.execute("SELECT summary FROM runs WHERE id = ?", (run_id,)).fetchone()
        import orjson

        indexed = orjson.loads(row[0] or "{}") if row else {}
        summary = {**summary, "headline": indexed.get("headline") or {}}
        done.append((dumps_fields(run_fields(config if isinstance(config, dict) else {}, summary, stats)), run_id))
    if done:
        ledger._write(lambda db: db.executemany("UPDATE runs SET fields = ? WHERE id = ? AND fields IS NULL", done))
    return len(done)


def summarize_run_dir(run_dir: Path, *, stats: ScalarStats | None = None) -> dict[str, Any]:
    """Counts and last scalars recomputed from a run's files (for runs indexed before the query
    fields); with ``stats``, every scalar value is folded into it too (min/max for the index)."""
    from labledger.store.counters import scan_run, summary_of

    return summary_of(scan_run(run_dir, stats=stats))

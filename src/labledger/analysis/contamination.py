"""Contamination: evaluation items that also appear among a run's training samples.

A run logs every training sample (``Run.log_batch``), so the overlap with an evaluation is a join
away. Both sides are read as text, normalised the same way: NFKC, case-folded, cut into words (runs
of letters and digits), so whitespace, case and punctuation do not hide a copy. A value that is not
text (an id, a number) is one word; a mapping or list is the words of its text leaves, in order.

- **exact**: the eval item's words equal a training sample's words;
- **n-gram** (``ngram``, default 13 words, the length GPT-3's and lm-eval's decontamination use):
  the share of the eval item's distinct n-grams that occur in some training sample. An item counts
  as overlapping when it matches exactly or its share reaches ``min_share`` (default: any one
  n-gram). An item shorter than ``ngram`` words is matched exactly only (``short`` counts them).

Memory is bounded by the evaluation: the eval items' n-gram hashes are held, the training samples
are streamed :data:`CHUNK_SAMPLES` at a time and never kept. N-grams are 64-bit polynomial hashes of
the words' hashes, computed in one process, so a collision is a ~1e-19 event per pair.

Then the metric on the clean and the overlapping items, each with its interval
(:func:`~labledger.analysis.evaluation.evaluate`), and the difference overlapping - clean with the
unpaired bootstrap (each side resampled independently, clusters kept whole) and its p-value
(:func:`~labledger.analysis.evaluation.compare` with ``unpaired=True``). A cluster (``group``) with
items on both sides makes the two sides dependent: a warning names how many.

>>> train = ["the quick brown fox jumps over the lazy dog", "Tokyo is the capital of Japan."]
>>> ov = find_overlap(train, ["THE QUICK brown fox!", "tokyo is the capital of japan", "Paris"], ngram=3)
>>> ov.exact.tolist(), [round(s, 2) for s in ov.share.tolist()], ov.overlapping.tolist()
([False, True, False], [1.0, 1.0, nan], [True, True, False])
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labledger.errors import LedgerError, MetricInputError

#: Default n-gram length in words.
NGRAM = 13
#: Training samples hashed and looked up together.
CHUNK_SAMPLES = 20_000
#: Sample fields tried, in order, as the training text when none is named.
TRAIN_FIELDS = ("input", "text", "prompt", "model_input")
#: Row fields tried, in order, as the evaluation text when none is named (``compare --items``'s).
EVAL_FIELDS = ("prompt", "doc", "input", "text")

_WORD = re.compile(r"\w+")
#: The multiplier of the n-gram polynomial hash (odd, so it is invertible modulo 2**64).
_BASE = np.uint64(0x9E3779B97F4A7C15)

DEFINITION = (
    "text normalised (NFKC, case-folded, words = runs of letters and digits); exact: the item's words equal a "
    "training sample's; n-gram share: distinct word n-grams of the item found in any training sample; an item "
    "overlaps when exact or its share reaches min_share (default: one n-gram); items shorter than n words are "
    "matched exactly only; the metric on each side with its interval, overlapping - clean by the unpaired "
    "bootstrap (each side resampled independently, clusters whole)"
)


def words(value: Any) -> list[str]:
    """The normalised words of a value (see the module docstring).

    >>> words({"question": "What's 2+2?", "choices": ["Four", 4]})
    ['what', 's', '2', '2', 'four', '4']
    """
    if value is None:
        return []
    if isinstance(value, str):
        return _WORD.findall(unicodedata.normalize("NFKC", value).casefold())
    if isinstance(value, Mapping):
        return [w for v in value.values() for w in words(v)]
    if isinstance(value, (list, tuple)):
        return [w for v in value for w in words(v)]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    return [str(value).casefold()]


def _gram_hashes(tokens: Sequence[list[str]], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(exact hash per text, n-gram hashes, the text each n-gram belongs to)`` of a chunk of texts."""
    lengths = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=len(tokens))
    flat = np.fromiter((hash(w) for t in tokens for w in t), dtype=np.int64, count=int(lengths.sum())).view(np.uint64)
    exact = np.fromiter((hash(tuple(t)) for t in tokens), dtype=np.int64, count=len(tokens))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    if len(flat) < n:
        return exact, np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    m = len(flat) - n + 1
    h = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h = h * _BASE + flat[j : j + m]
    owner = np.repeat(np.arange(len(tokens), dtype=np.int64), lengths)[:m]
    ends = (starts + lengths)[owner]
    keep = np.arange(m, dtype=np.int64) + n <= ends  # the n-gram lies inside one text
    return exact, h[keep], owner[keep]


@dataclass
class Overlap:
    """Per eval item: ``exact`` match, n-gram ``share`` (NaN when shorter than the n-gram),
    ``overlapping``, and ``first``: the ordinal of the first training sample that matched (-1)."""

    exact: np.ndarray
    share: np.ndarray
    overlapping: np.ndarray
    first: np.ndarray
    train_samples: int
    ngram: int
    min_share: float | None
    #: Training samples with no words in the field read.
    train_empty: int = 0

    @property
    def short(self) -> int:
        """Eval items with fewer words than the n-gram (matched exactly only)."""
        return int(np.isnan(self.share).sum())


def find_overlap(
    train: Iterable[Any],
    items: Sequence[Any],
    *,
    ngram: int = NGRAM,
    min_share: float | None = None,
    chunk: int = CHUNK_SAMPLES,
) -> Overlap:
    """Which of ``items`` (eval values) occur in ``train`` (training values, streamed once): see the
    module docstring. Memory grows with ``items`` and ``chunk``, not with the training samples."""
    if ngram < 1:
        raise MetricInputError(f"ngram must be at least 1 word; got {ngram}")
    if min_share is not None and not 0 < min_share <= 1:
        raise MetricInputError(f"min_share must be in (0, 1]; got {min_share}")
    n_items = len(items)
    exact_keys, grams, owner = _gram_hashes([words(v) for v in items], ngram)
    empty = np.fromiter((not words(v) for v in items), dtype=bool, count=n_items)
    # distinct n-grams of every item, and which items hold each
    pairs = np.unique(np.stack([grams.view(np.int64), owner]), axis=1) if len(grams) else np.empty((2, 0), np.int64)
    uniq, gram_of_pair = np.unique(pairs[0], return_inverse=True)
    exact_sorted = np.unique(exact_keys[~empty])
    first_gram = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    first_exact = np.full(len(exact_sorted), np.iinfo(np.int64).max, dtype=np.int64)
    seen = blank = 0
    for texts in _chunks(train, chunk):
        blank += sum(1 for t in texts if not t)
        e, g, o = _gram_hashes(texts, ngram)
        _mark(exact_sorted, first_exact, e, np.arange(len(texts), dtype=np.int64) + seen)
        _mark(uniq, first_gram, g.view(np.int64), o + seen)
        seen += len(texts)
    never = np.iinfo(np.int64).max
    total = np.bincount(pairs[1], minlength=n_items)
    hit_pair = first_gram[gram_of_pair] != never
    hits = np.bincount(pairs[1], weights=hit_pair, minlength=n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, hits / np.maximum(total, 1), np.nan)
    pos = np.searchsorted(exact_sorted, exact_keys).clip(0, max(len(exact_sorted) - 1, 0))
    exact = ~empty & (first_exact[pos] != never) if len(exact_sorted) else np.zeros(n_items, dtype=bool)
    by_gram = share > 0 if min_share is None else share >= min_share
    overlapping = exact | (np.nan_to_num(share) > 0) & by_gram
    first = np.full(n_items, never, dtype=np.int64)
    if len(exact_sorted):
        first = np.where(exact, first_exact[pos], first)
    np.minimum.at(first, pairs[1][hit_pair], first_gram[gram_of_pair][hit_pair])
    first = np.where(overlapping & (first != never), first, -1)
    return Overlap(exact, share, overlapping, first, seen, ngram, min_share, blank)


def _chunks(values: Iterable[Any], size: int) -> Iterator[list[list[str]]]:
    out: list[list[str]] = []
    for v in values:
        out.append(words(v))
        if len(out) >= size:
            yield out
            out = []
    if out:
        yield out


def _mark(keys: np.ndarray, first: np.ndarray, found: np.ndarray, ordinal: np.ndarray) -> None:
    """Record in ``first`` (one slot per sorted key) the smallest ordinal at which each key was found."""
    if not len(keys) or not len(found):
        return
    pos = np.searchsorted(keys, found).clip(0, len(keys) - 1)
    hit = keys[pos] == found
    np.minimum.at(first, pos[hit], ordinal[hit])


def field_value(record: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` of a record (``input.state``), or ``None``.

    >>> field_value({"input": {"state": "s1"}}, "input.state"), field_value({"a": 1}, "b.c")
    ('s1', None)
    """
    if path in record:
        return record[path]
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


@dataclass
class Contamination:
    """The overlap of one run's training samples with one evaluation task (:func:`contamination`)."""

    run: dict[str, Any]
    source: str
    task: str
    train_field: str
    eval_field: str
    overlap: Overlap
    ids: list[str]
    metric: str
    clean: dict[str, Any] | None
    overlapping: dict[str, Any] | None
    difference: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
    #: Each item's text as read (the eval field), for showing.
    texts: Sequence[Any] = ()
    #: Training sample ordinal -> its ``(microbatch, sample_index)``, for the first matches.
    origins: dict[int, tuple[Any, Any]] = field(default_factory=dict)

    def to_dict(self, *, items: bool = True) -> dict[str, Any]:
        ov = self.overlap
        out: dict[str, Any] = {
            "run": self.run,
            "eval": self.source,
            "task": self.task,
            "train_field": self.train_field,
            "eval_field": self.eval_field,
            "ngram": ov.ngram,
            "min_share": ov.min_share,
            "train_samples": ov.train_samples,
            "train_samples_empty": ov.train_empty,
            "n_items": len(self.ids),
            "n_overlapping": int(ov.overlapping.sum()),
            "n_exact": int(ov.exact.sum()),
            "n_short": ov.short,
            "metric": self.metric,
            "clean": self.clean,
            "overlapping": self.overlapping,
            "difference": self.difference,
            "definition": DEFINITION,
            "warnings": self.warnings,
        }
        if items:
            out["items"] = self.overlapping_items()
        return out

    def overlapping_items(self) -> list[dict[str, Any]]:
        """Each overlapping eval item: id, exact, n-gram share, and the first training sample that
        matched (its ordinal among the run's samples, its microbatch and its index there)."""
        ov = self.overlap
        return [
            {
                "id": self.ids[i],
                "text": self.texts[i] if self.texts else None,
                "exact": bool(ov.exact[i]),
                "share": None if np.isnan(ov.share[i]) else float(ov.share[i]),
                "first_sample": int(ov.first[i]),
                "microbatch": self.origins.get(int(ov.first[i]), (None, None))[0],
                "sample_index": self.origins.get(int(ov.first[i]), (None, None))[1],
            }
            for i in np.flatnonzero(ov.overlapping).tolist()
        ]


def _eval_values(td: Any, name: str) -> Sequence[Any]:
    if name == "id":
        return [str(v) for v in td.ids.tolist()]
    if name in td.extras:
        return list(td.extras[name])
    head, _, rest = name.partition(".")
    if head == "slices" and rest in td.slice_columns:
        return list(td.slices[rest])
    if head in td.extras:
        return [field_value({head: v}, name) for v in td.extras[head]]
    have = ", ".join(["id", *sorted(td.extras), *(f"slices.{s}" for s in sorted(td.slice_columns))])
    raise LedgerError(f"task '{td.task}' has no field '{name}' (it has: {have})")


def _origins(view: Any, ordinals: np.ndarray) -> dict[int, tuple[Any, Any]]:
    """``(microbatch, sample_index)`` of each training sample ordinal in ``ordinals`` (a second
    read of the samples, up to the last one asked for)."""
    wanted = set(ordinals.tolist())
    out: dict[int, tuple[Any, Any]] = {}
    if not wanted:
        return out
    last = max(wanted)
    for k, rec in enumerate(view.records("samples")):
        if k in wanted:
            out[k] = (rec.get("microbatch"), rec.get("sample_index"))
        if k >= last:
            break
    return out


def _train_field(view: Any, name: str | None) -> str:
    if name is not None:
        return name
    for rec in view.records("samples"):
        for f in TRAIN_FIELDS:
            if rec.get(f) is not None:
                return f
        raise LedgerError(
            f"run {view.id} ({view.name}): its samples have none of {', '.join(TRAIN_FIELDS)}; name the training "
            "text with --train-field"
        )
    raise LedgerError(f"run {view.id} ({view.name}) logged no training samples (batches with samples)")


def contamination(
    ledger: Any,
    run: str,
    eval_ref: str,
    *,
    task: str | None = None,
    train_field: str | None = None,
    eval_field: str | None = None,
    ngram: int = NGRAM,
    min_share: float | None = None,
    metric: str | None = None,
    ci: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> Contamination:
    """The overlap of run ``run``'s training samples (field ``train_field``, default the first of
    :data:`TRAIN_FIELDS` they have) with the items of ``eval_ref`` (a results file or ``RUN:NAME``;
    field ``eval_field``, default the first of :data:`EVAL_FIELDS` the rows have; ``id`` and
    ``slices.X`` work too), and ``metric`` (default the task's headline) on the clean and the
    overlapping items (see the module docstring)."""
    from labledger.analysis.tasks import HEADLINE, select_tasks
    from labledger.inputs.results import load
    from labledger.store.refs import resolve_results

    view = ledger.run(run)
    ref = resolve_results(eval_ref, ledger.root)
    rs = load(ref.path)
    names = select_tasks(rs, task) if task else list(rs)
    if len(names) != 1:
        raise LedgerError(f"{ref.shown} has {len(names)} tasks ({', '.join(names)}): choose one with --task")
    td = rs[names[0]]
    if eval_field is None:
        eval_field = next((f for f in EVAL_FIELDS if f in td.extras), None)
        if eval_field is None:
            raise LedgerError(
                f"{ref.shown} task '{td.task}': its rows have none of {', '.join(EVAL_FIELDS)}; name the item text "
                "with --eval-field (a row field, id, or slices.NAME)"
            )
    values = _eval_values(td, eval_field)
    tfield = _train_field(view, train_field)
    train = (field_value(rec, tfield) for rec in view.records("samples"))
    ov = find_overlap(train, values, ngram=ngram, min_share=min_share)
    spec = metric or HEADLINE[td.kind]
    warnings: list[str] = []
    if ov.train_empty == ov.train_samples:
        raise LedgerError(
            f"run {view.id} ({view.name}): none of its {ov.train_samples} training samples has a value in field "
            f"'{tfield}'; name the training text with --train-field"
        )
    if ov.train_empty:
        warnings.append(f"{ov.train_empty} of {ov.train_samples} training samples have no value in field '{tfield}'")
    if ov.short == len(values):
        warnings.append(f"every item has fewer than {ngram} words: exact matches only")
    elif ov.short:
        warnings.append(f"{ov.short} item(s) have fewer than {ngram} words: matched exactly only")
    origins = _origins(view, ov.first[ov.first >= 0])
    sides, diff, notes = split_metric(td, ov.overlapping, metric=spec, ci=ci, resamples=resamples, seed=seed)
    return Contamination(
        run={"run": view.id, "name": view.name},
        source=ref.shown,
        task=td.task,
        train_field=tfield,
        eval_field=eval_field,
        overlap=ov,
        ids=[str(v) for v in td.ids.tolist()],
        origins=origins,
        texts=values,
        metric=spec,
        clean=sides.get("clean"),
        overlapping=sides.get("overlapping"),
        difference=diff,
        warnings=warnings + notes,
    )


def split_metric(
    td: Any, over: np.ndarray, *, metric: str, ci: float = 0.95, resamples: int = 1000, seed: int = 0
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None, list[str]]:
    """``metric`` on the items of task ``td`` where ``over`` is false (``clean``) and true
    (``overlapping``), each an evaluation entry with its interval, the difference overlapping -
    clean (unpaired bootstrap; ``None`` unless both sides have items), and warnings."""
    from labledger.analysis.evaluation import compare, evaluate
    from labledger.inputs.results import ResultSet

    over = np.asarray(over, dtype=bool)
    sides: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    subsets = {"clean": ResultSet({td.task: td.subset(~over)}, source="clean")} if (~over).any() else {}
    if over.any():
        subsets["overlapping"] = ResultSet({td.task: td.subset(over)}, source="overlapping")
    for label, side in subsets.items():
        ev = evaluate(side, metrics=[metric], ci=ci, resamples=resamples, seed=seed)
        sides[label] = _builtins(ev.metric(td.task, metric))
    if len(subsets) < 2:
        if not over.any():
            warnings.append("no evaluation item overlaps the training samples: nothing to compare")
        return sides, None, warnings
    c = compare(
        subsets["overlapping"],
        subsets["clean"],
        metrics=[metric],
        unpaired=True,
        ci=ci,
        resamples=resamples,
        seed=seed,
        adjust="none",
    )
    if td.group is not None:
        both = len(np.intersect1d(td.group[over], td.group[~over]))
        if both:
            warnings.append(
                f"{both} cluster(s) have items on both sides: the sides are not independent and the interval "
                "of the difference may be too narrow"
            )
    return sides, _builtins(c.metric(td.task, metric)), warnings


def _builtins(value: Any) -> dict[str, Any]:
    import msgspec

    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


__all__ = [
    "DEFINITION",
    "NGRAM",
    "Contamination",
    "Overlap",
    "contamination",
    "field_value",
    "find_overlap",
    "split_metric",
    "words",
]

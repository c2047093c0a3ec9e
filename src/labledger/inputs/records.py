"""Validation of the records a run logs.

Validation is hand-written rather than schema-decoded because the hot path (``Run.log_batch``) must
stay well under 150 microseconds for a 16-sample record and because unknown keys are kept verbatim:
we check the fields we know and never rebuild the record.

Schemas (DESIGN.md, seed 004):

* batch record: ``microbatch`` (int >= 1, strictly increasing within a run), ``optimizer_step``
  (int >= 0), ``examples_seen`` (int >= 0), ``batch_size`` (int, == number of samples), ``loss``
  (number), ``samples`` (list), ``time`` (unix seconds), ``forward_ms``, ``gpu_allocated_mib``,
  ``gpu_peak_allocated_mib`` (numbers or null); any other key is kept verbatim.
* sample: ``input`` (any JSON; ``model_input`` is accepted as in seed 004), ``gold``,
  ``prediction``, ``probabilities`` (a mapping keyed by label, values in [0, 1] summing to ~1),
  ``cross_entropy`` (= -log p(gold), checked to 1e-4 when gold and probabilities are present, and
  only bounded below where p(gold) underflows float32: see :func:`check_cross_entropy`),
  optional ``source``/``dataset``, ``id``, ``input_provenance``, anything else verbatim.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import Any, TypeGuard

from labledger.errors import RecordError

#: |cross_entropy - (-log p(gold))| allowed (absolute, or relative to -log p(gold), whichever is larger).
CE_TOLERANCE = 1e-4
#: The smallest normal float32: a float32 softmax cannot say how small a p(gold) below it really is.
FLOAT32_TINY = 1.1754943508222875e-38
#: -log(FLOAT32_TINY) ~ 87.34: where p(gold) underflows, cross_entropy need only be at least this.
CE_AT_UNDERFLOW = -math.log(FLOAT32_TINY)
#: |sum(probabilities) - 1| allowed.
PROB_SUM_TOLERANCE = 1e-3

_INT_FIELDS = ("optimizer_step", "examples_seen", "batch_size")
_NUM_FIELDS = ("time", "forward_ms", "gpu_allocated_mib", "gpu_peak_allocated_mib")


def _is_int(v: Any) -> TypeGuard[int]:
    return (type(v) is int) or (isinstance(v, int) and not isinstance(v, bool))


def _is_num(v: Any) -> bool:
    t = type(v)
    if t is float or t is int:
        return True
    return isinstance(v, Real) and not isinstance(v, bool)


def _fail(msg: str, field: str, source: str | None, line: int | None) -> RecordError:
    return RecordError(msg, source=source, line=line, field=field)


def validate_batch(
    record: Any, *, last_microbatch: int | None = None, source: str | None = None, line: int | None = None
) -> int:
    """Check one microbatch record; return its ``microbatch``. Raises :class:`RecordError`.

    >>> validate_batch({"microbatch": 1, "loss": 0.69, "samples": [
    ...     {"gold": "a", "probabilities": {"a": 0.5, "b": 0.5}, "cross_entropy": 0.6931472}]})
    1
    """
    if not isinstance(record, Mapping):
        raise RecordError(
            f"a batch record must be a JSON object; got {type(record).__name__}", source=source, line=line
        )
    mb = record.get("microbatch")
    if not _is_int(mb) or mb < 1:
        raise _fail(f"must be an integer >= 1; got {mb!r}", "microbatch", source, line)
    if last_microbatch is not None and mb <= last_microbatch:
        raise _fail(f"must increase within a run; got {mb} after {last_microbatch}", "microbatch", source, line)
    for key in _INT_FIELDS:
        v = record.get(key)
        if v is not None and (not _is_int(v) or v < 0):
            raise _fail(f"must be an integer >= 0; got {v!r}", key, source, line)
    for key in _NUM_FIELDS:
        v = record.get(key)
        if v is not None and not _is_num(v):
            raise _fail(f"must be a number; got {v!r}", key, source, line)
    loss = record.get("loss")
    if loss is not None and not _is_num(loss):
        raise _fail(f"must be a number; got {loss!r}", "loss", source, line)
    samples = record.get("samples")
    if samples is None:
        return mb
    if not isinstance(samples, list):
        raise _fail(f"must be a list of sample objects; got {type(samples).__name__}", "samples", source, line)
    bs = record.get("batch_size")
    if bs is not None and bs != len(samples):
        raise _fail(f"is {bs} but the record has {len(samples)} samples", "batch_size", source, line)
    for i, sample in enumerate(samples):
        validate_sample(sample, index=i, source=source, line=line)
    return mb


def validate_sample(sample: Any, *, index: int = 0, source: str | None = None, line: int | None = None) -> None:
    """Check one sample of a batch record (see the module docstring)."""
    where = f"samples[{index}]"
    if not isinstance(sample, Mapping):
        raise _fail(f"must be an object; got {type(sample).__name__}", where, source, line)
    probs = sample.get("probabilities")
    p_gold = None
    if probs is not None:
        if not isinstance(probs, Mapping):
            raise _fail(
                f"must be a mapping from label to probability; got {type(probs).__name__}",
                f"{where}.probabilities",
                source,
                line,
            )
        total = 0.0
        for label, p in probs.items():
            if not _is_num(p) or not (0.0 <= p <= 1.0):
                raise _fail(
                    f"must map labels to numbers in [0, 1]; got {p!r} for {label!r}",
                    f"{where}.probabilities",
                    source,
                    line,
                )
            total += p
        if abs(total - 1.0) > PROB_SUM_TOLERANCE:
            raise _fail(
                f"must sum to 1 (+/- {PROB_SUM_TOLERANCE}); sums to {total:.6g}", f"{where}.probabilities", source, line
            )
        gold = sample.get("gold")
        if gold is not None:
            p_gold = probs.get(gold)
            if p_gold is None:
                p_gold = probs.get(str(gold))
            if p_gold is None:
                raise _fail(
                    f"{gold!r} is not a key of probabilities {sorted(map(str, probs))}", f"{where}.gold", source, line
                )
    ce = sample.get("cross_entropy")
    if ce is not None:
        if not _is_num(ce):
            raise _fail(f"must be a number; got {ce!r}", f"{where}.cross_entropy", source, line)
        if p_gold is not None:
            check_cross_entropy(ce, p_gold, field=f"{where}.cross_entropy", source=source, line=line)


def check_cross_entropy(
    ce: float, p_gold: float, *, field: str = "cross_entropy", source: str | None = None, line: int | None = None
) -> None:
    """Check ``ce`` against ``-log p_gold`` as float32 softmax and ``F.cross_entropy`` really produce them.

    Where p(gold) is a normal float32, ``ce`` must equal ``-log p(gold)`` to ``CE_TOLERANCE``
    (absolute, or relative for large values). Below float32's smallest normal number the softmax
    rounds p(gold) to a subnormal or to 0 and no longer pins the loss, which ``F.cross_entropy``
    computes in log space: any ``ce`` of at least ~87.3 is accepted there.

    >>> check_cross_entropy(0.6931472, 0.5)
    >>> check_cross_entropy(100.0, 3.7835e-44)   # logit gap 100 in float32: p(gold) is subnormal
    >>> check_cross_entropy(104.0, 0.0)          # p(gold) underflowed to 0
    >>> check_cross_entropy(0.5, 0.5)
    Traceback (most recent call last):
    ...
    labledger.errors.RecordError: field 'cross_entropy' must equal -log p(gold) = 0.693147 (tolerance 0.0001); got 0.5
    """
    if p_gold < FLOAT32_TINY:
        if ce >= CE_AT_UNDERFLOW - CE_TOLERANCE:
            return
        raise _fail(
            f"must be at least {CE_AT_UNDERFLOW:.4f} where p(gold) = {p_gold!r} underflows float32; got {ce!r}",
            field,
            source,
            line,
        )
    expected = -math.log(p_gold)
    if abs(ce - expected) <= max(CE_TOLERANCE, CE_TOLERANCE * expected):
        return
    raise _fail(f"must equal -log p(gold) = {expected:.6f} (tolerance {CE_TOLERANCE}); got {ce!r}", field, source, line)


def unwrap_scalar(value: Any) -> Any:
    """``value`` as a plain Python value when it is a numpy scalar or a one-element tensor or array
    (through its ``item()``); anything else (a plain number, text, a larger tensor) as it is.

    The one unwrapper of logged values: :func:`clean_scalars`, run steps and the trainer
    integrations use it.

    >>> import numpy as np
    >>> unwrap_scalar(np.float32(0.5)), unwrap_scalar(np.array([3])), unwrap_scalar(np.zeros(2)).shape
    (0.5, 3, (2,))
    """
    t = type(value)
    if t is float or t is int or t is bool or t is str or value is None:
        return value
    item = getattr(value, "item", None)
    if not callable(item):
        return value
    try:
        return item()
    except (ValueError, RuntimeError, TypeError):  # more than one element (numpy: ValueError, torch: RuntimeError)
        return value


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float when it is a finite real number (numpy scalars unwrapped), else ``None``
    (NaN, infinities, ``None``, booleans, text): the one rule for numbers in JSON documents.

    >>> import numpy as np
    >>> finite_or_none(np.float64(0.25)), finite_or_none(float("nan")), finite_or_none(True), finite_or_none(None)
    (0.25, None, None, None)
    """
    x = unwrap_scalar(value)
    if isinstance(x, bool) or not isinstance(x, Real):
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def clean_scalars(scalars: Mapping[str, Any], *, what: str = "scalar") -> dict[str, Any]:
    """Numbers as plain Python floats/ints: numpy scalars and 0-d tensors are unwrapped.

    Raises :class:`RecordError` naming the field for anything that is not a number (or None).
    """
    out: dict[str, Any] = {}
    for key, v in scalars.items():
        t = type(v)
        if t is float or t is int or v is None:
            out[key] = v
            continue
        if isinstance(v, bool):
            out[key] = int(v)
            continue
        if isinstance(v, Real):
            out[key] = float(v)
            continue
        value = unwrap_scalar(v)
        if value is not v and isinstance(value, Real) and not isinstance(value, bool):
            out[key] = value
            continue
        raise RecordError(f"must be a number; got {type(v).__name__} {v!r:.60}", field=key)
    return out

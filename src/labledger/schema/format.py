"""How p-values and intervals are written, the same in the CLI, the report, the server and the site.

The p-value rule: ``None`` -> ``–``; p < 0.001 -> ``< 0.001``; otherwise two significant digits
without exponent (0.0509 -> ``0.051``, 0.0012 -> ``0.0012``, 0.23 -> ``0.23``, 1.0 -> ``1.0``).

>>> [format_p(p) for p in (None, 0.0004, 0.0509, 0.0012, 0.23, 1.0)]
['–', '< 0.001', '0.051', '0.0012', '0.23', '1.0']
>>> format_ci(0.41234, 0.5), format_ci(None, 0.5)
('[0.4123, 0.5000]', '–')
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Decimal

DASH = "–"


def format_p(p: float | None) -> str:
    """A p-value by the rule above."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return DASH
    if p < 0.001:
        return "< 0.001"
    d = Decimal(repr(float(p)))
    exp = d.adjusted()  # power of ten of the first significant digit
    q = d.quantize(Decimal(1).scaleb(exp - 1), rounding=ROUND_HALF_EVEN)
    if q.adjusted() > exp:  # 0.0995 -> 0.10: still two significant digits
        q = q.quantize(Decimal(1).scaleb(exp))
    text = format(q, "f")
    if "." not in text:
        text += ".0"
    return text


def format_value(v: float | None, digits: int = 4, *, signed: bool = False) -> str:
    """A value with ``digits`` decimals (``–`` for None, ``nan`` for NaN); ``signed`` adds ``+``.

    >>> format_value(0.5), format_value(None), format_value(0.25, signed=True)
    ('0.5000', '–', '+0.2500')
    """
    if v is None:
        return DASH
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def format_ci(low: float | None, high: float | None, digits: int = 4, *, signed: bool = False) -> str:
    """An interval ``[low, high]`` (``–`` when either end is missing); ``signed`` adds ``+``."""
    if low is None or high is None:
        return DASH
    spec = f"+.{digits}f" if signed else f".{digits}f"
    return f"[{low:{spec}}, {high:{spec}}]"


__all__ = ["DASH", "format_ci", "format_p", "format_value"]

"""How p-values and intervals are written, the same in the CLI, the report, the server and the site.

The p-value rule: ``None`` -> ``–``; p < 0.001 -> ``< 0.001``; otherwise two significant digits
without exponent (0.0509 -> ``0.051``, 0.0012 -> ``0.0012``, 0.23 -> ``0.23``, 1.0 -> ``1.0``).

>>> [format_p(p) for p in (None, 0.0004, 0.0509, 0.0012, 0.23, 1.0)]
['–', '< 0.001', '0.051', '0.0012', '0.23', '1.0']
>>> format_ci(0.41234, 0.5), format_ci(None, 0.5)
('[0.4123, 0.5000]', '–')

Values and intervals have ``digits`` decimals (4), except where that would leave fewer than
``digits`` significant digits of a magnitude under ``10**-(digits-1)`` (a cost of $0.000238 per
item): then ``digits`` significant digits, as the site shows them (``LL.fmt.decimals``). Magnitudes
under :data:`SMALL` are rounding noise and keep ``digits`` decimals.

>>> format_value(0.000238), format_ci(0.000227, 0.0002481), format_value(3e-17)
('0.0002380', '[0.0002270, 0.0002481]', '0.0000')
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_EVEN, Decimal

DASH = "–"
#: Below this magnitude a value is shown with the fixed decimals (floating-point noise, not a cost).
SMALL = 1e-9


def decimals(ref: float | None, digits: int = 4) -> int:
    """Decimals for a value of magnitude ``ref``: ``digits``, or ``digits`` significant digits when
    ``SMALL <= |ref| < 10**-(digits-1)`` (see the module docstring)."""
    if ref is None or not math.isfinite(ref):
        return digits
    a = abs(ref)
    if SMALL <= a < 10.0 ** -(digits - 1):
        return digits - 1 - math.floor(math.log10(a))
    return digits


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
    d = decimals(v, digits)
    return f"{v:+.{d}f}" if signed else f"{v:.{d}f}"


def format_ci(low: float | None, high: float | None, digits: int = 4, *, signed: bool = False) -> str:
    """An interval ``[low, high]`` (``–`` when either end is missing); ``signed`` adds ``+``."""
    if low is None or high is None:
        return DASH
    d = decimals(max(abs(low), abs(high)), digits)
    spec = f"+.{d}f" if signed else f".{d}f"
    return f"[{low:{spec}}, {high:{spec}}]"


__all__ = ["DASH", "SMALL", "decimals", "format_ci", "format_p", "format_value"]

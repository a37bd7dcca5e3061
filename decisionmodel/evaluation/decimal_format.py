"""The 4-decimal figures written to status (REFERENCE.md: "Decimals in status: 4 places").

Rule: the **exact** value is rounded to 4 places with ROUND_HALF_EVEN.

- Exact value: accuracy is a ratio of counts and is rounded as that fraction (1/160 = 0.00625
  exactly → ``"0.0062"``), not through a float (1/160 as a float is a hair above 0.00625 and
  would print ``"0.0063"``). ECE and Brier are floats and are rounded from the float's exact
  binary value, which is exactly what ``f"{x:.4f}"`` and the Go reference's ``%.4f`` print.
- Half-even, not half-up: it is Decimal's default and printf's behaviour on exact ties, so our
  figures agree with any tool that prints the same float, and it does not bias ties upwards
  (a half-up accuracy of 0.89995 would read 0.9000 and pass a 0.90 floor it does not meet).
  Ties only happen for values that are exact at the 5th place, e.g. 1/32 = 0.03125 → ``"0.0312"``
  (half-up would give ``"0.0313"``), 3/32 = 0.09375 → ``"0.0938"``.

Arithmetic is done on integers (``Fraction``), so no ``decimal`` context — global or local —
can change the result.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Final

PLACES: Final = 4
_SCALE: Final = 10**PLACES


def quantize4(value: float | int | Fraction) -> Decimal:
    """``value`` rounded half-even to 4 decimal places, exactly (a ``Decimal`` with exponent
    -4, so ``str()`` gives ``"0.9400"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"cannot render a non-finite figure: {value!r}")
    exact = Fraction(value)  # exact: a float's binary value, or the ratio itself
    scaled = exact * _SCALE
    whole, rest = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rest
    if twice > scaled.denominator or (twice == scaled.denominator and whole % 2 == 1):
        whole += 1
    # Built from a string: Decimal's constructor is exact whatever the context precision.
    return Decimal(f"{whole}E-{PLACES}")


def render4(value: float | int | Fraction) -> str:
    """The status string of a figure: always 4 places, e.g. ``"0.9400"``, ``"1.0000"``."""
    return str(quantize4(value))

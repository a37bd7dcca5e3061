"""The 4-place figures in status: ROUND_HALF_EVEN of the exact value."""

from __future__ import annotations

import decimal
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from decisionmodel.evaluation import EvaluationFigures, quantize4, render4


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.94, "0.9400"),
        (Fraction(47, 50), "0.9400"),
        (1, "1.0000"),
        (1.0, "1.0000"),
        (0, "0.0000"),
        (0.0, "0.0000"),
        (Fraction(2, 3), "0.6667"),  # 0.66666… rounds up
        (Fraction(1, 3), "0.3333"),
        # Exact ties at the 5th place go to the even 4th digit:
        (0.03125, "0.0312"),  # 1/32 is exact in binary; HALF_UP would give 0.0313
        (Fraction(1, 32), "0.0312"),
        (Fraction(3, 32), "0.0938"),  # 0.09375: 7 is odd → up to 8
        (Fraction(1, 160), "0.0062"),  # 0.00625 exactly: 2 is even → stays
        (Fraction(3, 160), "0.0188"),  # 0.01875: 7 is odd → up to 8
        # Not a tie: the float nearest 0.00625 is 0.006250000000000000346…, above the tie.
        (1 / 160, "0.0063"),
        (0.99996, "1.0000"),
        (0.00004, "0.0000"),
    ],
)
def test_render4(value: float | int | Fraction, text: str) -> None:
    assert render4(value) == text
    assert str(quantize4(value)) == text
    assert quantize4(value).as_tuple().exponent == -4


def test_accuracy_is_rendered_from_the_exact_ratio_of_counts() -> None:
    # 1 right of 160 pairs: exactly 0.00625 → "0.0062"; the float 1/160 would print "0.0063".
    figures = EvaluationFigures(
        accuracy=1 / 160, ece=0.0, brier=0.0, cases=160, pairs=160, correct=1, failed_cases=0
    )
    assert f"{figures.accuracy:.4f}" == "0.0063"
    assert figures.accuracy_4dp() == Decimal("0.0062")
    assert figures.rendered()["accuracy"] == "0.0062"


def test_non_finite_values_are_refused() -> None:
    for value in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            render4(value)


def test_the_global_decimal_context_does_not_matter() -> None:
    with decimal.localcontext(prec=2, rounding=decimal.ROUND_UP):
        assert render4(Fraction(1, 32)) == "0.0312"
        assert render4(0.9444) == "0.9444"


@given(st.floats(min_value=0.0, max_value=1.0))
def test_floats_render_as_printf_does(value: float) -> None:
    # Python's (and Go's) %.4f rounds the exact binary value half-even: the same rule.
    assert render4(value) == f"{value:.4f}"


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=10_000))
def test_ratios_render_as_decimal_half_even_does(correct: int, pairs: int) -> None:
    exact = Decimal(correct) / Decimal(pairs)  # 28 digits: enough to decide any tie here
    expected = exact.quantize(Decimal("0.0001"), rounding=decimal.ROUND_HALF_EVEN)
    assert quantize4(Fraction(correct, pairs)) == expected

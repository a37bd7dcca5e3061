"""Draw the examples of a fuzz target with Hypothesis: a fixed number, derandomised.

The examples are drawn first and checked after, so every example is counted (a failing check
inside `@given` would stop the run at the first problem and shrink it) and the API server's
dry-runs can overlap.
"""

from __future__ import annotations

from typing import TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

T = TypeVar("T")


def draw_examples(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    drawn: list[T] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example: T) -> None:
        drawn.append(example)

    collect()
    return drawn

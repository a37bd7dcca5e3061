"""Fuzz wall, pure half: golden datasets and runtime answers end valid or as a typed error
(a DmrolloutError with its reason), never as an unhandled exception."""

from __future__ import annotations

import asyncio

import pytest
from fuzz_checks import AnswerRig, check_dataset
from fuzz_run import draw_examples
from fuzz_strategies import datasets, runtime_answers
from fuzz_tally import EXAMPLES, Tally
from hypothesis import strategies as st

# make fuzz draws 10,000 examples per target; the pyproject default of 600 s is for one test.
pytestmark = pytest.mark.timeout(3600)


def test_fuzz_datasets(tally: Tally) -> None:
    examples = draw_examples(st.tuples(datasets(), st.integers(1, 600)), EXAMPLES)
    for raw, max_cases in examples:
        check_dataset(tally, raw, max_cases)
    assert tally.counts["generated"] == EXAMPLES
    assert not tally.failed(), tally.summary()


def test_fuzz_runtime_answers(tally: Tally) -> None:
    examples = draw_examples(runtime_answers(), EXAMPLES)
    rig = AnswerRig(asyncio.new_event_loop())
    try:
        for answer in examples:
            rig.check(tally, answer)
    finally:
        rig.close()
        rig.loop.close()
    assert tally.counts["generated"] == EXAMPLES
    assert not tally.failed(), tally.summary()

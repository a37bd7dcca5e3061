"""spread_cases: cases over several Pods, several in flight each, committed in dataset order.

The sends are fakes whose answers the test releases in the order it chooses, so "out of order"
and "in flight" are facts of the test, not of timing. The resume tests run the real
EvaluationProgress: a spread run, interrupted or not, must give exactly a sequential run's sums.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from decisionmodel.evaluation import EvaluationProgress, GoldenCase, finalize, parse_dataset
from decisionmodel.evaluation.spread import Lane, spread_cases

QUESTIONS = {
    "route": {"type": "choice", "criteria": ["billing", "tech", "other"]},
    "urgent": {"type": "noul"},
}


def cases(n: int) -> list[GoldenCase]:
    lines = [
        {
            "state": f"case {i}",
            "questions": QUESTIONS,
            "expected": {"route": ["billing", "tech", "other"][i % 3], "urgent": i % 2 == 0},
        }
        for i in range(n)
    ]
    return parse_dataset("\n".join(json.dumps(line) for line in lines).encode())


def answer_for(case: GoldenCase) -> dict[str, Any]:
    """A deterministic answer per case, right or wrong, with confidences all over the bins."""
    rng = random.Random(case.index)
    label = rng.choice(["billing", "tech", "other"])
    p = rng.random()
    return {
        "route": {"type": "choice", "choice": label, "probabilities": {label: p}},
        "urgent": {"type": "noul", "noul": rng.random()},
    }


class Held:
    """A send that waits until the test releases its case; records who is in flight."""

    def __init__(self, lane: str, log: Held.Log, only: set[int] | None = None) -> None:
        self.lane = lane
        self.log = log
        self.only = only  # hold only these cases; answer the others at once

    class Log:
        def __init__(self) -> None:
            self.in_flight: dict[int, str] = {}  # case index -> lane
            self.sent: list[tuple[int, str]] = []
            self.peak: dict[str, int] = {}
            self.release: dict[int, asyncio.Future[object]] = {}
            self.cancelled: list[int] = []

        def future(self, index: int) -> asyncio.Future[object]:
            return self.release.setdefault(index, asyncio.get_running_loop().create_future())

        def answer(self, index: int, value: object = None) -> None:
            self.future(index).set_result(value)

        def fail(self, index: int, error: BaseException) -> None:
            self.future(index).set_exception(error)

    async def __call__(self, case: GoldenCase) -> object:
        log = self.log
        log.sent.append((case.index, self.lane))
        if self.only is not None and case.index not in self.only:
            return f"{self.lane} {case.index}"
        log.in_flight[case.index] = self.lane
        now = sum(1 for lane in log.in_flight.values() if lane == self.lane)
        log.peak[self.lane] = max(log.peak.get(self.lane, 0), now)
        try:
            return await log.future(case.index)
        except asyncio.CancelledError:
            log.cancelled.append(case.index)
            raise
        finally:
            del log.in_flight[case.index]


async def until(check: Callable[[], bool], what: str) -> None:
    """Let the event loop run until ``check`` holds (a bounded number of turns, no clock)."""
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def test_cases_go_to_every_lane_with_its_in_flight_and_commit_in_order() -> None:
    log = Held.Log()
    todo = cases(6)
    committed: list[tuple[int, object]] = []
    lanes = [Lane(send=Held("a", log), in_flight=2), Lane(send=Held("b", log), in_flight=2)]
    run = asyncio.create_task(
        spread_cases(todo, lanes, lambda c, r: committed.append((c.index, r)))
    )

    await until(lambda: len(log.in_flight) == 4, "four cases in flight")
    assert sorted(log.in_flight) == [0, 1, 2, 3]
    assert sorted(log.in_flight.values()) == ["a", "a", "b", "b"]
    # Answers arrive last first: nothing is committed before case 0 is answered.
    for index in (3, 2, 1):
        log.answer(index, f"answer {index}")
    await until(lambda: len(log.sent) == 6, "cases 4 and 5 sent in the freed slots")
    assert committed == []
    log.answer(0, "answer 0")
    await until(lambda: len(committed) == 4, "the prefix 0-3 committed")
    assert committed == [(i, f"answer {i}") for i in range(4)]
    log.answer(5, "answer 5")
    log.answer(4, "answer 4")
    await run
    assert committed == [(i, f"answer {i}") for i in range(6)]
    assert log.peak == {"a": 2, "b": 2}


async def test_a_slow_lane_takes_fewer_cases() -> None:
    log = Held.Log()
    todo = cases(10)
    committed: list[int] = []
    lanes = [
        Lane(send=Held("slow", log, only={0}), in_flight=1),
        Lane(send=Held("fast", log, only=set()), in_flight=1),
    ]
    run = asyncio.create_task(spread_cases(todo, lanes, lambda c, r: committed.append(c.index)))
    await until(lambda: 0 in log.in_flight, "the slow lane holds case 0")
    await until(lambda: len(log.sent) == 8, "the fast lane fills the window (8)")
    assert committed == []
    log.answer(0, "slow 0")
    await run
    assert committed == list(range(10))
    by_lane = [lane for _, lane in sorted(log.sent)]
    assert by_lane[:8] == ["slow"] + ["fast"] * 7  # meanwhile the fast lane did cases 1-7


async def test_the_window_bounds_how_far_sending_runs_ahead_of_the_prefix() -> None:
    log = Held.Log()
    todo = cases(20)
    lanes = [
        Lane(send=Held("stuck", log, only={0}), in_flight=1),
        Lane(send=Held("fast", log, only=set()), in_flight=1),
    ]
    run = asyncio.create_task(spread_cases(todo, lanes, lambda c, r: None, window=5))
    await until(lambda: 0 in log.in_flight and len(log.sent) == 5, "cases 1-4 answered")
    for _ in range(50):
        await asyncio.sleep(0)
    assert sorted(i for i, _ in log.sent) == [0, 1, 2, 3, 4]  # case 0 holds the prefix
    log.answer(0)
    await run
    assert sorted(i for i, _ in log.sent) == list(range(20))


async def test_the_first_error_is_raised_as_is_after_the_committed_prefix() -> None:
    log = Held.Log()
    todo = cases(8)
    committed: list[int] = []
    lanes = [Lane(send=Held("a", log), in_flight=2), Lane(send=Held("b", log), in_flight=2)]
    run = asyncio.create_task(spread_cases(todo, lanes, lambda c, r: committed.append(c.index)))
    await until(lambda: len(log.in_flight) == 4, "four in flight")
    log.answer(0)
    log.answer(2)
    await until(lambda: 4 in log.in_flight, "case 4 sent in case 0's slot")
    boom = ConnectionError("Pod b went away")
    log.fail(1, boom)
    with pytest.raises(ConnectionError) as caught:
        await run
    assert caught.value is boom  # not an ExceptionGroup: typed_errors sees the real error
    assert committed == [0]  # case 2 was answered but case 1 never was: not committed
    assert not log.in_flight  # every other send was cancelled, none outlives the call
    assert sorted(log.cancelled) == [3, 4, 5]


async def test_nothing_to_do_and_no_lane() -> None:
    await spread_cases([], [], lambda c, r: None)
    with pytest.raises(ValueError, match="at least one lane"):
        await spread_cases(cases(1), [], lambda c, r: None)


# --- the figures: identical to a sequential pass, interrupted or not -----------------------------


def sequential(todo: list[GoldenCase]) -> EvaluationProgress:
    progress = EvaluationProgress(dataset_digest="d" * 64)
    for case in todo:
        progress.add_case(case, answer_for(case))
    return progress


def shuffled_lane(rng: random.Random, fail_at: int | None = None) -> Callable[..., Any]:
    async def send(case: GoldenCase) -> object:
        for _ in range(rng.randrange(8)):  # answers come back in a scrambled order
            await asyncio.sleep(0)
        if case.index == fail_at:
            raise ConnectionError("worker lost")
        return answer_for(case)

    return send


@pytest.mark.parametrize("seed", range(5))
async def test_spread_gives_the_sequential_figures(seed: int) -> None:
    todo = cases(60)
    rng = random.Random(seed)
    progress = EvaluationProgress(dataset_digest="d" * 64)
    lanes = [Lane(send=shuffled_lane(rng), in_flight=2) for _ in range(3)]
    await spread_cases(todo, lanes, progress.add_case)
    assert progress == sequential(todo)
    assert finalize(progress) == finalize(sequential(todo))


@pytest.mark.parametrize("seed", range(5))
async def test_a_crash_resumed_from_the_heartbeat_gives_the_sequential_figures(seed: int) -> None:
    todo = cases(60)
    rng = random.Random(seed)
    progress = EvaluationProgress(dataset_digest="d" * 64)
    beats: list[dict[str, Any]] = []

    def commit(case: GoldenCase, answers: object) -> None:
        progress.add_case(case, answers)
        beats.append(progress.model_dump(mode="json"))  # what evaluate heartbeats

    crash = 20 + seed * 7
    lanes = [Lane(send=shuffled_lane(rng, fail_at=crash), in_flight=2) for _ in range(2)]
    with pytest.raises(ConnectionError):
        await spread_cases(todo, lanes, commit)
    # The next attempt reads the last heartbeat back (through JSON, as Temporal stores it).
    resumed = EvaluationProgress.model_validate(json.loads(json.dumps(beats[-1])))
    assert resumed.next_case_index <= crash
    lanes = [Lane(send=shuffled_lane(rng), in_flight=2) for _ in range(2)]
    await spread_cases(todo[resumed.next_case_index :], lanes, resumed.add_case)
    assert resumed == sequential(todo)

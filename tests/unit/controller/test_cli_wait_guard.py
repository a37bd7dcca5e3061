"""Issue 34: `dmrollout wait` returns on a guard that holds the latest generation's rollout
(exit 9, the reason and the fix), once it held for longer than the step's retry interval; a
guard just fixed, a registry hiccup or an older generation's guard is not a hold."""

from __future__ import annotations

from typing import Any

import pytest

from controller.cli import verbs_act
from controller.cli.errors import CliError, ExitCode
from controller.cli.verbs_act import GUARD_HOLD_SECONDS, GuardWatch


def dm(reason: str = "SecretNotAllowed", generation: int = 3, status: str = "False") -> Any:
    return {
        "metadata": {"namespace": "ns", "name": "router", "generation": 3},
        "status": {
            "phase": "Evaluating",
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Serving", "message": ""},
                {
                    "type": "Evaluated",
                    "status": status,
                    "reason": reason,
                    "message": "label the Secret decisionmodel.io/eval-dataset=true",
                    "observedGeneration": generation,
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                },
            ],
        },
    }


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(verbs_act.time, "monotonic", c)
    return c


def test_a_guard_held_past_the_retry_interval_is_a_hold_with_its_fix(clock: Clock) -> None:
    assert GUARD_HOLD_SECONDS > 30  # the rollout's steps retry at most 30 s apart
    watch = GuardWatch()
    watch.see(dm(), running=True)
    clock.now += GUARD_HOLD_SECONDS - 1
    watch.see(dm(), running=True)  # fixed just before `wait`: the next attempt clears it
    clock.now += 1
    with pytest.raises(CliError) as held:
        watch.see(dm(), running=True)
    assert held.value.code == ExitCode.BLOCKED == 9
    assert "Evaluated=False SecretNotAllowed" in held.value.message
    assert "decisionmodel.io/eval-dataset=true" in held.value.message
    assert "dmrollout abort router -n ns" in held.value.message


def test_a_guard_that_clears_starts_over(clock: Clock) -> None:
    watch = GuardWatch()
    watch.see(dm(), running=True)
    clock.now += GUARD_HOLD_SECONDS - 1
    watch.see(dm(status="Unknown", reason="GuardCleared"), running=True)
    clock.now += GUARD_HOLD_SECONDS - 1
    watch.see(dm(), running=True)
    assert watch.since == clock.now


@pytest.mark.parametrize(
    ("obj", "running"),
    [
        (dm(), False),  # no rollout runs: `wait` settles on the phase instead
        (dm(generation=2), True),  # an older generation's guard
        (dm(reason="RegistryUnavailable"), True),  # retried by itself
    ],
    ids=["not-running", "older-generation", "registry"],
)
def test_not_a_hold(clock: Clock, obj: Any, running: bool) -> None:
    watch = GuardWatch()
    for _ in range(3):
        watch.see(obj, running=running)
        clock.now += GUARD_HOLD_SECONDS
    assert watch.since is None

"""The bound on waiting for a stopping run (controller.reconciler.superseding)."""

from __future__ import annotations

from typing import Any

from controller.reconciler.superseding import (
    STOP_WAIT_SECONDS,
    Superseding,
    closing_run,
    overdue_message,
    waiting_message,
)
from controller.temporal.rollouts import RunningRollout
from decisionmodel.api import DecisionModel


def dm(status: dict[str, Any]) -> DecisionModel:
    return DecisionModel.from_k8s(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 2},
            "spec": {"model": "laya:en"},
            "status": status,
        }
    )


def test_the_wait_is_bounded_per_decision_model_and_starts_again_after_it_ends() -> None:
    now = [100.0]
    s = Superseding(monotonic=lambda: now[0])
    assert not s.overdue("ns/a", ("old",))
    now[0] += STOP_WAIT_SECONDS
    assert not s.overdue("ns/a", ("old",))
    assert not s.overdue("ns/b", ("other",))  # its own clock
    now[0] += 1
    assert s.overdue("ns/a", ("old",))
    assert not s.overdue("ns/a", ())  # it closed: the next wait counts from its own start
    assert not s.overdue("ns/a", ("newer",))
    now[0] += STOP_WAIT_SECONDS / 2
    assert not s.overdue("ns/a", ("newer",))


def test_the_run_status_names_is_waited_for_only_when_not_looked_at_already() -> None:
    ended = dm({"phase": "RolledBack", "rollout": {"workflowId": "rollout/ns/m/h1"}})
    assert closing_run(ended, [], "rollout/ns/m/h2") == "rollout/ns/m/h1"
    assert closing_run(ended, [], "rollout/ns/m/h1") is None  # the target itself
    seen = [RunningRollout("rollout/ns/m/h1", None, "h1")]
    assert closing_run(ended, seen, "rollout/ns/m/h2") is None
    assert closing_run(dm({}), [], "rollout/ns/m/h2") is None


def test_the_messages_name_the_run_and_the_bound() -> None:
    for text in (waiting_message(("rollout/ns/m/h1",)), overdue_message(("rollout/ns/m/h1",))):
        assert "rollout/ns/m/h1" in text and f"{STOP_WAIT_SECONDS:.0f}s" in text

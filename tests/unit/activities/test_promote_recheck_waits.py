"""Promote's re-check in the activity: Pods that do not answer are waited for (shown once on
Promoted), the wait goes on across attempts from the first attempt's heartbeat, and ends in a
refusal once the probe-error window has passed; a wait that outlasts its attempt is retried,
not final (chaos cell runtime_unreachable at promote).

``_recheck`` runs in Temporal's ActivityEnvironment against a fake cluster (the candidate's
Pods as dicts) with ``inspect_pod`` and ``show_guard`` replaced by recorders."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment

from activities import promote
from activities.promote import PromoteActivities
from decisionmodel.engine.runtime_client import GateVerdict
from decisionmodel.errors import ProbeError
from decisionmodel.rollout.contracts import DMRef, PromoteInput, RevisionSpec
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.rollout.spec_mapping import record_for
from decisionmodel.vocabulary import ConditionType, Reason
from kube.client import Kube
from kube.pod_gate import GATE_TYPE, READY_TYPE

DIGEST = "c" * 64
MODEL = "http://127.0.0.1:5000/library/laya:en"
DM = DMRef(namespace="ns", name="triage", uid="u-1")
QUIET = GateVerdict(
    ready=False, reason=Reason.PROBE_ERROR, message="probe failed: no answer", unanswered=True
)
READY = GateVerdict(ready=True, reason=Reason.MODEL_READY, message="model-ready")


class FakeKube:
    def list_revision_pods(self, namespace: str, dm: str, revision: str) -> list[dict[str, Any]]:
        ready = [{"type": t, "status": "True"} for t in (GATE_TYPE, READY_TYPE)]
        return [{"metadata": {"name": "p-0"}, "status": {"podIP": "1", "conditions": ready}}]


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> list[GateVerdict]:
    """The Pod's verdicts in order (the last repeats)."""
    queue: list[GateVerdict] = []
    asked = [0]

    async def inspect(*args: Any) -> GateVerdict:
        asked[0] += 1
        return queue[min(asked[0], len(queue)) - 1]

    monkeypatch.setattr(promote, "inspect_pod", inspect)
    monkeypatch.setattr(promote, "RECHECK_PAUSE_SECONDS", 0.0)
    return queue


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[tuple[ConditionType, str, bool]]:
    writes: list[tuple[ConditionType, str, bool]] = []

    async def record(
        kube: Any, dm: DMRef, condition: ConditionType, reason: str, message: str, first: bool
    ) -> None:
        writes.append((condition, reason, first))

    monkeypatch.setattr(promote, "show_guard", record)
    return writes


def recheck_input() -> PromoteInput:
    return PromoteInput(dm=DM, candidate=record_for(RevisionSpec(model=MODEL), DIGEST), model=MODEL)


def env(attempt: int = 1, since: float | None = None) -> tuple[ActivityEnvironment, list[Any]]:
    e = ActivityEnvironment()
    details = [[since]] if since is not None else []
    e.info = dataclasses.replace(e.info, attempt=attempt, heartbeat_details=details)
    beats: list[Any] = []
    e.on_heartbeat = lambda *d: beats.extend(d)
    return e, beats


def acts() -> PromoteActivities:
    return PromoteActivities(cast(Kube, FakeKube()), RolloutSettings())


async def test_a_silent_pod_is_waited_for_and_shown_once_then_passes(
    answers: list[GateVerdict], shown: list[tuple[ConditionType, str, bool]]
) -> None:
    answers.extend([QUIET, QUIET, QUIET, READY])
    e, beats = env()
    before = time.time()
    await e.run(acts()._recheck, recheck_input())
    assert shown == [(ConditionType.PROMOTED, Reason.PROBE_ERROR, True)]
    # Every heartbeat carries when the Pod first did not answer, for a later attempt.
    assert beats and all(b.unanswered_since >= before for b in beats)
    assert len({b.unanswered_since for b in beats}) == 1


async def test_the_window_counts_from_the_first_attempts_heartbeat(
    answers: list[GateVerdict], shown: list[tuple[ConditionType, str, bool]]
) -> None:
    answers.append(QUIET)
    e, _ = env(attempt=3, since=time.time() - 200)
    with pytest.raises(ProbeError, match="did not answer the re-check before promotion for 180s"):
        await e.run(acts()._recheck, recheck_input())


async def test_a_wait_longer_than_its_attempt_is_retried_not_final(
    answers: list[GateVerdict],
    shown: list[tuple[ConditionType, str, bool]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers.append(QUIET)
    monkeypatch.setattr(promote, "RECHECK_ATTEMPT_SECONDS", 0.0)
    e, _ = env()
    with pytest.raises(ProbeError) as raised:
        await e.run(acts()._recheck, recheck_input())
    assert not raised.value.permanent and "cannot reach p-0" in str(raised.value)

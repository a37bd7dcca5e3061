"""A warm-up held by its runtime says so on Promoted, once per change, not once per round; a
runtime that refuses the model name fails the step at once (issue 11, point 12).

The activity runs in Temporal's ActivityEnvironment against a fake cluster (Pods as dicts, the
gate patch applied in place, PodReady following the gate as the kubelet computes it) and fake
runtime clients; the status writer is recorded instead of applied.
"""

from __future__ import annotations

import asyncio
import copy
from types import TracebackType
from typing import Any, cast

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import warmup_inspect
from activities.warmup_inspect import HOLD_REWRITE_SECONDS, HoldDisplay, WarmupActivities
from decisionmodel.engine.runtime_client import PsModel, RuntimeClient, WarmupResult, verdict
from decisionmodel.errors import ProbeError, RuntimeRequestRejected
from decisionmodel.rollout.contracts import DMRef, RevisionSpec, WarmupInput
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.rollout.spec_mapping import record_for
from decisionmodel.vocabulary import ConditionType, Reason
from kube.client import Kube
from kube.pod_gate import CONTAINERS_READY_TYPE, GATE_TYPE, READY_TYPE

DIGEST = "c" * 64
MODEL = "http://127.0.0.1:5000/library/laya:en"
DM = DMRef(namespace="ns", name="triage", uid="u-1")
SETTINGS = RolloutSettings(poll_interval_seconds=0.01)
Shown = tuple[ConditionType, str, str, bool]


def pod(name: str, ip: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": DM.namespace},
        "status": {
            "podIP": ip,
            "conditions": [{"type": CONTAINERS_READY_TYPE, "status": "True"}],
        },
    }


class FakeKube:
    """The revision's Pods (read by the wait) and the one call warmup_inspect makes: patch a
    Pod condition."""

    def __init__(self, *pods: dict[str, Any]) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}

    def list_revision_pods(self, namespace: str, dm: str, revision: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(p) for p in self.pods.values()]

    def patch_pod_condition(self, namespace: str, name: str, condition: dict[str, Any]) -> None:
        conditions = self.pods[name]["status"]["conditions"]
        kept = [c for c in conditions if c["type"] not in (condition["type"], READY_TYPE)]
        kept.append(condition)
        if condition["type"] == GATE_TYPE:  # the kubelet: Ready = containers ready and gates
            kept.append({"type": READY_TYPE, "status": condition["status"]})
        self.pods[name]["status"]["conditions"] = kept


class FakeRuntime:
    """One Pod's runtime: its warmup answers, in order (the last one repeats)."""

    def __init__(self, *answers: BaseException | None) -> None:
        self.answers = list(answers)
        self.warmups = 0

    async def __aenter__(self) -> FakeRuntime:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def warmup(self, model: str, timeout: float | None = None) -> WarmupResult:
        self.warmups += 1
        answer = self.answers[min(self.warmups, len(self.answers)) - 1]
        if answer is not None:
            raise answer
        return WarmupResult(model=model, done_reason="load")

    async def inspect(self, model: str) -> PsModel:
        return PsModel(name=model, digest=DIGEST, expires_at=None, device="cpu")


@pytest.fixture(autouse=True)
def polled_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake cluster has no watch: the wait reads its Pods each idle period instead (the
    Pods are the revision's already; the ReplicaSet filter has its own tests)."""

    async def wait_until(kube: FakeKube, src: None, check: Any, *, idle: float) -> Any:
        while True:
            found = await check(kube.list_revision_pods(DM.namespace, DM.name, ""))
            if found is not None:
                return found
            await asyncio.sleep(idle)

    monkeypatch.setattr(warmup_inspect, "wait_until", wait_until)
    monkeypatch.setattr(warmup_inspect, "source", lambda *args, **kwargs: None)
    monkeypatch.setattr(warmup_inspect, "serving_pods", lambda pods, dm, revision: pods)


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[Shown]:
    writes: list[Shown] = []

    async def record(
        kube: Any, dm: DMRef, condition: ConditionType, reason: str, message: str, first: bool
    ) -> None:
        writes.append((condition, reason, message, first))

    monkeypatch.setattr(warmup_inspect, "show_guard", record)
    return writes


def activities(kube: FakeKube, runtimes: dict[str, FakeRuntime]) -> WarmupActivities:
    return WarmupActivities(
        cast(Kube, kube),
        SETTINGS,
        runtime_client_factory=lambda ip, **_: cast(RuntimeClient, runtimes[ip]),
    )


def warmup_input(replicas: int) -> WarmupInput:
    record = record_for(RevisionSpec(model=MODEL), DIGEST)
    return WarmupInput(dm=DM, record=record, model=MODEL, replicas=replicas)


UNREACHABLE = ProbeError(
    "warmup: http://100.72.0.5:11435 cannot be reached (ConnectError: refused); check the "
    "Pod's runtime is up and its port is reachable from the worker (NetworkPolicy)"
)


async def test_an_unreachable_runtime_shows_once_then_clears(shown: list[Shown]) -> None:
    runtime = FakeRuntime(UNREACHABLE, UNREACHABLE, UNREACHABLE, UNREACHABLE, None)
    acts = activities(FakeKube(pod("p-0", "100.72.0.5")), {"100.72.0.5": runtime})
    result = await ActivityEnvironment().run(acts.warmup_inspect, warmup_input(1))
    assert result.model_ready == 1 and runtime.warmups == 5
    # Four rounds held by the same failure: one write, with the first attempt's Event.
    assert shown == [
        (
            ConditionType.PROMOTED,
            Reason.PROBE_ERROR,
            f"Pod p-0: probe failed: {UNREACHABLE}",
            True,
        ),
        (
            ConditionType.PROMOTED,
            Reason.MODEL_READY,
            "1/1 Pods model-ready; not promoted yet",
            False,
        ),
    ]


async def test_a_warmup_without_trouble_writes_nothing(shown: list[Shown]) -> None:
    acts = activities(FakeKube(pod("p-0", "100.72.0.5")), {"100.72.0.5": FakeRuntime(None)})
    await ActivityEnvironment().run(acts.warmup_inspect, warmup_input(1))
    assert shown == []


async def test_a_refused_model_name_fails_the_step_at_once(shown: list[Shown]) -> None:
    refused = RuntimeRequestRejected(
        f"warmup of {MODEL}: the runtime at http://100.72.0.6:11435 refused it (400 "
        "INVALID_MODEL_NAME: 'more than three segments')",
        status=400,
        code="INVALID_MODEL_NAME",
    )
    healthy, refusing = FakeRuntime(None), FakeRuntime(refused)
    kube = FakeKube(pod("p-0", "100.72.0.5"), pod("p-1", "100.72.0.6"))
    acts = activities(kube, {"100.72.0.5": healthy, "100.72.0.6": refusing})
    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(acts.warmup_inspect, warmup_input(2))
    assert caught.value.type == Reason.RUNTIME_REQUEST_REJECTED
    assert caught.value.non_retryable is True
    assert "INVALID_MODEL_NAME" in str(caught.value)
    # The other Pod's probe ran to its end before the step failed: nothing left running.
    assert (healthy.warmups, refusing.warmups) == (1, 1)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_holds_are_rewritten_on_change_and_rate_limited(shown: list[Shown]) -> None:
    clock = Clock()
    display = HoldDisplay(cast(Kube, FakeKube()), DM, clock=clock)
    a = (Reason.PROBE_ERROR.value, "Pod p-0: probe failed: a")
    b = (Reason.PROBE_ERROR.value, "Pod p-1: probe failed: b")
    assert await display.show(a)
    assert not await display.show(a)  # the same hold: no write
    clock.now = HOLD_REWRITE_SECONDS - 1
    assert not await display.show(b)  # new text, same reason: not yet
    clock.now = HOLD_REWRITE_SECONDS
    assert await display.show(b)
    assert not await display.show(None)
    assert [write[2] for write in shown] == [a[1], b[1]]


def test_only_probe_errors_of_live_pods_are_holds() -> None:
    p0, p1 = pod("p-0", "100.72.0.5"), pod("p-1", "100.72.0.6")
    mismatch = verdict(
        "d" * 64, "cpu", PsModel(name=MODEL, digest=DIGEST, expires_at=None, device="cpu"), None
    )
    probe = verdict(DIGEST, "cpu", None, UNREACHABLE)
    assert HoldDisplay.hold_of([p0, p1], {"p-0": mismatch}) is None
    assert HoldDisplay.hold_of([p0, p1], {"p-0": mismatch, "p-1": probe}) == (
        Reason.PROBE_ERROR.value,
        f"Pod p-1: {probe.message}",
    )

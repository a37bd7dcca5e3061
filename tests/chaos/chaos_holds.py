"""How a cell keeps the candidate's rollout in its step long enough for the fault to land there.

A hold is set up before the spec changes (``prepare``), says when the rollout is in the step
(``reached``: the progress query, or the step's activity STARTED in Temporal), and is lifted
after the fault heals (``release``):

- resolve: the registry answers the candidate's first manifest request 6 s late (under the
  resolver's 10 s read timeout);
- prefetch: every blob of the candidate's repository 3 s late (two blobs);
- start: the candidate's Pods stay Pending (their nodeSelector matches no node until release;
  the blobs are late too, so the nodes lose the label after the prefetch Pod is bound and
  before the Deployment's Pods are);
- warmup_inspect: every model load in the namespace takes 10 s (``load-delay-seconds``);
- evaluate: every decision takes 300 ms (``latency-ms``): 40 cases, candidate then baseline;
- awaiting_promotion: Manual promotion; the approval (annotation, through the controller) is
  given when the fault has healed;
- promote: Manual promotion too; the approval is a Temporal signal, sent while the worker's
  API server (through the cell's proxy) answers 2 s late, so the step's status writes and its
  activity take seconds instead of a fraction of one; the fault goes in once the query says
  step ``promote``, and the API server is at full speed again from then on;
- grace: the cell's controller sets a 30 s promotion grace; the fault goes in once the query
  says step ``grace``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
from chaos_matrix import Cell, FaultKind, Step
from chaos_observe import Timeline
from chaos_rig import DM, CellRig
from harness.helpers import async_assert_eventually
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowHandle

from decisionmodel.engine.render.labels import ANNOTATION_PROMOTE, prefetch_job_name
from decisionmodel.rollout.contracts import Phase
from localenv.env import REGISTRY_URL
from localenv.kwok_stages import JOB_POD_LABEL
from simulators.pod_faults import PREFIX as SIM_PREFIX
from workflows.rollout import RolloutWorkflow

REACH_SECONDS = 120.0
T = TypeVar("T")


async def activity_started(handle: WorkflowHandle[Any, Any], name: str) -> bool:
    desc = await handle.describe()
    for pa in desc.raw_description.pending_activities:
        if pa.activity_type.name == name:
            assert pa.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED, pa.state
            return True
    raise AssertionError(f"activity {name} not pending")


async def until_started(handle: WorkflowHandle[Any, Any], name: str) -> None:
    await async_assert_eventually(
        lambda: activity_started(handle, name), REACH_SECONDS, 0.1, f"{name} running"
    )


async def until_step(timeline: Timeline, step: str, interval: float = 0.1) -> None:
    async def there() -> bool:
        progress = await timeline.poll()
        assert progress is not None and progress.step == step, progress
        return True

    await async_assert_eventually(there, REACH_SECONDS, interval, f"step {step}")


def _handle(timeline: Timeline) -> WorkflowHandle[Any, Any]:
    assert timeline.handle is not None
    return timeline.handle


def registry_fault(repo: str, tag: str, fault: dict[str, Any]) -> None:
    with httpx.Client(trust_env=False, timeout=10) as c:
        url = f"{REGISTRY_URL}/_sim/faults/library/{repo}/{tag}"
        c.put(url, json=fault).raise_for_status()


def clear_registry_fault(repo: str, tag: str) -> None:
    with httpx.Client(trust_env=False, timeout=10) as c:
        c.delete(f"{REGISTRY_URL}/_sim/faults/library/{repo}/{tag}").raise_for_status()


def annotate_namespace(rig: CellRig, key: str, value: str | None) -> None:
    setting = f"{SIM_PREFIX}{key}={value}" if value is not None else f"{SIM_PREFIX}{key}-"
    rig.cluster.kubectl("annotate", "namespace", rig.namespace, "--overwrite", setting)


class Hold:
    def prepare(self, rig: CellRig) -> None:
        """Before the spec changes."""

    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        """Returns once the rollout is in the step (and held there)."""
        raise NotImplementedError

    async def after_inject(self, rig: CellRig) -> None:
        """Right after the fault went in."""

    def release(self, rig: CellRig) -> None:
        """After the fault healed."""


class ResolveHold(Hold):
    def prepare(self, rig: CellRig) -> None:
        registry_fault(rig.repo, "v2", {"delay_seconds": 6.0, "count": 1})

    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        await until_started(_handle(timeline), "resolve")

    def release(self, rig: CellRig) -> None:
        clear_registry_fault(rig.repo, "v2")


class PrefetchHold(Hold):
    def prepare(self, rig: CellRig) -> None:
        registry_fault(rig.repo, "v2", {"target": "blob", "delay_seconds": 3.0})

    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        await until_started(_handle(timeline), "prefetch")

        def job_created() -> bool:
            revision = timeline.last.revision if timeline.last else None
            return bool(revision) and prefetch_job_name(DM, str(revision)) in rig.h.names("job")

        await async_assert_eventually(_async(job_created), REACH_SECONDS, 0.2, "prefetch Job")

    def release(self, rig: CellRig) -> None:
        clear_registry_fault(rig.repo, "v2")


class StartHold(PrefetchHold):
    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        await super().reached(rig, timeline)
        revision = str(timeline.last.revision if timeline.last else "")
        job = prefetch_job_name(DM, revision)

        def job_pod_bound() -> bool:
            pods = rig.h.kubectl("get", "pods", "-l", f"{JOB_POD_LABEL}={job}", "-o", "name")
            bound = rig.h.kubectl(
                "get", "pods", "-l", f"{JOB_POD_LABEL}={job}",
                "-o", "jsonpath={.items[*].spec.nodeName}",
            )  # fmt: skip
            return bool(pods.split()) and len(bound.split()) == len(pods.split())

        await async_assert_eventually(_async(job_pod_bound), REACH_SECONDS, 0.2, "Job Pod bound")
        rig.nodes.engage()
        await until_started(_handle(timeline), "start")

        def pending_pod() -> bool:
            pods = rig.h.pods(DM, revision)
            return bool(pods) and not any(p["spec"].get("nodeName") for p in pods)

        await async_assert_eventually(_async(pending_pod), REACH_SECONDS, 0.2, "Pods Pending")

    def release(self, rig: CellRig) -> None:
        rig.nodes.release()
        super().release(rig)


class WarmupHold(Hold):
    def prepare(self, rig: CellRig) -> None:
        annotate_namespace(rig, "load-delay-seconds", "10")

    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        await until_started(_handle(timeline), "warmup_inspect")

    def release(self, rig: CellRig) -> None:
        annotate_namespace(rig, "load-delay-seconds", None)


class EvaluateHold(Hold):
    def prepare(self, rig: CellRig) -> None:
        annotate_namespace(rig, "latency-ms", "300")

    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        await until_started(_handle(timeline), "evaluate")

    def release(self, rig: CellRig) -> None:
        annotate_namespace(rig, "latency-ms", None)


class AwaitingHold(Hold):
    token = ""

    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        async def waiting() -> str:
            progress = await timeline.poll()
            assert progress is not None and progress.phase == Phase.AWAITING_PROMOTION, progress
            assert progress.expected_approval, progress
            return progress.expected_approval

        self.token = await async_assert_eventually(waiting, REACH_SECONDS, 0.2, "AwaitingPromotion")


class ApprovalAnnotationHold(AwaitingHold):
    """The approval goes through the controller (the annotation), once the fault healed."""

    def release(self, rig: CellRig) -> None:
        rig.h.kubectl("annotate", "dm", DM, "--overwrite", f"{ANNOTATION_PROMOTE}={self.token}")


class PromoteHold(AwaitingHold):
    """The worker's API server answers 2 s late from the approval on: promote's status writes
    and its activity then take seconds instead of a fraction of one. Full speed again as soon
    as the fault is in."""

    LAG_SECONDS = 2.0

    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        await super().reached(rig, timeline)
        assert rig.proxy is not None
        rig.proxy.slow(self.LAG_SECONDS)
        await _handle(timeline).signal(RolloutWorkflow.promote, self.token)
        await until_step(timeline, "promote")

    async def after_inject(self, rig: CellRig) -> None:
        assert rig.proxy is not None
        rig.proxy.slow(0)


class GraceHold(Hold):
    async def reached(self, rig: CellRig, timeline: Timeline) -> None:
        await until_step(timeline, "grace")


def hold_for(cell: Cell) -> Hold:
    holds: dict[Step, Hold] = {
        Step.RESOLVE: ResolveHold(),
        Step.PREFETCH: PrefetchHold(),
        Step.START: StartHold(),
        Step.WARMUP_INSPECT: WarmupHold(),
        Step.EVALUATE: EvaluateHold(),
        Step.AWAITING_PROMOTION: ApprovalAnnotationHold(),
        Step.PROMOTE: PromoteHold(),
        Step.GRACE: GraceHold(),
    }
    return holds[cell.step]


def injected_before_trigger(cell: Cell) -> bool:
    """Registry errors at resolve go in before the spec changes: resolve's only peer is the
    registry, so the errors themselves hold the step, and a request already on its way (the
    late one of the resolve hold) would otherwise slip through before them."""
    return cell.fault is FaultKind.REGISTRY and cell.step is Step.RESOLVE


def _async(check: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """A blocking check (kubectl) for async_assert_eventually, off the event loop."""

    async def run() -> T:
        return await asyncio.to_thread(check)

    return run

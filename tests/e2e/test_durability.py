"""Durability: a rollout survives a crashed worker (SIGKILL) and a restarted Temporal server.

Every rollout here runs on a task queue of its own served only by a real ``dmrollout worker``
process (:class:`rollout_harness.WorkerProcess`), never by the in-process worker of the other
e2e tests, so killing that process leaves nobody to run the rollout until a new one starts.

How a test knows a step is *running* (not merely next): the workflow's pending activity of
that name is in state STARTED (``DescribeWorkflowExecution``, which needs no worker). How it
knows the kill hit the running attempt: the step's ``ActivityTaskStarted`` event in the final
history says ``attempt >= 2`` (Temporal writes one Started event per activity, for the attempt
that finished), i.e. the attempt the killed worker held timed out on its heartbeat (the
harness sets ``heartbeat_timeout_seconds=5``) and a retry ran on the new worker. After it:
exactly one Job, PVC and Deployment (the UIDs of those that existed at the kill unchanged:
adopted, not re-created), one ReplicaSet, and as many serving Pods as replicas.

Each step is held open long enough to be killed:

- prefetch: the registry answers blob downloads of a model repository unique to the test late;
- start: the Pods' nodeSelector matches no node until the test labels the nodes (NodeHold);
- warmup_inspect: every model load on the candidate's Pods takes 4 s (``load-delay-seconds``);
- evaluate: every decision takes 250 ms (``latency-ms``), 40 cases.

The whole file takes about 2.5 minutes.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import (
    SIM_PREFIX,
    RolloutHarness,
    WorkerProcess,
    golden_jsonl,
    put_model,
)
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from decisionmodel.engine.render.labels import deployment_name, prefetch_job_name, store_pvc_name
from decisionmodel.rollout.contracts import RolloutOutcome, RolloutResult
from localenv.cluster import LocalCluster
from localenv.env import REGISTRY_URL, LocalEnv, Simulators
from localenv.kwok_stages import JOB_POD_LABEL
from localenv.temporal import TemporalDevServer
from simulators.answers import expected_accuracy, make_golden_set

EVAL_CASES = 40
EVAL_LATENCY_MS = 250  # 40 cases x 250 ms = 10 s of decisions for an uninterrupted pass
EVAL_ACCURACY = 0.9


# -- fixtures: a queue served only by a worker process -------------------------------------------
@pytest.fixture
def queue() -> str:
    return f"durable-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def harness(
    crd: LocalCluster, simulators: Simulators, temporal_client: Client, queue: str
) -> RolloutHarness:
    """Overrides the e2e harness: rollouts go to ``queue``, which no in-process worker serves."""
    return RolloutHarness(crd, temporal_client, queue)


@pytest.fixture
def worker(
    crd: LocalCluster, temporal_server: TemporalDevServer, queue: str, tmp_path: Path
) -> Iterator[WorkerProcess]:
    proc = WorkerProcess(crd, temporal_server.address, queue, tmp_path)
    proc.start()
    yield proc
    proc.stop()


@dataclass
class NodeHold:
    """Keeps the serving Pods of one DecisionModel Pending while its prefetch Job runs.

    The Job's Pod and the Deployment's Pods share the spec's nodeSelector ``selector``. The
    nodes carry that label while the Job's Pod is scheduled (:meth:`arm`), lose it once the
    Job's Pod is bound (:meth:`engage`), so the Deployment's Pods find no node until
    :meth:`release` labels the nodes again. Only Pods with this test's selector are affected.
    """

    cluster: LocalCluster
    key: str

    @property
    def selector(self) -> dict[str, str]:
        return {self.key: "true"}

    def arm(self) -> None:
        for node in self.cluster.nodes:
            self.cluster.kubectl("label", "node", node.name, "--overwrite", f"{self.key}=true")

    release = arm

    def engage(self) -> None:
        for node in self.cluster.nodes:
            self.cluster.kubectl("label", "node", node.name, f"{self.key}-", check=False)


@pytest.fixture
def hold(crd: LocalCluster) -> Iterator[NodeHold]:
    h = NodeHold(crd, f"durability.dmrollout.dev/hold-{uuid.uuid4().hex[:8]}")
    h.arm()
    yield h
    h.engage()


@pytest.fixture
def slow_model() -> Iterator[str]:
    """A model of a repository unique to the test whose blobs the registry serves late, so
    prefetch runs for seconds (the delay stays under the prefetch's 10 s read timeout)."""
    repo = f"dur-{uuid.uuid4().hex[:8]}"
    put_model(repo, "v1", accuracy=EVAL_ACCURACY, revision=repo)
    fault = f"{REGISTRY_URL}/_sim/faults/library/{repo}/v1"
    with httpx.Client(trust_env=False) as c:
        c.put(fault, json={"target": "blob", "delay_seconds": 2.0}).raise_for_status()
    yield f"{repo}:v1"
    with httpx.Client(trust_env=False) as c:
        c.delete(fault)


def job_pod_bound(h: RolloutHarness) -> bool:
    pods = json.loads(h.kubectl("get", "pods", "-l", JOB_POD_LABEL, "-o", "json"))["items"]
    return bool(pods) and all(p["spec"].get("nodeName") for p in pods)


# -- observing the workflow without a worker ------------------------------------------------------
async def started_activity(handle: WorkflowHandle[Any, Any], name: str) -> PendingActivityInfo:
    """The pending activity ``name`` once a worker has started it (asserts otherwise)."""
    desc = await handle.describe()
    for pa in desc.raw_description.pending_activities:
        if pa.activity_type.name == name:
            assert pa.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED, pa.state
            return pa
    raise AssertionError(f"activity {name} not pending")


async def heartbeat(client: Client, pa: PendingActivityInfo) -> dict[str, Any]:
    values = await client.data_converter.decode(list(pa.heartbeat_details.payloads))
    assert values, "no heartbeat yet"
    last = values[-1]
    assert isinstance(last, dict)
    return last


async def final_attempt(handle: WorkflowHandle[Any, Any], name: str) -> int:
    """The attempt of activity ``name`` that finished, from its ActivityTaskStarted event."""
    history = await handle.fetch_history()
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == name
    }
    assert len(scheduled) == 1, f"{name} scheduled {len(scheduled)} times"
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = e.activity_task_started_event_attributes
            if attrs.scheduled_event_id in scheduled:
                return int(attrs.attempt)
    raise AssertionError(f"{name} never started")


async def result_through_restarts(
    handle: WorkflowHandle[Any, RolloutOutcome], timeout: float
) -> RolloutOutcome:
    """``handle.result()``, retried while the Temporal frontend is coming back."""

    async def wait() -> RolloutOutcome:
        while True:
            try:
                return await handle.result()
            except RPCError:
                await asyncio.sleep(0.5)

    return await asyncio.wait_for(wait(), timeout)


def assert_one_of_each(h: RolloutHarness, dm: str, revision: str, replicas: int) -> None:
    """Exactly one Job, PVC, Deployment (and ReplicaSet) for the revision, Pods = replicas."""
    assert h.names("job") == [prefetch_job_name(dm, revision)]
    assert h.names("pvc") == [store_pvc_name(dm, revision)]
    assert h.names("deployment") == [deployment_name(dm, revision)]
    assert len(h.names("replicaset")) == 1, h.names("replicaset")
    serving = [p["metadata"]["name"] for p in h.pods(dm, revision)]
    assert len(serving) == replicas, serving


def serving_pods(h: RolloutHarness) -> list[dict[str, Any]]:
    """Pods of any revision's Deployment (not the prefetch Job's)."""
    items: list[dict[str, Any]] = json.loads(
        h.kubectl("get", "pods", "-l", "decisionmodel.io/revision", "-o", "json")
    )["items"]
    return items


def pods_annotated(h: RolloutHarness, count: int) -> bool:
    pods = serving_pods(h)
    annotated = [
        p
        for p in pods
        if any(k.startswith(SIM_PREFIX) for k in p["metadata"].get("annotations", {}))
    ]
    return len(pods) == count and len(annotated) == count


# -- one test per step -----------------------------------------------------------------------------
async def test_worker_killed_during_prefetch(
    harness: RolloutHarness, worker: WorkerProcess, slow_model: str
) -> None:
    harness.create_dm("pf", {"model": slow_model, "replicas": 2})
    handle = await harness.start(harness.input_for("pf"))
    await async_assert_eventually(
        lambda: started_activity(handle, "prefetch"), 60, what="prefetch running"
    )
    await eventually(lambda: len(harness.names("job")) == 1, 30, what="prefetch Job created")
    outcome = await crash_and_recover(harness, handle, worker)
    assert await final_attempt(handle, "prefetch") >= 2
    assert_revision_complete(harness, "pf", outcome, replicas=2)


async def test_worker_killed_during_start(
    harness: RolloutHarness, worker: WorkerProcess, hold: NodeHold, slow_model: str
) -> None:
    harness.create_dm(
        "st", {"model": slow_model, "replicas": 2, "scheduling": {"nodeSelector": hold.selector}}
    )
    handle = await harness.start(harness.input_for("st"))
    await eventually(lambda: job_pod_bound(harness), 60, what="prefetch Pod bound")
    hold.engage()
    await async_assert_eventually(
        lambda: started_activity(handle, "start"), 60, what="start running"
    )
    await eventually(lambda: len(serving_pods(harness)) == 2, 30, what="2 Pods, Pending")
    assert not any(p["spec"].get("nodeName") for p in serving_pods(harness))
    outcome = await crash_and_recover(harness, handle, worker, after_restart=hold.release)
    assert await final_attempt(handle, "start") >= 2
    assert_revision_complete(harness, "st", outcome, replicas=2)


async def test_worker_killed_during_warmup_inspect(
    harness: RolloutHarness,
    worker: WorkerProcess,
    hold: NodeHold,
    slow_model: str,
    annotate_pods: dict[str, str],
) -> None:
    annotate_pods[SIM_PREFIX + "load-delay-seconds"] = "4"
    handle = await start_held(harness, hold, "wu", {"model": slow_model, "replicas": 2})
    await async_assert_eventually(
        lambda: started_activity(handle, "warmup_inspect"), 60, what="warmup_inspect running"
    )
    outcome = await crash_and_recover(harness, handle, worker)
    assert await final_attempt(handle, "warmup_inspect") >= 2
    assert_revision_complete(harness, "wu", outcome, replicas=2)


async def test_worker_killed_during_evaluate_resumes(
    harness: RolloutHarness,
    worker: WorkerProcess,
    hold: NodeHold,
    slow_model: str,
    annotate_pods: dict[str, str],
) -> None:
    """The retried evaluate attempt continues where the killed one stopped.

    Observable: the heartbeat details Temporal holds for the pending activity
    (``DescribeWorkflowExecution``). The killed attempt had reported
    ``candidate.next_case_index`` = k > 0 before the kill. The first heartbeat of the retried
    attempt is sent at once (the SDK throttles only later ones), after it read k back and
    before it runs a case: had it started over, that heartbeat would say 0 and stay visible
    for the ~4 s throttle window (0.8 x the 5 s heartbeat timeout) while the test polls every
    0.1 s. So: every heartbeat of attempt >= 2 the test sees says >= k, and the final figures
    equal those of one uninterrupted pass over the 40 cases (no case counted twice or skipped),
    though the cases ran over two replicas, two in flight each, and were answered out of order.
    """
    # Two replicas (cases spread over both, answered out of order, counted in order) at twice
    # the latency: the same 10 s pass, so the kill still lands mid-evaluation and the retried
    # attempt still runs long enough to be seen (heartbeats reach the server every ~4 s).
    annotate_pods[SIM_PREFIX + "latency-ms"] = str(2 * EVAL_LATENCY_MS)
    spec = {**evaluated_spec(harness, slow_model), "replicas": 2}
    handle = await start_held(harness, hold, "ev", spec)

    async def progressed() -> int:
        pa = await started_activity(handle, "evaluate")
        assert pa.attempt == 1, pa.attempt
        beat = await heartbeat(harness.client, pa)
        done = int((beat.get("candidate") or {}).get("next_case_index", 0))
        assert done >= 5, f"{done} cases reported"
        return done

    reported = await async_assert_eventually(progressed, 60, 0.1, what="evaluate made progress")
    assert reported < EVAL_CASES
    before = object_uids(harness)
    worker.kill()
    worker.start()

    resumed: list[int] = []
    while True:
        desc = await handle.describe()
        pending = [
            pa
            for pa in desc.raw_description.pending_activities
            if pa.activity_type.name == "evaluate"
        ]
        if not pending:
            break
        pa = pending[0]
        if (
            pa.attempt >= 2
            and pa.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            and pa.HasField("last_heartbeat_time")
            and pa.last_heartbeat_time.ToDatetime() >= pa.last_started_time.ToDatetime()
        ):
            beat = await heartbeat(harness.client, pa)
            resumed.append(int(beat["candidate"]["next_case_index"]))
        await asyncio.sleep(0.1)

    outcome = await asyncio.wait_for(handle.result(), 60)
    assert object_uids(harness) == before
    assert resumed, "no heartbeat of the retried attempt was seen"
    assert min(resumed) >= reported, (reported, resumed)
    assert await final_attempt(handle, "evaluate") >= 2
    assert_revision_complete(harness, "ev", outcome, replicas=2)
    evaluation_status = harness.status("ev")["evaluation"]
    assert evaluation_status["cases"] == EVAL_CASES
    cases = make_golden_set(EVAL_CASES, seed=7)
    assert evaluation_status["accuracy"] == f"{expected_accuracy(cases, EVAL_ACCURACY):.4f}"


async def test_temporal_restart_mid_rollout(
    harness: RolloutHarness,
    worker: WorkerProcess,
    hold: NodeHold,
    slow_model: str,
    local_env: LocalEnv,
    annotate_pods: dict[str, str],
) -> None:
    """The dev server stops and starts on the same SQLite file while evaluate is running."""
    annotate_pods[SIM_PREFIX + "latency-ms"] = str(EVAL_LATENCY_MS)
    handle = await start_held(harness, hold, "rs", evaluated_spec(harness, slow_model))

    async def evaluating() -> int:
        pa = await started_activity(handle, "evaluate")
        beat = await heartbeat(harness.client, pa)
        done = int((beat.get("candidate") or {}).get("next_case_index", -1))
        assert 0 <= done < EVAL_CASES // 2, f"{done} cases reported"
        return done + 1

    await async_assert_eventually(evaluating, 60, 0.1, what="evaluate running, early")
    await asyncio.to_thread(local_env.temporal.restart)
    assert worker.proc is not None
    if worker.proc.poll() is not None:  # the worker gave up on the server: start another
        worker.start()
    outcome = await result_through_restarts(handle, 120)
    assert_revision_complete(harness, "rs", outcome, replicas=1)
    assert harness.status("rs")["evaluation"]["cases"] == EVAL_CASES


def evaluated_spec(h: RolloutHarness, model: str) -> dict[str, Any]:
    h.golden_configmap("golden", golden_jsonl(EVAL_CASES))
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.50",
    }
    return {"model": model, "rollout": {"evaluation": evaluation}}


async def start_held(
    h: RolloutHarness, hold: NodeHold, name: str, spec: dict[str, Any]
) -> WorkflowHandle[Any, RolloutOutcome]:
    """Start a rollout whose serving Pods run only once the fault annotations are on them.

    The runtime simulator reads a Pod's annotations on its first request to the Pod's IP and
    caches them ~1 s; a Pod is probed well within a second of its creation, so without the hold
    its first loads and decisions may run before the fault is there. A Pending Pod has no IP
    yet: once it runs, the simulator's first look already finds the annotations.
    """
    replicas = int(spec.get("replicas", 1))
    h.create_dm(name, {**spec, "scheduling": {"nodeSelector": hold.selector}})
    handle = await h.start(h.input_for(name))
    await eventually(lambda: job_pod_bound(h), 60, what="prefetch Pod bound")
    hold.engage()
    await eventually(
        lambda: pods_annotated(h, replicas), 60, what=f"{replicas} Pods with fault annotations"
    )
    hold.release()
    return handle


# -- shared steps ---------------------------------------------------------------------------------
def object_uids(h: RolloutHarness) -> dict[str, str]:
    """UID of every Job, PVC and Deployment in the namespace, by ``kind/name``."""
    uids: dict[str, str] = {}
    for kind in ("job", "pvc", "deployment"):
        for item in json.loads(h.kubectl("get", kind, "-o", "json"))["items"]:
            uids[f"{kind}/{item['metadata']['name']}"] = item["metadata"]["uid"]
    return uids


async def crash_and_recover(
    h: RolloutHarness,
    handle: WorkflowHandle[Any, RolloutOutcome],
    worker: WorkerProcess,
    after_restart: Callable[[], None] | None = None,
) -> RolloutOutcome:
    """SIGKILL the worker mid-step, start a new one, wait for the outcome; the objects the
    killed attempt had created are the ones the rollout ends with (adopted, not re-created)."""
    before = object_uids(h)
    worker.kill()
    worker.start()
    if after_restart is not None:
        after_restart()
    outcome = await asyncio.wait_for(handle.result(), 120)
    after = object_uids(h)
    assert {k: after.get(k) for k in before} == before, (before, after)
    return outcome


def assert_revision_complete(
    h: RolloutHarness, dm: str, outcome: RolloutOutcome, replicas: int
) -> None:
    assert outcome.result == RolloutResult.PROMOTED, outcome
    assert outcome.revision is not None
    status = h.status(dm)
    assert status["phase"] == "Ready"
    assert status["stableRevision"]["hash"] == outcome.revision
    assert_one_of_each(h, dm, outcome.revision, replicas)

"""What a chaos cell watches while it runs: the rollout's progress, the revision objects, and
whether the stable keeps answering.

Each watcher polls in the background (``run()``, cancelled by the cell) and only records:
nothing here waits for a condition. Kubernetes reads use a client of their own with short
timeouts, so a stopped or silent API server costs a watcher a missed sample, not a stall.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from temporalio.client import WorkflowHandle

from decisionmodel.api import GROUP, PLURAL, VERSION
from decisionmodel.engine.render.labels import LABEL_NAME, LABEL_REVISION
from decisionmodel.rollout.contracts import RolloutProgress
from kube.client import Kube
from kube.timeouts import KubeTimeouts
from simulators.answers import make_golden_set
from workflows.rollout import RolloutWorkflow

# A missed sample is the answer during a fault: bound every read well below the poll rhythm.
WATCH_TIMEOUTS = KubeTimeouts(connect=2.0, read=5.0, connect_retries=0)
RUNTIME_PORT = 11435
# Kinds the rollout creates per revision (the Service is per DecisionModel).
REVISION_KINDS = ("Deployment", "Job", "PersistentVolumeClaim", "PodDisruptionBudget")
DUPLICATE_KINDS = ("Deployment", "Job", "PersistentVolumeClaim")


@dataclass(frozen=True)
class Change:
    at: float  # time.monotonic() when first seen
    phase: str
    step: str
    result: str | None


class Timeline:
    """The rollout's phase and step as its ``progress`` query answers, and its phase as the
    DecisionModel's status says (``saw_status``, fed by the Census); each change when first
    seen.

    The query needs Temporal and a worker, the status the API server: while one is down its
    source sees nothing, and a change made meanwhile shows when it is back.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.handle: WorkflowHandle[Any, Any] | None = None
        self.interval = interval
        self.changes: list[Change] = []
        self.status_changes: list[Change] = []
        self.errors: Counter[str] = Counter()
        self.last: RolloutProgress | None = None

    def attach(self, handle: WorkflowHandle[Any, Any]) -> None:
        self.handle = handle

    async def poll(self) -> RolloutProgress | None:
        if self.handle is None:
            return None
        try:
            progress: RolloutProgress = await asyncio.wait_for(
                self.handle.query(RolloutWorkflow.progress, rpc_timeout=timedelta(seconds=2)), 3
            )
        except Exception as e:  # Temporal down, no worker, query timed out: no sample
            self.errors[f"{type(e).__name__}: {str(e)[:80]}"] += 1
            return None
        self.last = progress
        result = progress.result.value if progress.result else None
        change = Change(time.monotonic(), progress.phase.value, progress.step, result)
        _record(self.changes, change)
        return progress

    def saw_status(self, phase: str) -> None:
        _record(self.status_changes, Change(time.monotonic(), phase, "(status)", None))

    @property
    def current(self) -> Change:
        return self.changes[-1] if self.changes else Change(0.0, "?", "?", None)

    async def run(self) -> None:
        while True:
            await self.poll()
            await asyncio.sleep(self.interval)

    def moves(self) -> list[Change]:
        """The changes that were moves of the rollout: every query change but the first sample
        (where the rollout was when watching began), and the status changes to a phase the
        query had not shown yet (the status often just catches up with the query)."""

        def news(c: Change) -> bool:
            return not any(q.phase == c.phase and q.at <= c.at for q in self.changes)

        status = [c for c in self.status_changes[1:] if news(c)]
        return sorted(self.changes[1:] + status, key=lambda c: c.at)

    def first_change_after(self, moment: float) -> Change | None:
        return next((c for c in self.moves() if c.at > moment), None)

    def moved_between(self, start: float, end: float) -> bool:
        change = self.first_change_after(start)
        return change is not None and change.at <= end

    def describe(self, origin: float) -> list[str]:
        both = sorted(self.changes + self.status_changes, key=lambda c: c.at)
        return [f"{c.at - origin:7.1f}s {c.phase}/{c.step} {c.result or ''}" for c in both]


def _record(changes: list[Change], change: Change) -> None:
    last = changes[-1] if changes else None
    if last is None or (last.phase, last.step, last.result) != (
        change.phase,
        change.step,
        change.result,
    ):
        changes.append(change)


@dataclass(frozen=True)
class RevisionObject:
    kind: str
    name: str
    revision: str
    deleting: bool


def revision_objects(kube: Kube, namespace: str, dm: str) -> list[RevisionObject]:
    found: list[RevisionObject] = []
    for kind in REVISION_KINDS:
        for obj in kube.list_labelled(kind, namespace, {LABEL_NAME: dm}):
            meta = obj["metadata"]
            revision = (meta.get("labels") or {}).get(LABEL_REVISION, "")
            found.append(
                RevisionObject(kind, meta["name"], revision, bool(meta.get("deletionTimestamp")))
            )
    return found


def dm_phase(kube: Kube, namespace: str, name: str) -> str:
    dm = kube.raw(kube.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name)
    return str((dm.get("status") or {}).get("phase") or "")


def duplicates(objects: list[RevisionObject]) -> list[str]:
    """``kind/revision`` with more than one live object: one revision, one of each."""
    counts = Counter((o.kind, o.revision) for o in objects if not o.deleting)
    return [f"{k}/{r} x{n}" for (k, r), n in counts.items() if n > 1 and k in DUPLICATE_KINDS]


def leftovers(objects: list[RevisionObject], keep: set[str], deleting: bool) -> list[str]:
    """Objects of revisions outside ``keep``: those nobody asked to delete (orphans), or
    those being deleted (``deleting``: a delete was issued, Kubernetes has not finished it,
    e.g. a store PVC held by its finalizer until garbage collection removes the old Pods)."""
    return [
        f"{o.kind}/{o.name}" for o in objects if o.revision not in keep and o.deleting == deleting
    ]


@dataclass
class Census:
    """Samples the DecisionModel's revision objects; remembers every duplicate ever seen."""

    kube: Kube
    namespace: str
    dm: str
    timeline: Timeline
    interval: float = 1.0
    seen_duplicates: set[str] = field(default_factory=set)
    samples: int = 0

    async def sample(self) -> list[RevisionObject] | None:
        try:
            objects = await asyncio.to_thread(revision_objects, self.kube, self.namespace, self.dm)
            phase = await asyncio.to_thread(dm_phase, self.kube, self.namespace, self.dm)
        except Exception:  # the API server is down or silent: no sample
            return None
        self.timeline.saw_status(phase)
        self.samples += 1
        self.seen_duplicates.update(duplicates(objects))
        return objects

    async def run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self.interval)


def _probe_body(model: str) -> dict[str, Any]:
    case = make_golden_set(1, seed=11)[0]
    return {"model": model, "state": case["state"], "questions": case["questions"]}


def _serving(kube: Kube, namespace: str, name: str) -> tuple[str, list[str]]:
    """The model the Service's revision serves and the IPs of its Pods ("", [] before the
    first promotion). The model comes from the status record of that revision: the stable,
    or, during a promotion, the previous or the candidate one."""
    svc = kube.get("Service", namespace, name)
    selector = ((svc or {}).get("spec") or {}).get("selector") or {}
    dm = kube.raw(kube.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name)
    status = dm.get("status") or {}
    records = [
        status.get(k) or {} for k in ("stableRevision", "previousRevision", "candidateRevision")
    ]
    revision = selector.get(LABEL_REVISION)
    model = next((str(r["model"]) for r in records if r.get("hash") == revision), "")
    if not model:
        return "", []
    ips = []
    for pod in kube.list_pods(namespace, selector):
        pod_status = pod.get("status") or {}
        if pod_status.get("podIP") and not pod["metadata"].get("deletionTimestamp"):
            ips.append(str(pod_status["podIP"]))
    return model, ips


@dataclass
class StableProbe:
    """``POST /v1/systemone`` to every Pod the DecisionModel's Service selects, as a client
    of the stable would (there is no kube-proxy here, so to the Pod IPs themselves).

    The Pods are re-read from the Service each round when the API answers; while it does not,
    the last ones known are probed (they keep running without the API server).
    """

    kube: Kube
    namespace: str
    dm: str  # the DecisionModel, and its Service
    interval: float = 0.5
    timeout: float = 10.0
    model: str = ""
    targets: list[str] = field(default_factory=list)
    ok: int = 0
    total: int = 0
    failures: list[str] = field(default_factory=list)

    async def refresh(self) -> None:
        try:
            model, ips = await asyncio.to_thread(_serving, self.kube, self.namespace, self.dm)
        except Exception:  # the API is down or silent: keep probing the Pods known so far
            return
        if ips:
            self.model, self.targets = model, ips

    async def probe(self, client: httpx.AsyncClient, ip: str) -> None:
        """One request, counted once it has an answer or an error (a probe the cell cancels
        at the end of the window is neither)."""
        url = f"http://{ip}:{RUNTIME_PORT}/v1/systemone"
        try:
            r = await client.post(url, json=_probe_body(self.model), timeout=self.timeout)
            if r.status_code == 200 and isinstance(r.json().get("answers"), dict):
                self.ok += 1
                self.total += 1
                return
            problem = f"{r.status_code} {r.text[:120]}"
        except httpx.HTTPError as e:
            problem = f"{type(e).__name__}: {e}"
        self.total += 1
        self.failures.append(f"{time.strftime('%H:%M:%S')} {ip}: {problem}")

    async def run(self) -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            while True:
                await self.refresh()
                for ip in self.targets:
                    await self.probe(client, ip)
                await asyncio.sleep(self.interval)

"""The lifecycle explorer's invariants (DESIGN.md "Testing lifecycles", issue 34 item 2).

Continuous ones are sampled every couple of seconds while the operations run. A state that may
be passing through (a promotion switches the Service a moment after it records the stable) is a
violation only when it holds longer than :data:`GRACE` while nothing was disturbed: no fault of
the environment and no fault of this lifecycle's own within that time ("within one reconcile":
the test controller re-inspects every 10 s). Two runs of one revision at once is a violation at
once. The final ones run once the faults are healed and the model has settled.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from explore_rig import DATASET_MARKER, DM, SECRET_MARKER, Lifecycle
from harness.argocd_health import health
from harness.kstatus import KStatusChecker
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from controller.temporal.rollouts import dm_query
from controller.temporal.worker_presence import PINNED, run_build
from decisionmodel.engine.render import labels as L
from decisionmodel.records.chain import StoredRecord, VerifiedRecord, verify_chain
from decisionmodel.vocabulary import Phase, Reason
from localenv.env import RUNTIME_PORT
from workflows.rollout import RolloutWorkflow
from workflows.search_attributes import DM_REVISION

GRACE = 25.0


@functools.cache
def kstatus() -> KStatusChecker:
    """One checker process for the whole explorer run (it answers one line per object)."""
    return KStatusChecker()


# A superseded run closes once its step has stopped (cleanup must not race a step still
# running): when that step was on a killed worker, after the step's heartbeat timeout (30 s),
# then its cleanup (explorer seed 3524).
OVERLAP_GRACE = 60.0
# A Pod deleted or scaled away is replaced, warmed and inspected before it answers again.
ANSWER_GRACE = 60.0
# After the API server restarts, kube-controller-manager's EndpointSlice controller retried
# "EndpointSlice informer cache is out of date" for 60-120 s before the Service's endpoints
# followed the Pods again (its log, seeds 3412 and 3414, at 8 lanes): the Kubernetes control
# plane catching up, which the endpoint invariants wait out.
ENDPOINTS_AFTER_APISERVER = 150.0
# A prefetch that cannot go on says why on Cached (explorer seed 10026: Caching for five minutes
# saying only Prefetching, the revision's store PVC held Terminating by a Pod). Downloads here
# take seconds; a Job retrying after a registry fault backs off up to a few minutes.
SILENT_WAIT_GRACE = 240.0
# One decision asked of the stable through one of the Service's ready endpoints (no content of
# the golden set: a plain question of the explorer's own).
QUESTION = {"q": {"type": "choice", "question": "Which team?", "criteria": ["billing", "tech"]}}
ROLLOUT_PHASES = frozenset(
    {Phase.PENDING, Phase.RESOLVING, Phase.CACHING, Phase.STARTING, Phase.EVALUATING}
) | {Phase.PROMOTING}
# Reconciling (kstatus) carries the phase it is in as its reason: the phases are words of the
# vocabulary too.
REASONS = frozenset(r.value for r in Reason) | frozenset(p.value for p in Phase)
PHASES = frozenset(p.value for p in Phase)


@dataclass
class Violation:
    invariant: str
    detail: str
    at: float

    def __str__(self) -> str:
        return f"[{self.at:7.1f}s] {self.invariant}: {self.detail}"


@dataclass
class Checker:
    life: Lifecycle
    started: float = field(default_factory=time.monotonic)
    violations: list[Violation] = field(default_factory=list)
    checks: int = 0
    _since: dict[str, float] = field(default_factory=dict)
    # Per revision: the most evaluations and cases its sequential test has shown.
    _tests: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The bad model served when the last spec was judged (what was shown, its revision hash):
    # the decision records say whether a gate judged it before it was promoted.
    bad_serving: tuple[str, str] | None = None

    def quiet_for(self) -> float:
        own = time.monotonic() - self.life.touched_at
        return min(own, self.life.faults.quiet_for())

    def flag(self, invariant: str, detail: str) -> None:
        self.violations.append(Violation(invariant, detail, time.monotonic() - self.started))

    def persisting(self, invariant: str, broken: bool, detail: str, grace: float = GRACE) -> None:
        """Flag ``invariant`` once it has been broken for ``grace`` in a quiet environment."""
        self.checks += 1
        if not broken or self.life.faults.active:
            self._since.pop(invariant, None)
            return
        first = self._since.setdefault(invariant, time.monotonic())
        late = time.monotonic() - first > grace and self.quiet_for() > grace
        if late and not any(v.invariant == invariant for v in self.violations):
            self.flag(invariant, detail)

    # -- continuous -----------------------------------------------------------------------------
    async def sample(self) -> None:
        if self.life.faults.active:
            return
        try:
            await self._runs_per_revision()
        except Exception:
            return
        # The reads below block: in a thread, so the other lifecycles' operations go on.
        await asyncio.to_thread(self._sample_objects)

    def _sample_objects(self) -> None:
        obj = self.life.dm()
        if obj is None:
            return
        self._reasons(obj)
        self._service(obj)
        self._ledger(obj)

    async def _runs_per_revision(self) -> None:
        query = f"{dm_query(self.life.namespace, DM)} AND ExecutionStatus = 'Running'"
        revisions: Counter[str] = Counter()
        async for wf in self.life.client.list_workflows(query):
            if wf.workflow_type == RolloutWorkflow.__name__:
                revisions[wf.typed_search_attributes.get(DM_REVISION) or wf.id] += 1
        self.checks += 1
        for revision, n in revisions.items():
            if n > 1:
                self.flag("one run per revision", f"{n} runs of {revision} at once")
        self.persisting(
            "one run per DecisionModel",
            len(revisions) > 1,
            f"runs of {sorted(revisions)} at once beyond {OVERLAP_GRACE:.0f}s",
            OVERLAP_GRACE,
        )

    def _reasons(self, obj: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        phase = status.get("phase")
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        ready = conditions.get("Ready") or {}
        bad = [
            f"{t}: reason {c.get('reason')!r}"
            for t, c in conditions.items()
            if c.get("reason") not in REASONS
            or (not c.get("message") and c.get("reason") != Reason.AS_EXPECTED)
        ]
        self.persisting("conditions carry a reason", bool(bad), "; ".join(bad))
        cached = conditions.get("Cached") or {}
        self.persisting(
            "a long prefetch says why",
            phase == Phase.CACHING and cached.get("reason") in (None, Reason.PREFETCHING),
            f"Caching, Cached {cached.get('reason')!r}: {str(cached.get('message'))[:160]}",
            SILENT_WAIT_GRACE,
        )
        self.persisting(
            "phase has a Ready condition",
            phase not in PHASES or not ready,
            f"phase {phase!r}, Ready {ready}",
        )
        # kubectl wait --for=condition=Ready: Ready at the current generation means the spec
        # applied serves (issue 34), unless RollbackTo says an undo serves another on purpose.
        stable = (status.get("stableRevision") or {}).get("model")
        asked = (obj.get("spec") or {}).get("model")
        claims = ready.get("status") == "True" and ready.get("observedGeneration") == (
            obj["metadata"].get("generation")
        )
        rollback = (conditions.get("RollbackTo") or {}).get("status") == "True"
        self.persisting(
            "Ready at the current generation means the spec serves",
            claims and stable != asked and not rollback,
            f"Ready True at generation {ready.get('observedGeneration')}, spec {asked}, "
            f"stable {stable}",
        )
        # Argo CD's health (deploy/argocd, run by its Lua) and kstatus (Flux, Helm 4 --wait:
        # the library itself, hack/kstatus) say Healthy / Current on the same terms.
        argo = health(obj)
        self.persisting(
            "Argo CD Healthy means the spec serves",
            argo.status == "Healthy" and stable != asked and not rollback,
            f"Healthy ({argo.message[:120]}) with spec {asked}, stable {stable}",
        )
        found = kstatus().check(obj)
        self.persisting(
            "kstatus Current means the spec serves",
            found.status == "Current" and stable != asked and not rollback,
            f"Current ({found.message[:120]}) with spec {asked}, stable {stable}",
        )

    def _ledger(self, obj: dict[str, Any]) -> None:
        """A revision's sequential test goes on across its evaluations (issue 35): a later
        evaluation never shows fewer counted cases, and with the dataset and minAccuracy the
        explorer never changes, it never restarts; a test counts at most the dataset."""
        for entry in (obj.get("status") or {}).get("evaluationLedger") or []:
            self.checks += 1
            revision, runs, cases = entry["revision"], entry["evaluations"], entry["cases"]
            if entry.get("restarted"):
                self._once("a sequential test goes on", f"{revision}: {entry['restarted']}")
            counted = [g.get("cases", 0) for g in entry.get("gates") or []]
            if cases > entry["datasetCases"] or entry["thisEvaluation"] > cases:
                self._once("a sequential test counts each case once", f"{revision}: {entry}")
            if any(n > cases for n in counted):  # a paired gate reads only the test's cases
                self._once("a sequential test counts each case once", f"{revision}: {entry}")
            seen_runs, seen_cases = self._tests.get(revision, (0, 0))
            if runs < seen_runs:  # left the ledger (8 revisions) and begun again
                self._tests[revision] = (runs, cases)
                continue
            if runs > seen_runs and cases < seen_cases:
                self._once(
                    "a sequential test goes on",
                    f"{revision}: evaluation {runs} counts {cases} cases, {seen_cases} before",
                )
            self._tests[revision] = (runs, max(cases, seen_cases))

    def _once(self, invariant: str, detail: str) -> None:
        if not any(v.invariant == invariant and v.detail == detail for v in self.violations):
            self.flag(invariant, detail)

    def _service(self, obj: dict[str, Any]) -> None:
        if self.life.foreign_service:
            return
        stable = ((obj.get("status") or {}).get("stableRevision") or {}).get("hash")
        service = self.life.get("v1", "services", L.service_name(DM))
        if not stable or service is None:
            return
        selected = (service["spec"].get("selector") or {}).get(L.LABEL_REVISION)
        self.persisting(
            "the Service selects the stable revision",
            selected != stable,
            f"selector revision {selected}, status.stableRevision {stable}",
        )
        slices = self._endpoint_slices()
        strays = self._endpoint_strays(slices, stable)
        faults = self.life.faults
        recent = faults.quiet_for() < ENDPOINTS_AFTER_APISERVER
        restarted = faults.last == "apiserver_pause" and recent
        self.persisting(
            "the Service reaches only model-ready Pods of the stable",
            bool(strays),
            f"ready endpoints on {strays}",
            ENDPOINTS_AFTER_APISERVER if restarted else GRACE,
        )
        # A runtime fault in force targets the stable too; so does an API-key Secret the
        # controller may not read (unlabelled): a replaced stable Pod cannot be warmed up and
        # inspected without the key, and the DecisionModel says Degraded/SecretNotAllowed
        # naming the fix (explorer seed 10019).
        if self.life.runtime_fault is None and not self.life.secret_unlabelled:
            model = str(((obj.get("status") or {}).get("stableRevision") or {}).get("model"))
            said = self._stable_answers(slices, model)
            grace = ENDPOINTS_AFTER_APISERVER if restarted else ANSWER_GRACE
            self.persisting("the stable answers", bool(said), said, grace)

    def _stable_pods(self, model: str) -> str:
        """What the stable's Pods show (seed 4451 left no way to tell a Pod that never came
        from one whose gate stayed False): phase, node, gate, and the gate's reason."""
        shown = []
        for pod in self.life.items("v1", "pods", f"{L.LABEL_NAME}={DM}"):
            meta, status = pod["metadata"], pod.get("status") or {}
            gates = {c["type"]: c for c in status.get("conditions") or []}
            gate = gates.get("decisionmodel.io/model-ready") or {}
            shown.append(
                f"{meta['name']} rev {(meta.get('labels') or {}).get(L.LABEL_REVISION)} "
                f"{status.get('phase')} node {(pod.get('spec') or {}).get('nodeName')} gate "
                f"{gate.get('status')}/{gate.get('reason')}"
                + (" deleting" if meta.get("deletionTimestamp") else "")
            )
        return "; ".join(shown) or f"none (model {model})"

    def _endpoint_slices(self) -> list[dict[str, Any]]:
        selector = f"kubernetes.io/service-name={L.service_name(DM)}"
        return self.life.items("discovery.k8s.io/v1", "endpointslices", selector)

    def _stable_answers(self, slices: list[dict[str, Any]], model: str) -> str:
        """Empty when a ready endpoint of the Service answers a decision; else what went wrong
        (the Service is what the model's clients call: DESIGN.md, the stable answers whenever
        no fault targets it)."""
        addresses = [
            a
            for s in slices
            for ep in s.get("endpoints") or []
            if (ep.get("conditions") or {}).get("ready")
            for a in ep.get("addresses") or []
        ]
        if not addresses:
            return f"the Service has no ready endpoint; stable Pods: {self._stable_pods(model)}"
        headers = {"Authorization": f"Bearer {SECRET_MARKER}"}
        body = {"model": model, "state": "a plain request", "questions": QUESTION}
        errors = []
        for address in addresses:
            try:
                with httpx.Client(trust_env=False, timeout=5) as c:
                    r = c.post(
                        f"http://{address}:{RUNTIME_PORT}/v1/systemone", json=body, headers=headers
                    )
            except httpx.HTTPError as e:
                errors.append(f"{address}: {type(e).__name__}")
                continue
            if r.status_code == 200:
                return ""
            errors.append(f"{address}: {r.status_code} {r.text[:80]}")
        return "no ready endpoint answers: " + "; ".join(errors)

    def _endpoint_strays(self, slices: list[dict[str, Any]], stable: str) -> list[str]:
        pods = {p["metadata"]["name"]: p for p in self.life.items("v1", "pods")}
        strays = []
        for s in slices:
            for ep in s.get("endpoints") or []:
                name = (ep.get("targetRef") or {}).get("name", "")
                if not (ep.get("conditions") or {}).get("ready"):
                    continue
                pod = pods.get(name)
                if pod is None or not _gated(pod, stable):
                    strays.append(name)
        return strays

    # -- final ----------------------------------------------------------------------------------
    def objects_left(self, stable: str) -> list[str]:
        """Revision objects of any revision but the stable one."""
        left = []
        kinds = {
            "deployments": "apps/v1",
            "persistentvolumeclaims": "v1",
            "jobs": "batch/v1",
            "pods": "v1",
        }
        for kind, api in kinds.items():
            for item in self.life.items(api, kind, f"{L.LABEL_NAME}={DM}"):
                rev = (item["metadata"].get("labels") or {}).get(L.LABEL_REVISION)
                if rev and rev != stable and not item["metadata"].get("deletionTimestamp"):
                    # Its owner and phase: seed 4435 left a Pod whose story could not be told.
                    owners = [
                        f"{o.get('kind')}/{o.get('name')}"
                        for o in item["metadata"].get("ownerReferences") or []
                    ]
                    phase = (item.get("status") or {}).get("phase")
                    left.append(
                        f"{kind}/{item['metadata']['name']} (owner {','.join(owners) or 'none'}"
                        + (f", {phase}" if phase else "")
                        + ")"
                    )
        return left

    def decision_records(self, obj: dict[str, Any]) -> None:
        """Issue 38: the DecisionModel's signed records verify (signatures, subjects, the chain
        up to the head its status names), the revision it serves was promoted with a record,
        and no record carries a secret or dataset content."""
        life = self.life
        uid = obj["metadata"]["uid"]
        out = life.cluster.kubectl(
            "-n", life.records_namespace, "get", "configmaps", "-o", "json",
            "-l", f"decisionmodel.io/decision-record=true,decisionmodel.io/dm-uid={uid}",
        ).stdout  # fmt: skip
        stored = [
            StoredRecord(i["metadata"]["name"], i["data"]["envelope.json"].encode())
            for i in json.loads(out)["items"]
        ]
        status = obj.get("status") or {}
        head = status.get("decisionRecord")
        report = verify_chain(
            stored,
            life.records_key.public_key(),
            (int(head["sequence"]), str(head["digest"])) if head else None,
        )
        self.checks += 1
        if report.problems:
            self.flag("the decision records verify", "; ".join(report.problems)[:400])
        promoted = {
            r.predicate.revision.hash for r in report.records if r.predicate.decision == "Promote"
        }
        stable = (status.get("stableRevision") or {}).get("hash")
        self.checks += 1
        if stable and stable not in promoted:
            self.flag(
                "every promotion has a signed record",
                f"stable {stable} has none among {len(report.records)} records",
            )
        for r in stored:
            self._no_marker(f"decision record {r.name}", r.envelope.decode())
        self._bad_promotion(report.records)

    def _bad_promotion(self, records: list[VerifiedRecord]) -> None:
        """The bad model serves: its last promotion must have been ungated (no evaluation)."""
        if self.bad_serving is None:
            return
        shown, hashed = self.bad_serving
        promotions = [
            r.predicate
            for r in records
            if r.predicate.decision == "Promote" and r.predicate.revision.hash == hashed
        ]
        self.checks += 1
        if not promotions or promotions[-1].evaluation is not None:
            gated = "a gate judged its promotion" if promotions else "no promotion record"
            self.flag("a failing candidate never serves", f"{gated}: {shown}")

    async def histories(self) -> list[WorkflowHistory]:
        found = []
        async for wf in self.life.client.list_workflows(dm_query(self.life.namespace, DM)):
            if wf.workflow_type != RolloutWorkflow.__name__:
                continue
            handle = self.life.client.get_workflow_handle(wf.id, run_id=wf.run_id)
            found.append(await handle.fetch_history())
        return found

    async def no_secrets_and_replay(self) -> int:
        histories = await self.histories()
        replayer = Replayer(workflows=[RolloutWorkflow], data_converter=pydantic_data_converter)
        for history in histories:
            text = history.to_json()
            self._no_marker(f"history {history.workflow_id}", text)
            try:
                await replayer.replay_workflow(history)
            except Exception as e:
                self.flag("every history replays", f"{history.workflow_id}: {e!r}"[:300])
        events = await asyncio.to_thread(
            self.life.cluster.kubectl, "-n", self.life.namespace, "get", "events", "-o", "json"
        )
        self._no_marker("Events", events.stdout)
        self._no_marker("status", json.dumps((self.life.dm() or {}).get("status")))
        # Every build's worker logs in a folder of its own (b1, b2, b1-draining, ...).
        for log in sorted(self.life.logs.rglob("*.log")):
            where = f"log {log.relative_to(self.life.logs)}"
            self._no_marker(where, log.read_text(errors="replace"))
        return len(histories)

    def _no_marker(self, where: str, text: str) -> None:
        self.checks += 1
        for marker in (SECRET_MARKER, DATASET_MARKER):
            if marker in text:
                self.flag("no secret or dataset content", f"{marker[:8]}… in {where}")

    async def unserved_pins(self) -> list[str]:
        """Open runs pinned to a build no worker of the lifecycle runs: stranded (issue 34)."""
        served = self.life.served_builds()
        query = f"{dm_query(self.life.namespace, DM)} AND ExecutionStatus = 'Running'"
        stranded = []
        async for wf in self.life.client.list_workflows(query):
            handle = self.life.client.get_workflow_handle(wf.id, run_id=wf.run_id)
            described = await handle.describe()
            build = run_build(described.raw_description.workflow_execution_info)
            if build.behavior == PINNED and build.build_id not in served:
                stranded.append(f"{wf.id} pinned to {build.build_id} (served: {sorted(served)})")
        return stranded

    async def running_runs(self) -> int:
        query = f"{dm_query(self.life.namespace, DM)} AND ExecutionStatus = 'Running'"
        return len(
            [
                wf
                async for wf in self.life.client.list_workflows(query)
                if wf.status == WorkflowExecutionStatus.RUNNING
            ]
        )


def _gated(pod: dict[str, Any], stable: str) -> bool:
    labels = pod["metadata"].get("labels") or {}
    if labels.get(L.LABEL_REVISION) != stable:
        return False
    conditions = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}
    return conditions.get(L.READINESS_GATE) == "True"

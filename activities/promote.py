"""promote: make the candidate the stable revision and move the traffic to it.

The order is the reference's (REFERENCE "Failure, retry, promotion") and is what makes a crash
at any point safe, since the activity is simply run again:

0. Re-check the policy against the live DecisionModel (``decisionmodel.rollout.policy_check``): the
   rollout's evaluation, gates and promotion mode, and the approval Manual requires; a
   mismatch is PolicyMismatch, permanent. Then re-inspect the candidate's Pods.
1. Refuse a foreign Service ``<dm>`` (ResourceConflict): nothing has changed yet. Refused
   non-retryable, so the workflow learns at once that nothing is recorded: it leaves the
   commitment (an abort or a newer revision may stop it again) and runs this activity with
   ``await_guards``, which is retried while the Service holds and shows it on Promoted
   (seed 001: "rename or remove the conflicting object, then the next reconcile proceeds");
   then it promotes again.
2. Persist the promotion in status first: stableRevision = candidate, previousRevision = the
   old stable, lastPromotionTime, Promoted=True, candidateRevision cleared, phase Ready. From
   here on the candidate is the stable, so the controller keeps its objects and renders them
   from status, and nothing deletes what is about to receive traffic.
3. Ensure the PDB ``<dm>-<rev>`` when replicas > 1, before any traffic depends on the Pods.
4. Create the Service, or switch its selector to the candidate.

Running it twice leaves the same state: the status write keeps its times when nothing changed,
the PDB is adopted, and a Service that already selects the candidate is left alone. The
previous revision is deleted by the workflow after the grace (delete_revision), never here.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

from temporalio import activity

from activities import step_status
from activities.pod_inspect import inspect_pod
from activities.policy import read_live_policy
from activities.status import stamped
from activities.step_status import enter_step, writes_step_status
from activities.typed_errors import show_guards, typed_errors
from decisionmodel.engine.render import render_pdb, render_service
from decisionmodel.engine.render.labels import LABEL_REVISION, selector_labels, service_name
from decisionmodel.errors import PolicyMismatch, ProbeError, ResourceConflict
from decisionmodel.rollout import render_params
from decisionmodel.rollout.contracts import (
    CHECK_CANDIDATE,
    PROMOTE,
    CandidateReadiness,
    ConditionUpdate,
    Phase,
    PromoteInput,
    PromoteResult,
    StatusUpdate,
)
from decisionmodel.rollout.policy_check import check_promotion
from decisionmodel.rollout.promote_recheck import Round, judge
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason
from kube.client import Kube
from kube.errors import Conflict
from kube.pod_gate import (
    gate_event,
    gate_reason,
    is_model_ready,
    is_terminating,
    set_gate,
    state_from_verdict,
)
from kube.rollout_status import show_guard, write_status
from kube.secrets import SecretReader

# An attempt of the re-check waits this long for Pods that do not answer, then leaves the rest
# of the window to the next attempt (the activity's start-to-close is 60 s).
RECHECK_ATTEMPT_SECONDS = 35.0
RECHECK_PAUSE_SECONDS = 5.0


class UnansweredSince(NamedTuple):
    """The heartbeat of a re-check waiting for Pods: when they first did not answer (epoch
    seconds), for the next attempt to go on counting from."""

    unanswered_since: float


def _unanswered_since() -> float | None:
    details = activity.info().heartbeat_details
    if details and isinstance(details[0], (list, tuple)) and details[0]:
        value = details[0][0]
        return float(value) if isinstance(value, (int, float)) else None
    return None


def _not_ready_why(pod: dict[str, Any]) -> str:
    """Why a candidate Pod is not model-ready, as its gate says (or that it has none yet)."""
    reason = gate_reason(pod)
    if reason is None:
        return "starting, not warmed up and inspected yet"
    return f"readiness gate {reason}"


def selected_revision(service: dict[str, Any] | None) -> str | None:
    if service is None:
        return None
    selector = (service.get("spec") or {}).get("selector") or {}
    revision = selector.get(LABEL_REVISION)
    return str(revision) if revision else None


class PromoteActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings) -> None:
        self.kube = kube
        self.settings = settings
        self.secrets = SecretReader(kube)

    @activity.defn(name=PROMOTE)
    @writes_step_status(step_status.promoted, enter=False)
    async def promote(self, inp: PromoteInput) -> PromoteResult:
        """Record → PDB → Service (see the module docstring for why in this order). Returns
        the revision the Service selected before (else the old stable), for the workflow to
        delete after the grace; None when there is nothing to delete."""
        async with typed_errors(show_guards(self.kube, inp.dm, ConditionType.PROMOTED, inp.status)):
            if inp.await_guards:
                return await self._await_guards(inp)
            live = await read_live_policy(self.kube, inp.dm)
            if live.stable != inp.candidate.hash:
                # Phase Promoting, unless an earlier attempt already recorded it as Ready.
                await enter_step(self.kube, inp.status)
            if inp.switch_back:
                self._check_switch_back(inp, live.stable, live.previous)
            elif live.stable != inp.candidate.hash:
                # Not recorded yet: the policy and the approval must be the live spec's. Once
                # recorded (a retried attempt) the promotion is finished, never undone.
                check_promotion(inp, live.policy, live.stable)
            if inp.model and live.stable != inp.candidate.hash:
                # Only before anything is recorded: a later attempt may find the candidate
                # already recorded as the stable, which must then be finished, not undone.
                await self._recheck(inp)
            dm, candidate = inp.dm, inp.candidate.hash
            name = service_name(dm.name)
            service = await Kube.run(self.kube.get, "Service", dm.namespace, name)
            if service is not None:
                # Final for this attempt only before anything is recorded (see step 1).
                recorded = live.stable == candidate or inp.switch_back
                self._refuse_foreign(service, dm.uid, before_record=not recorded)
            before = selected_revision(service)
            old_stable = inp.stable.hash if inp.stable else None
            previous = next((r for r in (before, old_stable) if r and r != candidate), None)

            await self._record_stable(inp, old_stable)
            activity.heartbeat("status recorded")

            if inp.replicas > 1:
                pdb = render_pdb(render_params.revision_params(dm, candidate))
                await self.kube.ensure_owned(
                    pdb, dm.uid, self.settings.poll_interval_seconds, activity.heartbeat
                )

            await self._switch_service(inp, service)
            return PromoteResult(previous=previous)

    async def _record_stable(self, inp: PromoteInput, old_stable: str | None) -> None:
        """Step 1: status names the candidate the stable (Ready, Promoted), the one it
        replaces as the previous revision."""
        candidate = inp.candidate.hash
        await write_status(
            self.kube,
            stamped(
                StatusUpdate(
                    dm=inp.dm,
                    phase=Phase.READY,
                    stable=inp.candidate,
                    previous_revision=old_stable if old_stable != candidate else None,
                    clear_candidate=True,
                    promoted=True,
                    conditions=[
                        ConditionUpdate(
                            type=ConditionType.PROMOTED.value,
                            status=ConditionStatus.TRUE,
                            reason=Reason.PROMOTED.value,
                            message=f"revision {candidate} is the stable revision",
                        )
                    ],
                )
            ),
        )

    @activity.defn(name=CHECK_CANDIDATE)
    async def check_candidate(self, inp: PromoteInput) -> CandidateReadiness:
        """An approval's check of the held candidate (the approve update, issue 34): its
        model-ready Pods are inspected again as the re-check before promotion does (a lost model
        flips the gate), and a Pod that is not model-ready or does not answer counts against
        it, so an approval is refused, not turned into a rollback by that re-check."""
        async with typed_errors():
            api_key = await self.secrets.api_key(inp.dm.namespace, inp.api_key)
            seen = await self._inspect_round(inp, api_key)
            pods = await Kube.run(
                self.kube.list_revision_pods, inp.dm.namespace, inp.dm.name, inp.candidate.hash
            )
            judged = [*seen.lost, *seen.unanswered]
            said = {line.split(":", 1)[0] for line in judged}
            waiting = [
                f"{p['metadata']['name']}: {_not_ready_why(p)}"
                for p in pods
                if not is_terminating(p)
                and not is_model_ready(p)
                and p["metadata"]["name"] not in said
            ]
            return CandidateReadiness(
                ready=seen.ready, desired=inp.replicas, not_ready=[*judged, *waiting]
            )

    async def _await_guards(self, inp: PromoteInput) -> PromoteResult:
        """``await_guards``: return once no foreign Service of the DecisionModel's name holds
        the promotion; a transient ResourceConflict (shown on Promoted) while one does. Reads
        the DecisionModel first: one deleted meanwhile ends the wait (DecisionModelGone)."""
        await read_live_policy(self.kube, inp.dm)
        name = service_name(inp.dm.name)
        service = await Kube.run(self.kube.get, "Service", inp.dm.namespace, name)
        if service is not None:
            self._refuse_foreign(service, inp.dm.uid, before_record=False)
        return PromoteResult(previous=None)

    async def _recheck(self, inp: PromoteInput) -> None:
        """Inspect the candidate's model-ready Pods again (``/api/ps``): a Pod that lost its
        model, its pin, or serves another digest loses its gate, and without ``replicas`` of
        them left the promotion is refused (the candidate is rolled back; the stable serves).
        Pods that do not answer are waited for, shown on Promoted, up to the probe-error window
        (decisionmodel.rollout.promote_recheck); the wait goes on in the next attempt when this
        one has used its share of the activity's timeout."""
        dm, record = inp.dm, inp.candidate
        api_key = await self.secrets.api_key(dm.namespace, inp.api_key)
        window = inp.probe_error_window_seconds
        began, since, shown = time.monotonic(), _unanswered_since(), False
        while True:
            seen = await self._inspect_round(inp, api_key)
            now = time.time()
            if seen.unanswered and since is None:
                since = now
                activity.heartbeat(UnansweredSince(since))
            waited = now - since if since is not None else 0.0
            found = judge(seen, inp.replicas, record.hash, waited, window)
            if found.outcome == "pass":
                return
            if found.outcome == "refuse":
                raise ProbeError(found.message, permanent=True)
            if not shown:
                first = activity.info().attempt == 1
                await show_guard(
                    self.kube, dm, ConditionType.PROMOTED, Reason.PROBE_ERROR, found.message, first
                )
                shown = True
            if time.monotonic() - began > RECHECK_ATTEMPT_SECONDS:
                # Retried (ProbeError is not permanent here): the next attempt reads ``since``
                # from this one's heartbeat and goes on waiting.
                raise ProbeError(found.message)
            activity.heartbeat(UnansweredSince(since or now))
            await asyncio.sleep(RECHECK_PAUSE_SECONDS)

    async def _inspect_round(self, inp: PromoteInput, api_key: str | None) -> Round:
        dm, record = inp.dm, inp.candidate
        pods = await Kube.run(self.kube.list_revision_pods, dm.namespace, dm.name, record.hash)
        serving = [p for p in pods if is_model_ready(p) and not is_terminating(p)]
        registry = self.settings.ollaya_registry
        # Together: a Pod that does not answer costs the round its timeout once, not per Pod.
        verdicts = await asyncio.gather(
            *(inspect_pod(pod, inp.model, record, api_key, registry) for pod in serving)
        )
        ready, unanswered, lost = 0, [], []
        for pod, found in zip(serving, verdicts, strict=True):
            said = f"{pod['metadata']['name']}: {found.reason} ({found.message[:200]})"
            if found.ready:
                ready += 1
            elif found.unanswered:
                unanswered.append(said)  # no verdict on the Pod: its gate is left as it is
            else:
                lost.append(said)
                if await set_gate(self.kube, pod, state_from_verdict(found)):
                    await gate_event(self.kube, dm, pod, found)
        return Round(ready, unanswered, lost)

    @staticmethod
    def _check_switch_back(inp: PromoteInput, stable: str | None, previous: str | None) -> None:
        """Only back to the revision that served before, and only from the one promoted after
        it; an attempt retried after the switch finds it done (stable is the candidate)."""
        candidate, watched = inp.candidate.hash, inp.stable.hash if inp.stable else None
        if stable == candidate or (stable == watched and previous == candidate):
            return
        raise PolicyMismatch(
            f"switch back to revision {candidate} refused: status says stable {stable}, "
            f"previous {previous}; only the revision that served before the watched one may "
            "come back (retry the rollout with decisionmodel.io/retry)"
        )

    @staticmethod
    def _refuse_foreign(service: dict[str, Any], uid: str, *, before_record: bool) -> None:
        """Promoting would mean taking over a Service someone else runs: refused. Before the
        promotion is recorded the refusal is final for this activity (the workflow then waits
        for the fix with ``await_guards``); after (a Service created between the read and the
        create), and while awaiting the fix, it is retried until the Service is gone."""
        if Kube.controller_uid(service) != uid:
            meta = service["metadata"]
            raise ResourceConflict(
                f"Service {meta['namespace']}/{meta['name']} exists and is not owned by this "
                "DecisionModel; dmrollout never modifies a foreign object: rename or remove "
                "it, and the promotion goes on by itself (the stable, if any, keeps serving)",
                permanent=before_record,
            )

    async def _switch_service(self, inp: PromoteInput, service: dict[str, Any] | None) -> None:
        dm, candidate = inp.dm, inp.candidate.hash
        if service is None:
            rendered = render_service(render_params.service_params(dm, candidate))
            # Adopts one created in between (a concurrent retry); a foreign one is refused.
            service = await self.kube.ensure_owned(
                rendered, dm.uid, self.settings.poll_interval_seconds, activity.heartbeat
            )
            self._refuse_foreign(service, dm.uid, before_record=False)
        wanted = selector_labels(dm.name, candidate)
        selector = (service.get("spec") or {}).get("selector") or {}
        if selector == wanted:
            return
        meta = service["metadata"]
        # Replace the whole selector (a merge patch would keep stray keys). The resourceVersion
        # the ownership check saw goes into the patched object: the API server answers 409
        # if the Service changed since.
        patch = [
            {
                "op": "replace",
                "path": "/metadata/resourceVersion",
                "value": meta["resourceVersion"],
            },
            {"op": "replace", "path": "/spec/selector", "value": wanted},
        ]
        try:
            await Kube.run(
                self.kube.core.patch_namespaced_service,
                meta["name"],
                meta["namespace"],
                patch,
                _content_type="application/json-patch+json",
            )
        except Conflict:
            # Changed since it was read: the retry re-reads and re-checks ownership.
            raise RuntimeError(
                f"Service {meta['name']} changed while switching it; retrying"
            ) from None

"""prefetch: the revision's store PVC and the Job that pulls the model into it and verifies
the manifest digest; wait for the Job and classify its failure (REFERENCE "Objects",
seed 001 "Prefetch failures: transient vs permanent").

Transient failures (exit 1: registry unreachable, 5xx, disk) are retried by the Job itself
under backoffLimit within activeDeadlineSeconds; this activity only watches. Permanent ones end
the Job at once through its podFailurePolicy and end the activity with a non-retryable error:

| prefetch container | Job condition | error |
| --- | --- | --- |
| exit 3 | Failed, PodFailurePolicy | ModelNotFound |
| exit 4 (digest pinned) | Failed, PodFailurePolicy | DigestMismatch |
| exit 5 (the tag moved) | Failed, PodFailurePolicy | DigestMismatch, "tag moved: …" |
| anything else | Failed, BackoffLimitExceeded / DeadlineExceeded | PrefetchFailed |

The termination message quoted in the error is scrubbed first (``decisionmodel.engine.scrub``): the
last line of ``ollaya pull``'s log is not ours, and may echo a URL with credentials or a token.

A failed Job is kept: a retried activity adopts it and reports the same classification
instead of pulling again. A completed Job is kept too (deleted with its revision), so a retry
after a lost result returns at once.
"""

from __future__ import annotations

import re
from typing import Any

from temporalio import activity

from activities import step_status
from activities.held_pods import HeldPods
from activities.step_status import writes_step_status
from activities.store_settling import StoreSettling
from activities.typed_errors import show_guards, typed_errors
from decisionmodel.engine.render import render_prefetch_job, render_store_pvc
from decisionmodel.engine.render.prefetch_job import (
    CONTAINER_NAME,
    EXIT_DIGEST_MISMATCH,
    EXIT_MODEL_NOT_FOUND,
    EXIT_TAG_MOVED,
    PERMANENT_EXIT_CODES,
)
from decisionmodel.engine.scrub import scrub_line
from decisionmodel.errors import DigestMismatch, DmrolloutError, ModelNotFound, PrefetchFailed
from decisionmodel.rollout import render_params
from decisionmodel.rollout.contracts import PREFETCH, DMRef, PrefetchResult, RevisionObjectsInput
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import (
    JOB_FAILED,
    JOB_FAILURE_TARGET,
    ConditionStatus,
    ConditionType,
    Phase,
    Reason,
)
from kube.client import Kube
from kube.secrets import SecretCapability, SecretReader
from kube.wait import wait_until
from kube.watch import source

# Set by the Job controller on every Pod of a Job: the Job's UID, so a Pod of an older Job of
# the same name is never read.
JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
# "Container prefetch for pod ns/x failed with exit code 3 matching FailJob rule at index 0":
# the Job controller's message, the fallback when the failed Pod is already gone.
_EXIT_CODE_IN_MESSAGE = re.compile(r"exit code (\d+)")


def _condition(job: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == ConditionStatus.TRUE:
            return dict(cond)
    return None


def job_counts(job: dict[str, Any]) -> dict[str, int]:
    status = job.get("status") or {}
    return {k: int(status.get(k) or 0) for k in ("active", "ready", "succeeded", "failed")}


def job_failure(job: dict[str, Any]) -> dict[str, Any] | None:
    """The condition that says the Job has failed for good. FailureTarget comes first (the
    controller sets Failed once the Pods have terminated); either is final."""
    return _condition(job, JOB_FAILED) or _condition(job, JOB_FAILURE_TARGET)


def _terminated(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != CONTAINER_NAME:
            continue
        for state in (cs.get("state"), cs.get("lastState")):
            terminated = (state or {}).get("terminated")
            if terminated:
                return dict(terminated)
    return None


def last_termination(pods: list[dict[str, Any]]) -> tuple[int | None, str]:
    """Exit code and first message line of the prefetch container that failed last."""
    failed = [t for t in (_terminated(p) for p in pods) if t is not None and t.get("exitCode") != 0]
    if not failed:
        return None, ""
    last = max(failed, key=lambda t: str(t.get("finishedAt") or ""))
    lines = str(last.get("message") or "").strip().splitlines()
    return int(last["exitCode"]), lines[0].strip() if lines else ""


def classify_failure(
    job: dict[str, Any], failure: dict[str, Any], pods: list[dict[str, Any]]
) -> DmrolloutError:
    """The typed error of a failed prefetch Job: the failed container's exit code decides,
    its termination message (``<Reason>: <detail>``, never a secret) explains."""
    name = job["metadata"]["name"]
    code, raw = last_termination(pods)
    job_message = str(failure.get("message") or "")
    if code is None and failure.get("reason") == "PodFailurePolicy":
        found = _EXIT_CODE_IN_MESSAGE.search(job_message)
        code = int(found.group(1)) if found else None
    # Lines dmrollout's prefetch script writes (exit 3-5) keep their digests; anything else
    # may be the last line of `ollaya pull`'s log, which is not ours to quote (issue 12).
    ours = code in PERMANENT_EXIT_CODES
    message = scrub_line(raw, keep_sha256=ours)
    job_message = scrub_line(job_message)
    detail = message or job_message
    if code == EXIT_MODEL_NOT_FOUND:
        return ModelNotFound(f"prefetch Job {name}: {detail or 'model not found in registry'}")
    if code == EXIT_DIGEST_MISMATCH:
        return DigestMismatch(
            f"prefetch Job {name}: {detail or 'the stored manifest has another digest'}; "
            "the tag serves other bytes than spec.digest pins: re-publish the pinned bytes "
            "under the tag, or set spec.digest to bytes you verified (applied by a pipeline: "
            "change the pipeline, whose new revision goes through its first stages again)"
        )
    if code == EXIT_TAG_MOVED:
        return DigestMismatch(
            f"tag moved: prefetch Job {name}: {detail or 'the tag now has another digest'}; "
            "the tag changed upstream after it was resolved: change the spec (a new revision "
            "resolves it again) or pin spec.digest"
        )
    attempts = job_counts(job)["failed"]
    why = scrub_line(str(failure.get("reason") or JOB_FAILED), 64)
    last = f"; last attempt: {message}" if message else ""
    return PrefetchFailed(
        f"prefetch Job {name} failed ({why}: {job_message or 'no message'}) "
        f"after {attempts} attempt(s){last}"
    )


class PrefetchActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings) -> None:
        self.kube = kube
        self.settings = settings
        self.secrets = SecretReader(kube)

    @activity.defn(name=PREFETCH)
    @writes_step_status(step_status.cached)
    async def prefetch(self, inp: RevisionObjectsInput) -> PrefetchResult:
        """Create or adopt PVC ``<dm>-store-<rev>`` and Job ``<dm>-pf-<rev>``, then wait for
        the Job: Complete → the result; Failed → the classified, non-retryable error."""
        guard = show_guards(self.kube, inp.dm, ConditionType.CACHED, inp.status)
        async with typed_errors(guard):
            ns, uid = inp.dm.namespace, inp.dm.uid
            if inp.cache.download_token is not None:
                # The capability guard: a Job must not reference an arbitrary Secret. The value
                # is read and dropped here; the kubelet injects it into the Job's Pod.
                await self.secrets.read(
                    ns, inp.cache.download_token, SecretCapability.DOWNLOAD_TOKEN
                )
            pvc = render_store_pvc(render_params.store_params(inp))
            job = render_prefetch_job(render_params.prefetch_params(inp, self.settings))
            poll = self.settings.poll_interval_seconds
            store = StoreSettling(self.kube, inp.dm, pvc, job["metadata"]["name"])
            await self.kube.ensure_owned(pvc, uid, poll, activity.heartbeat, store.look)
            await store.settled()
            created = await self.kube.ensure_owned(job, uid, poll, activity.heartbeat)
            await guard.passed()
            return await self._wait(inp.dm, created, pvc["metadata"]["name"])

    async def _wait(self, dm: DMRef, job: dict[str, Any], pvc: str) -> PrefetchResult:
        """Until the Job completes or fails, woken by its watch events (kube.wait), with a
        heartbeat of its counts every poll interval."""
        meta = job["metadata"]
        name, ns = meta["name"], meta["namespace"]
        held = HeldPods(
            self.kube,
            dm,
            ConditionType.CACHED,
            Phase.CACHING,
            what=f"the prefetch Job {name} cannot start its Pod",
            deadline="spec.rollout.timeouts.caching (CacheTimeout)",
            going_on=(Reason.PREFETCHING, f"prefetch Job {name}: its Pod is starting"),
        )

        async def finished(jobs: list[dict[str, Any]]) -> PrefetchResult | None:
            current = next((j for j in jobs if j["metadata"]["name"] == name), None)
            if current is None or current["metadata"]["uid"] != meta["uid"]:
                # Deleted under us (a superseding cleanup, a user): the retry creates it anew.
                raise RuntimeError(f"prefetch Job {ns}/{name} was deleted while being waited for")
            counts = job_counts(current)
            if _condition(current, "Complete") is not None:
                return PrefetchResult(
                    job=name, pvc=pvc, attempts=counts["succeeded"] + counts["failed"]
                )
            failure = job_failure(current)
            if failure is not None:
                pods = await Kube.run(
                    self.kube.list_pods, ns, {JOB_CONTROLLER_UID_LABEL: meta["uid"]}
                )
                raise classify_failure(current, failure, pods)
            if counts["active"] and not counts["ready"]:
                # No Pod of the Job runs: ask the Pods why (a list per look only while none
                # runs; the Job's own status says nothing of scheduling).
                await held.look(
                    await Kube.run(self.kube.list_pods, ns, {JOB_CONTROLLER_UID_LABEL: meta["uid"]})
                )
            elif counts["ready"]:
                await held.look([])  # placed and running: what was shown goes (no write else)
            activity.heartbeat({"job": name, **counts})
            return None

        src = source("Job", ns, name=name)
        return await wait_until(self.kube, src, finished, idle=self.settings.poll_interval_seconds)

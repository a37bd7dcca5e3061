"""Why the Pods a step waits for do not start, as the scheduler and the kubelet say (pure).

The prefetch Job's Pod and the candidate's Pods are waited for until the phase's deadline
(CacheTimeout, StartTimeout). A Pod the scheduler cannot place, or whose container cannot be
pulled or configured, will not start by waiting: the step shows it on its condition at the
first look that sees it (the failure-path rule: a condition within one reconcile, never only a
deadline expiring later), and goes on by itself once the cluster places or starts the Pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from decisionmodel.vocabulary import POD_SCHEDULED, POD_UNSCHEDULABLE, ConditionStatus, Reason

# Container waiting reasons that a wait does not cure (the kubelet's own words).
STUCK_WAITING: Final = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
MAX_SAID_CHARS: Final = 300  # of one scheduler or kubelet message


@dataclass(frozen=True)
class PodTrouble:
    """The first reason seen (scheduling before containers) and one line per Pod."""

    reason: Reason
    pods: tuple[str, ...]

    def message(self, what: str, deadline: str) -> str:
        """``what``: whose Pods ("prefetch Job x"); ``deadline``: the field that ends the wait."""
        fix = (
            "free capacity or change spec.scheduling (nodeSelector, tolerations, affinity) or "
            "the resources"
            if self.reason == Reason.PODS_UNSCHEDULABLE
            else "fix the image, its pull Secret or the container's configuration"
        )
        said = "; ".join(self.pods)
        return (
            f"{what}: {said}; {fix}: the rollout goes on by itself once the Pods start, or "
            f"ends at {deadline} (the stable, if any, keeps serving)"
        )[:1000]


def _unschedulable(pod: dict[str, Any]) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        scheduled = (c.get("type"), c.get("status"), c.get("reason"))
        if scheduled == (POD_SCHEDULED, ConditionStatus.FALSE, POD_UNSCHEDULABLE):
            return str(c.get("message") or "no node fits")[:MAX_SAID_CHARS]
    return None


def _stuck_container(pod: dict[str, Any]) -> str | None:
    status = pod.get("status") or {}
    for c in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_WAITING:
            said = str(waiting.get("message") or "")[:MAX_SAID_CHARS]
            return f"container {c.get('name')} {waiting['reason']}" + (f" ({said})" if said else "")
    return None


def pod_trouble(pods: list[dict[str, Any]]) -> PodTrouble | None:
    """The Pods (not being deleted) the scheduler cannot place, else those whose container
    cannot start (at most five named); None when neither."""
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    unplaced = [(p, _unschedulable(p)) for p in live]
    lines = [f"Pod {p['metadata']['name']} unschedulable: {why}" for p, why in unplaced if why]
    if lines:
        return PodTrouble(Reason.PODS_UNSCHEDULABLE, tuple(sorted(lines)[:5]))
    stuck = [(p, _stuck_container(p)) for p in live]
    lines = [f"Pod {p['metadata']['name']} {why}" for p, why in stuck if why]
    if lines:
        return PodTrouble(Reason.PODS_NOT_STARTING, tuple(sorted(lines)[:5]))
    return None

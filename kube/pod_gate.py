"""The ``decisionmodel.io/model-ready`` readiness gate on one serving Pod: read it, set it.

Shared by the rollout's warmup_inspect activity and the controller's steady-state prober of
stable Pods, so both judge a Pod the same way (REFERENCE.md "Readiness gate"):

- only Pods with a Pod IP and ``ContainersReady=True`` (and not being deleted) are probed;
- a Pod counts as model-ready only when the gate *and* ``Ready`` are True (the kubelet turns
  Ready True once every gate is True, so a gate just set is not yet model-ready);
- the gate is written only when its status, reason or message changes: a prober that re-checks
  every Pod every 60 s must not write a status patch (and wake every watcher) each time.

``lastTransitionTime`` moves only when the status flips, as Kubernetes conditions do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from decisionmodel.engine.render.labels import READINESS_GATE
from decisionmodel.engine.runtime_client import GateVerdict
from decisionmodel.rollout.contracts import DMRef
from decisionmodel.vocabulary import POD_CONTAINERS_READY, POD_READY, ConditionStatus, Reason
from kube.client import Kube
from kube.errors import NotFound
from kube.status import emit_event

GATE_TYPE: Final = READINESS_GATE
READY_TYPE: Final = POD_READY
CONTAINERS_READY_TYPE: Final = POD_CONTAINERS_READY

# Condition messages are shown by `kubectl describe pod`; a runtime error quoted at length
# would only add noise (and the API server caps status size).
MAX_MESSAGE_CHARS: Final = 512


@dataclass(frozen=True)
class GateState:
    """What the gate should say about one Pod."""

    ready: bool
    reason: str
    message: str

    @property
    def status(self) -> ConditionStatus:
        return ConditionStatus.of(self.ready)


# The runtime's NotPinned message quotes the ever-moving expires_at; a gate message that changes
# on every probe would defeat "write only on change", so the gate carries a stable one.
NOT_PINNED_MESSAGE: Final = (
    "loaded but not pinned (expires_at is set), the runtime may evict it; the warmup pins it "
    "with keep_alive -1, persisting means the runtime drops the pin"
)


MISMATCH_REASONS: Final = frozenset({Reason.DIGEST_MISMATCH, Reason.DEVICE_MISMATCH})

# decisionmodel_probe_results_total's `result` label per gate reason (seed 004).
PROBE_RESULTS: Final = {
    Reason.MODEL_READY: "ready",
    Reason.DIGEST_MISMATCH: "digest_mismatch",
    Reason.DEVICE_MISMATCH: "device_mismatch",
    Reason.NOT_PINNED: "not_pinned",
    Reason.PROBE_ERROR: "error",
}


def probe_result(found: GateVerdict) -> str:
    return PROBE_RESULTS.get(found.reason, "error")


async def gate_event(kube: Kube, dm: DMRef, pod: dict[str, Any], found: GateVerdict) -> None:
    """A Warning Event on the DecisionModel when a Pod's gate turns False for a wrong digest or
    device (seed 001: the Pod looks healthy to Kubernetes but serves the wrong model)."""
    if found.ready or found.reason not in MISMATCH_REASONS:
        return
    name = pod["metadata"]["name"]
    message = f"Pod {name} kept out of the Service: {found.message[:MAX_MESSAGE_CHARS]}"
    await emit_event(kube, dm, found.reason, message, "Warning")


def state_from_verdict(found: GateVerdict) -> GateState:
    """The gate a runtime_client verdict asks for, with a message stable across probes."""
    message = NOT_PINNED_MESSAGE if found.reason == Reason.NOT_PINNED else found.message
    return GateState(ready=found.ready, reason=found.reason.value, message=message)


def pod_conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in conditions if isinstance(c, dict)}


def condition_true(pod: dict[str, Any], type_: str) -> bool:
    return pod_conditions(pod).get(type_, {}).get("status") == ConditionStatus.TRUE


def gate_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    return pod_conditions(pod).get(GATE_TYPE)


def gate_true(pod: dict[str, Any]) -> bool:
    return condition_true(pod, GATE_TYPE)


def gate_reason(pod: dict[str, Any]) -> str | None:
    found = gate_condition(pod)
    reason = found.get("reason") if found else None
    return str(reason) if reason else None


def is_terminating(pod: dict[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def pod_ip(pod: dict[str, Any]) -> str | None:
    ip = (pod.get("status") or {}).get("podIP")
    return str(ip) if ip else None


def probe_eligible(pod: dict[str, Any]) -> bool:
    """A Pod the gate may probe: it has an IP, its containers are ready, it is not going away."""
    return (
        not is_terminating(pod)
        and pod_ip(pod) is not None
        and condition_true(pod, CONTAINERS_READY_TYPE)
    )


def is_model_ready(pod: dict[str, Any]) -> bool:
    """Gate True and PodReady True (REFERENCE.md: both, not the gate alone)."""
    return not is_terminating(pod) and gate_true(pod) and condition_true(pod, READY_TYPE)


def _now_text(now: datetime | None) -> str:
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def gate_patch(
    pod: dict[str, Any], state: GateState, now: datetime | None = None
) -> dict[str, Any] | None:
    """The gate condition to write for ``state``, or None when the Pod already says exactly
    that (same status, reason and message). Pure."""
    message = state.message[:MAX_MESSAGE_CHARS]
    existing = gate_condition(pod)
    if (
        existing is not None
        and existing.get("status") == state.status
        and existing.get("reason") == state.reason
        and (existing.get("message") or "") == message
    ):
        return None
    keep_time = existing is not None and existing.get("status") == state.status
    transition = existing.get("lastTransitionTime") if keep_time and existing else None
    return {
        "type": GATE_TYPE,
        "status": state.status,
        "reason": state.reason,
        "message": message,
        "lastTransitionTime": transition or _now_text(now),
    }


async def set_gate(
    kube: Kube, pod: dict[str, Any], state: GateState, now: datetime | None = None
) -> bool:
    """Write the gate condition on ``pod`` (as last read) when it changes. True when written;
    False when unchanged or the Pod is gone.

    The strategic-merge patch on ``status.conditions`` (keyed by type) touches only this
    condition, so the kubelet's own conditions are never overwritten.
    """
    condition = gate_patch(pod, state, now)
    if condition is None:
        return False
    meta = pod["metadata"]
    try:
        await Kube.run(kube.patch_pod_condition, meta["namespace"], meta["name"], condition)
    except NotFound:  # the Pod went away since it was listed: nothing to gate
        return False
    return True

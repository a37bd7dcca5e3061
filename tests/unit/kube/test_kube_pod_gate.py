"""The readiness gate on one Pod (kube.pod_gate): reading Pods, the condition it would write,
and set_gate writing only on change — against a fake Kube, no API server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest

from decisionmodel.engine.runtime_client import GateVerdict
from decisionmodel.vocabulary import Reason
from kube.client import Kube
from kube.errors import KubeError, NotFound, Unavailable
from kube.pod_gate import (
    GATE_TYPE,
    MAX_MESSAGE_CHARS,
    NOT_PINNED_MESSAGE,
    GateState,
    condition_true,
    gate_condition,
    gate_patch,
    gate_reason,
    gate_true,
    is_model_ready,
    is_terminating,
    pod_ip,
    probe_eligible,
    set_gate,
    state_from_verdict,
)

T0 = "2030-01-01T10:00:00Z"
# Not UTC and not whole seconds: the written time must be both.
NOW = datetime(2030, 1, 2, 14, 30, 15, 987654, tzinfo=timezone(timedelta(hours=2)))
NOW_WIRE = "2030-01-02T12:30:15Z"
READY = GateState(ready=True, reason="ModelReady", message="digest abc loaded on cpu, pinned")
NOT_READY = GateState(ready=False, reason="DeviceMismatch", message="loaded on cpu, wanted cuda")


def pod(
    *conditions: tuple[str, str],
    ip: str | None = "10.244.0.7",
    deleting: bool = False,
    gate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "router-abc-0", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": s} for t, s in conditions] + ([gate] if gate else [])
    }
    if ip:
        status["podIP"] = ip
    return {"metadata": meta, "status": status}


def gate(status: str, reason: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "type": GATE_TYPE,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": T0,
        **extra,
    }


# --- reading a Pod ----------------------------------------------------------------------------


def test_gate_type_is_decisionmodel_io_model_ready() -> None:
    assert GATE_TYPE == "decisionmodel.io/model-ready"


def test_reading_conditions_of_hand_built_pods() -> None:
    p = pod(("ContainersReady", "True"), ("Ready", "False"), gate=gate("True", "ModelReady"))
    assert condition_true(p, "ContainersReady")
    assert not condition_true(p, "Ready")
    assert not condition_true(p, "PodScheduled")  # absent
    assert gate_condition(p) == gate("True", "ModelReady")
    assert gate_true(p) and gate_reason(p) == "ModelReady"
    assert pod_ip(p) == "10.244.0.7"
    # Nothing there: no status, no conditions, a malformed entry.
    for bare in (
        {},
        {"status": None},
        {"status": {"conditions": None}},
        {"status": {"conditions": ["x"]}},
    ):
        assert gate_condition(bare) is None
        assert not gate_true(bare) and gate_reason(bare) is None
        assert pod_ip(bare) is None
    assert not gate_true(pod(gate=gate("False", "NotPinned")))
    assert gate_reason(pod(gate=gate("False", "NotPinned"))) == "NotPinned"


def test_is_terminating() -> None:
    assert is_terminating(pod(deleting=True))
    assert not is_terminating(pod())
    assert not is_terminating({})
    assert not is_terminating({"metadata": {"deletionTimestamp": None}})


def test_probe_eligible_needs_ip_containers_ready_and_not_deleting() -> None:
    assert probe_eligible(pod(("ContainersReady", "True")))
    assert not probe_eligible(pod(("ContainersReady", "True"), ip=None))
    assert not probe_eligible(pod(("ContainersReady", "False")))
    assert not probe_eligible(pod())  # no ContainersReady condition yet
    assert not probe_eligible(pod(("ContainersReady", "True"), deleting=True))
    # The gate plays no part: a Pod whose gate is False is exactly the one to probe.
    assert probe_eligible(pod(("ContainersReady", "True"), gate=gate("False", "ProbeError")))


def test_model_ready_needs_the_gate_and_pod_ready() -> None:
    ready_gate = gate("True", "ModelReady")
    assert is_model_ready(pod(("Ready", "True"), gate=ready_gate))
    # The gate just set, the kubelet not yet Ready: not model-ready.
    assert not is_model_ready(pod(("Ready", "False"), gate=ready_gate))
    assert not is_model_ready(pod(("Ready", "True")))  # no gate
    assert not is_model_ready(pod(("Ready", "True"), gate=gate("False", "NotPinned")))
    assert not is_model_ready(pod(("Ready", "True"), gate=ready_gate, deleting=True))


def test_state_from_verdict_keeps_the_not_pinned_message_stable() -> None:
    moving = GateVerdict(ready=False, reason=Reason.NOT_PINNED, message="expires_at 12:00:01")
    state = state_from_verdict(moving)
    assert state == GateState(ready=False, reason="NotPinned", message=NOT_PINNED_MESSAGE)
    later = state_from_verdict(moving.model_copy(update={"message": "expires_at 12:00:02"}))
    assert later == state
    ready = state_from_verdict(GateVerdict(ready=True, reason=Reason.MODEL_READY, message="ok"))
    assert (ready.status, ready.reason, ready.message) == ("True", "ModelReady", "ok")
    assert NOT_READY.status == "False"


# --- the condition gate_patch writes ----------------------------------------------------------


def test_first_write_is_the_whole_condition_at_now() -> None:
    assert gate_patch(pod(), READY, NOW) == {
        "type": "decisionmodel.io/model-ready",
        "status": "True",
        "reason": "ModelReady",
        "message": "digest abc loaded on cpu, pinned",
        "lastTransitionTime": NOW_WIRE,  # whole seconds, UTC, Z
    }
    written = gate_patch(pod(), NOT_READY, NOW)
    assert written is not None
    assert (written["status"], written["reason"]) == ("False", "DeviceMismatch")


def test_without_now_the_time_is_the_current_utc_second() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    written = gate_patch(pod(), READY)
    after = datetime.now(UTC)
    assert written is not None
    text = written["lastTransitionTime"]
    assert text.endswith("Z")
    assert before <= datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) <= after


def test_message_is_truncated() -> None:
    long = GateState(ready=False, reason="ProbeError", message="e" * (MAX_MESSAGE_CHARS + 50))
    written = gate_patch(pod(), long, NOW)
    assert written is not None and written["message"] == "e" * MAX_MESSAGE_CHARS
    # Re-probing with the same long message writes nothing: the comparison is on what is written.
    assert gate_patch(pod(gate=written), long, NOW + timedelta(minutes=1)) is None


def test_unchanged_gate_is_not_written() -> None:
    same = pod(gate=gate("True", "ModelReady", READY.message))
    assert gate_patch(same, READY, NOW) is None
    # A gate recorded without a message equals an empty one.
    no_message = pod(gate={"type": GATE_TYPE, "status": "False", "reason": "ProbeError"})
    assert gate_patch(no_message, GateState(False, "ProbeError", ""), NOW) is None


@pytest.mark.parametrize(
    "state",
    [
        GateState(ready=True, reason="ModelReady", message="another message"),
        GateState(ready=True, reason="Other", message=READY.message),
    ],
    ids=["message", "reason"],
)
def test_same_status_keeps_the_transition_time(state: GateState) -> None:
    existing = pod(gate=gate("True", "ModelReady", READY.message))
    written = gate_patch(existing, state, NOW)
    assert written is not None
    assert written["lastTransitionTime"] == T0
    assert (written["reason"], written["message"]) == (state.reason, state.message)


def test_status_flip_moves_the_transition_time() -> None:
    existing = pod(gate=gate("False", "NotPinned", NOT_PINNED_MESSAGE))
    written = gate_patch(existing, READY, NOW)
    assert written is not None
    assert (written["status"], written["lastTransitionTime"]) == ("True", NOW_WIRE)
    back = gate_patch(pod(gate=gate("True", "ModelReady")), NOT_READY, NOW)
    assert back is not None and back["lastTransitionTime"] == NOW_WIRE
    # Same status but no time recorded: now.
    timeless = pod(gate={"type": GATE_TYPE, "status": "True", "reason": "Other"})
    written = gate_patch(timeless, READY, NOW)
    assert written is not None and written["lastTransitionTime"] == NOW_WIRE


# --- set_gate ---------------------------------------------------------------------------------


class FakeKube:
    """Records patch_pod_condition calls; optionally refuses them."""

    def __init__(self, refuse: KubeError | None = None) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.refuse = refuse

    def patch_pod_condition(self, namespace: str, pod: str, condition: dict[str, Any]) -> None:
        self.calls.append((namespace, pod, condition))
        if self.refuse is not None:
            raise self.refuse


async def test_set_gate_writes_the_patch_once_and_not_again() -> None:
    fake = FakeKube()
    p = pod(("ContainersReady", "True"))
    assert await set_gate(cast(Kube, fake), p, READY, NOW) is True
    assert fake.calls == [("ns", "router-abc-0", gate_patch(p, READY, NOW))]
    # The Pod as re-read after the write: the same state is not written again.
    condition = fake.calls[0][2]
    again = pod(("ContainersReady", "True"), gate=condition)
    assert await set_gate(cast(Kube, fake), again, READY, NOW + timedelta(minutes=1)) is False
    assert len(fake.calls) == 1


async def test_set_gate_on_a_pod_gone_is_not_an_error() -> None:
    fake = FakeKube(refuse=NotFound("gone", status=404))
    assert await set_gate(cast(Kube, fake), pod(), READY, NOW) is False
    assert len(fake.calls) == 1


async def test_set_gate_other_api_errors_propagate() -> None:
    fake = FakeKube(refuse=Unavailable("down", status=500))
    with pytest.raises(Unavailable) as err:
        await set_gate(cast(Kube, fake), pod(), READY, NOW)
    assert err.value.status == 500

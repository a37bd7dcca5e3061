"""The controller's share of DecisionModel status (kube.controller_status): the pure builder,
and the writer's "no change, no write" decision against a fake Kube (no API server)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

from decisionmodel.rollout.contracts import DMRef
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason
from kube.client import CONTROLLER_FIELD_MANAGER, Kube
from kube.controller_status import (
    Cond,
    ControllerStatus,
    apply_controller_status,
    build_controller_status,
    recorded_controller_status,
)
from kube.status import MAX_CONDITION_MESSAGE

T0 = "2030-01-01T10:00:00Z"
# Not UTC and not whole seconds: the wire form must be both.
NOW = datetime(2030, 1, 2, 14, 30, 15, 987654, tzinfo=timezone(timedelta(hours=2)))
NOW_WIRE = "2030-01-02T12:30:15Z"
ROLLOUT_TYPES = ("Resolved", "Cached", "Evaluated", "Promoted")


def cond(type_: str, status: str, reason: str, generation: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": T0,
        "reason": reason,
        "message": "",
        **extra,
    }


def recorded() -> dict[str, Any]:
    """A status both owners have written to, as read from the API server."""
    return {
        # the rollout's
        "phase": "Ready",
        "stableRevision": {"hash": "aaaa"},
        # the controller's
        "observedGeneration": 2,
        "endpoint": "http://router.ns.svc:11435/v1/systemone",
        "replicas": {"desired": 2, "modelReady": 2},
        "lastRetryToken": "t-1",
        "conditions": [
            cond("Ready", "True", "Serving"),
            cond("Resolved", "True", "DigestResolved"),
            cond("ModelReady", "True", "ModelReady"),
            cond("Cached", "True", "Prefetched"),
            cond("Degraded", "False", "AsExpected"),
            cond("Evaluated", "True", "EvaluationPassed"),
            cond("Promoted", "True", "Promoted"),
            cond("RuntimeUpdateAvailable", "True", "RuntimeUpdateAvailable"),
        ],
    }


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions", [])}


def test_recorded_values_are_kept_when_want_leaves_them_none() -> None:
    current = recorded()
    out = build_controller_status(current, ControllerStatus(), 3, NOW)
    assert {k: v for k, v in out.items() if k != "conditions"} == {
        "observedGeneration": 2,  # the generation passed is not the field: only want sets it
        "endpoint": "http://router.ns.svc:11435/v1/systemone",
        "replicas": {"desired": 2, "modelReady": 2},
        "lastRetryToken": "t-1",
    }
    assert "phase" not in out and "stableRevision" not in out  # the rollout's: never applied
    # A copy: changing what the builder returned leaves the status as read alone.
    out["replicas"]["modelReady"] = 0
    out["conditions"][0]["reason"] = "Changed"
    assert current == recorded()


def test_nothing_recorded_and_nothing_wanted_is_empty() -> None:
    assert build_controller_status({}, ControllerStatus(), 1, NOW) == {}
    assert recorded_controller_status({}) == {}


def test_wanted_fields_are_laid_over() -> None:
    want = ControllerStatus(
        observed_generation=3,
        endpoint="http://router.ns.svc:11435/v2",
        replicas={"desired": 3, "modelReady": 1},
        last_retry_token="t-2",
    )
    out = build_controller_status(recorded(), want, 3, NOW)
    assert out["observedGeneration"] == 3
    assert out["endpoint"] == "http://router.ns.svc:11435/v2"
    assert out["replicas"] == {"desired": 3, "modelReady": 1}
    assert out["lastRetryToken"] == "t-2"
    # Only one field wanted: the others stay as recorded.
    only = build_controller_status(recorded(), ControllerStatus(endpoint="e"), 3, NOW)
    assert (only["endpoint"], only["observedGeneration"], only["lastRetryToken"]) == ("e", 2, "t-1")
    assert only["replicas"] == {"desired": 2, "modelReady": 2}


def test_the_re_resolve_record_is_kept_until_replaced_or_cleared() -> None:
    record = {"hash": "u1", "attempts": 2, "lastAttemptTime": T0}
    current = {**recorded(), "reResolve": record}
    # Kept by every other write (a restarted controller reads it back: issue 34)...
    assert build_controller_status(current, ControllerStatus(), 3, NOW)["reResolve"] == record
    # ...replaced by the next attempt's...
    later = {**record, "attempts": 3}
    out = build_controller_status(current, ControllerStatus(re_resolve=later), 3, NOW)
    assert out["reResolve"] == later
    # ...and left out of the apply (so removed) once its failure is gone.
    gone = build_controller_status(current, ControllerStatus(clear_re_resolve=True), 3, NOW)
    assert "reResolve" not in gone
    assert recorded_controller_status(current)["reResolve"] == record


def test_rollback_to_is_set_kept_and_cleared() -> None:
    """status.rollbackTo (issue 34): a partial write (the retry token's) keeps it; the steady
    write sets it while in force and clears it with {}."""
    record = {"revision": "0123456789abcdef", "generation": 4}
    taken = build_controller_status(recorded(), ControllerStatus(rollback_to=record), 3, NOW)
    assert taken["rollbackTo"] == record
    kept = build_controller_status(taken, ControllerStatus(last_retry_token="t-3"), 3, NOW)
    assert kept["rollbackTo"] == record
    assert "rollbackTo" not in build_controller_status(
        taken, ControllerStatus(rollback_to={}), 3, NOW
    )


def test_only_the_controllers_conditions_are_merged() -> None:
    want = ControllerStatus(conditions=[Cond(ConditionType.DEGRADED, "True", Reason.PROBE_ERROR)])
    out = build_controller_status(recorded(), want, 3, NOW)
    types = [c["type"] for c in out["conditions"]]
    assert types == ["Degraded", "ModelReady", "Ready"]
    for theirs in ROLLOUT_TYPES:
        assert theirs not in types
    # RuntimeUpdateAvailable is written only while it holds: not carried over from status…
    assert "RuntimeUpdateAvailable" not in types
    # …but there when wanted.
    update = Cond(ConditionType.RUNTIME_UPDATE_AVAILABLE, "True", Reason.RUNTIME_UPDATE_AVAILABLE)
    held = build_controller_status(recorded(), ControllerStatus(conditions=[update]), 3, NOW)
    assert "RuntimeUpdateAvailable" in by_type(held)
    # A status holding only the rollout's conditions gives the controller none at all.
    rollout_only = {"conditions": [cond(t, "True", "Promoted") for t in ROLLOUT_TYPES]}
    assert "conditions" not in build_controller_status(rollout_only, ControllerStatus(), 3, NOW)


def test_transition_time_kept_when_status_unchanged_and_moved_when_it_flips() -> None:
    want = ControllerStatus(
        conditions=[
            # same status, another reason and message: the time stays
            Cond(ConditionType.READY, "True", Reason.SERVING, "2/2 model-ready"),
            # status flips: the time moves to now
            Cond(ConditionType.DEGRADED, "True", Reason.REPLICAS_NOT_MODEL_READY, "1/2"),
        ]
    )
    out = by_type(build_controller_status(recorded(), want, 3, NOW))
    assert out["Ready"]["lastTransitionTime"] == T0
    assert out["Ready"]["message"] == "2/2 model-ready"
    assert out["Degraded"]["lastTransitionTime"] == NOW_WIRE  # whole seconds, UTC, Z
    assert (out["Degraded"]["status"], out["Degraded"]["reason"]) == (
        "True",
        "ReplicasNotModelReady",
    )
    # A condition new to the status starts at now too.
    first = Cond(ConditionType.READY, "False", Reason.NO_STABLE_REVISION)
    new = build_controller_status({}, ControllerStatus(conditions=[first]), 1, NOW)
    assert new["conditions"][0]["lastTransitionTime"] == NOW_WIRE


def test_wanted_conditions_carry_the_generation_passed() -> None:
    want = ControllerStatus(conditions=[Cond(ConditionType.READY, "True", Reason.SERVING)])
    out = by_type(build_controller_status(recorded(), want, 7, NOW))
    assert out["Ready"]["observedGeneration"] == 7
    # Conditions not wanted this time keep the generation they were computed for.
    assert out["ModelReady"]["observedGeneration"] == 2
    assert out["Degraded"]["observedGeneration"] == 2


def test_a_wanted_condition_may_describe_an_older_generation() -> None:
    """Issue 34: Ready describes the stable's generation while the spec is not what serves;
    the other wanted conditions describe the current one."""
    want = ControllerStatus(
        conditions=[
            Cond(ConditionType.READY, "True", Reason.CANDIDATE_REJECTED),
            Cond(ConditionType.DEGRADED, "True", Reason.EVALUATION_FAILED),
        ],
        generations={ConditionType.READY: 2},
    )
    out = by_type(build_controller_status(recorded(), want, 3, NOW))
    assert out["Ready"]["observedGeneration"] == 2
    assert out["Ready"]["lastTransitionTime"] == T0  # still True: no transition
    assert out["Degraded"]["observedGeneration"] == 3


def test_message_is_truncated_to_the_api_servers_cap() -> None:
    assert MAX_CONDITION_MESSAGE == 32768
    long = "x" * (MAX_CONDITION_MESSAGE + 100)
    want = ControllerStatus(
        conditions=[Cond(ConditionType.DEGRADED, "True", Reason.PROBE_ERROR, long)]
    )
    out = by_type(build_controller_status(recorded(), want, 3, NOW))
    assert out["Degraded"]["message"] == "x" * MAX_CONDITION_MESSAGE


def test_output_conditions_are_sorted_by_type() -> None:
    current = {
        "conditions": [
            cond("Ready", "True", "Serving"),
            cond("ModelReady", "True", "ModelReady"),
        ]
    }
    want = ControllerStatus(conditions=[Cond(ConditionType.DEGRADED, "False", Reason.AS_EXPECTED)])
    out = build_controller_status(current, want, 2, NOW)
    assert [c["type"] for c in out["conditions"]] == ["Degraded", "ModelReady", "Ready"]
    assert [c["type"] for c in recorded_controller_status(current)["conditions"]] == [
        "ModelReady",
        "Ready",
    ]


def _steady_wants() -> ControllerStatus:
    return ControllerStatus(
        observed_generation=3,
        endpoint="http://router.ns.svc:11435/v1/systemone",
        replicas={"desired": 2, "modelReady": 2},
        conditions=[
            Cond(ConditionType.READY, "True", Reason.SERVING),
            Cond(ConditionType.DEGRADED, "False", Reason.AS_EXPECTED),
            Cond(ConditionType.MODEL_READY, "True", Reason.MODEL_READY, "2/2"),
        ],
    )


def test_a_status_written_by_the_builder_reads_back_as_recorded() -> None:
    """What makes a steady DecisionModel cost no write: once the builder's output is the
    status, building again (nothing wanted, or the same wanted, later) gives exactly what is
    recorded."""
    written = build_controller_status(recorded(), _steady_wants(), 3, NOW)
    # As the API server holds it: the rollout's share beside it.
    current = {
        **copy.deepcopy(written),
        "phase": "Ready",
        "conditions": [
            *copy.deepcopy(written["conditions"]),
            cond("Promoted", "True", "Promoted"),
        ],
    }
    later = NOW + timedelta(minutes=1)
    assert recorded_controller_status(current) == build_controller_status(
        current, ControllerStatus(), 3, later
    )
    assert recorded_controller_status(current) == build_controller_status(
        current, _steady_wants(), 3, later
    )
    # A real change is seen as one.
    changed = ControllerStatus(replicas={"desired": 2, "modelReady": 1})
    assert recorded_controller_status(current) != build_controller_status(
        current, changed, 3, later
    )


class FakeKube:
    """get_dm returns a fixed object; apply_dm_status records what would be written."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.applies: list[tuple[dict[str, Any], str | None, str | None]] = []

    def get_dm(self, dm: DMRef) -> dict[str, Any]:
        return copy.deepcopy(self.obj)

    def apply_dm_status(
        self,
        dm: DMRef,
        status: dict[str, Any],
        field_manager: str | None = None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        self.applies.append((status, field_manager, resource_version))
        return {**self.obj, "status": {**self.obj.get("status", {}), **status}}


async def test_a_steady_decision_model_costs_no_write() -> None:
    written = build_controller_status(
        recorded(), _steady_wants(), 3, datetime(2030, 1, 1, tzinfo=UTC)
    )
    obj = {
        "metadata": {"name": "router", "namespace": "ns", "generation": 3, "resourceVersion": "41"},
        "status": {**written, "phase": "Ready"},
    }
    fake = FakeKube(obj)
    dm = DMRef(namespace="ns", name="router", uid="u", generation=3)

    assert await apply_controller_status(cast(Kube, fake), dm, _steady_wants()) is None
    assert await apply_controller_status(cast(Kube, fake), dm, ControllerStatus()) is None
    assert fake.applies == []

    changed = ControllerStatus(replicas={"desired": 2, "modelReady": 1})
    applied = await apply_controller_status(cast(Kube, fake), dm, changed)
    assert applied is not None
    [(status, manager, version)] = fake.applies
    assert (manager, version) == (CONTROLLER_FIELD_MANAGER, "41")
    assert status["replicas"] == {"desired": 2, "modelReady": 1}
    assert "phase" not in status


def test_a_while_held_condition_is_removed_once_it_no_longer_holds() -> None:
    """TemporalReachable=False (and RuntimeUpdateAvailable) stay only while wanted: once
    Temporal answers again the controller's next write leaves it out, and that write happens
    even when nothing else changed (the recorded share includes it)."""
    down = Cond(ConditionType.TEMPORAL_REACHABLE, "False", Reason.TEMPORAL_UNAVAILABLE, "x")
    held = build_controller_status(recorded(), ControllerStatus(conditions=[down]), 3, NOW)
    assert "TemporalReachable" in by_type(held)
    again = build_controller_status(
        held, ControllerStatus(conditions=[down]), 3, NOW + timedelta(minutes=1)
    )
    assert by_type(again)["TemporalReachable"]["lastTransitionTime"] == NOW_WIRE  # kept
    back = build_controller_status(held, ControllerStatus(), 3, NOW + timedelta(minutes=2))
    assert "TemporalReachable" not in by_type(back)
    assert back != recorded_controller_status(held)


def test_a_condition_held_only_while_wanted_goes_when_not_wanted_again() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    degraded = Cond(ConditionType.DEGRADED, ConditionStatus.TRUE, Reason.EVALUATION_FAILED, "x")
    first = build_controller_status({}, ControllerStatus(conditions=[degraded]), 1, now)
    assert [c["type"] for c in first["conditions"]] == ["Degraded"]
    # Carried over by default (the controller keeps what it said) ...
    kept = build_controller_status(first, ControllerStatus(), 1, now)
    assert [c["type"] for c in kept["conditions"]] == ["Degraded"]
    # ... but not when this reconcile says it holds only while wanted.
    held = ControllerStatus(while_held=frozenset({ConditionType.DEGRADED}))
    assert "conditions" not in build_controller_status(first, held, 1, now)


async def test_a_status_made_for_an_older_generation_is_not_stamped_with_a_newer_one() -> None:
    """CI, issue 34: the reconcile of generation 1 wanted Ready=True (its spec served); its
    apply met a 409 because the spec had just changed, re-read generation 2 and stamped the
    wanted conditions with it, so ``kubectl wait --for=condition=Ready`` returned 0 before
    generation 2 served. A newer generation read back is left to its own reconcile."""
    obj = {
        "metadata": {"name": "router", "namespace": "ns", "generation": 2, "resourceVersion": "42"},
        "status": {"phase": "Ready", "observedGeneration": 1},
    }
    fake = FakeKube(obj)
    stale = DMRef(namespace="ns", name="router", uid="u", generation=1)
    assert await apply_controller_status(cast(Kube, fake), stale, _steady_wants()) is None
    assert fake.applies == []
    current = DMRef(namespace="ns", name="router", uid="u", generation=2)
    assert await apply_controller_status(cast(Kube, fake), current, _steady_wants()) is not None
    [(status, _, _)] = fake.applies
    assert {c["observedGeneration"] for c in status["conditions"]} == {2}


async def test_a_record_that_names_no_generation_is_written_whatever_the_generation() -> None:
    """The retry token consumed and the re-resolve schedule carry no generation: a newer spec
    read back does not hold them (a skipped token would be consumed twice)."""
    obj = {
        "metadata": {"name": "router", "namespace": "ns", "generation": 5, "resourceVersion": "9"},
        "status": {"phase": "Failed", "observedGeneration": 4},
    }
    fake = FakeKube(obj)
    stale = DMRef(namespace="ns", name="router", uid="u", generation=4)
    want = ControllerStatus(last_retry_token="t1")
    assert await apply_controller_status(cast(Kube, fake), stale, want) is not None
    [(status, _, _)] = fake.applies
    assert status["lastRetryToken"] == "t1"

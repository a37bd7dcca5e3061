"""The controller's side of the placement guard (controller.reconciler.placement_guard): a refused
spec
starts nothing and cancels a rollout running for it, and the refusal shows on Degraded (and on
Ready without a stable) until it is fixed."""

from __future__ import annotations

from typing import Any

from controller.reconciler.decide import Decision, decide
from controller.reconciler.placement_guard import (
    clear_refusal,
    placement_refusal,
    refused_decision,
    show_refusal,
)
from controller.temporal.rollouts import RunningRollout
from decisionmodel.api import DecisionModel
from decisionmodel.engine.placement import PlacementPolicy
from decisionmodel.rollout.dispatch import DispatchSettings, desired_revision
from decisionmodel.vocabulary import ConditionType, Reason
from kube.controller_status import Cond

CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}


def dm(spec: dict[str, Any], status: dict[str, Any] | None = None) -> DecisionModel:
    return DecisionModel.from_k8s(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 2},
            "spec": spec,
            "status": status or {},
        }
    )


def test_the_live_spec_is_checked_with_the_operators_policy() -> None:
    refused = dm({"model": "laya:en", "scheduling": {"tolerations": [CONTROL_PLANE]}})
    message = placement_refusal(refused, PlacementPolicy())
    assert message is not None and "spec.scheduling.tolerations[0].key" in message
    assert placement_refusal(dm({"model": "laya:en", "replicas": 3}), PlacementPolicy()) is None
    many = dm({"model": "laya:en", "replicas": 3})
    assert "spec.replicas" in (placement_refusal(many, PlacementPolicy(max_replicas=2)) or "")
    allowed = PlacementPolicy(toleration_keys=("node-role.kubernetes.io/control-plane",))
    assert placement_refusal(refused, allowed) is None


def test_a_refused_spec_starts_nothing_and_cancels_what_runs_for_it() -> None:
    obj = dm({"model": "laya:en", "scheduling": {"tolerations": [CONTROL_PLANE]}})
    desired = desired_revision(obj, DispatchSettings())
    first = decide(obj, desired, [])
    assert first.start and first.target_id
    d = refused_decision(first)
    assert not d.start and d.target_id is None and d.cancel == ()
    running = [RunningRollout(first.target_id, None, desired.requested_hash)]
    already = decide(obj, desired, running)
    assert not already.start and already.target_id == first.target_id
    assert refused_decision(already).cancel == (first.target_id,)


def test_a_spec_at_the_stable_keeps_its_decision() -> None:
    at_stable = Decision(at_stable=True, cancel=("old",), clear_failed=True)
    assert refused_decision(at_stable) == at_stable


def test_the_refusal_replaces_degraded_and_without_a_stable_ready() -> None:
    health = [
        Cond(ConditionType.READY, "True", Reason.SERVING, "1/1"),
        Cond(ConditionType.DEGRADED, "False", Reason.AS_EXPECTED, ""),
    ]
    with_stable = {c.type: c for c in show_refusal(health, "refused", has_stable=True)}
    assert with_stable[ConditionType.READY].reason == Reason.SERVING
    degraded = with_stable[ConditionType.DEGRADED]
    assert (degraded.status, degraded.reason) == ("True", Reason.PLACEMENT_REFUSED)
    assert "keeps serving" in degraded.message
    no_stable = {c.type: c for c in show_refusal(health[:1], "refused", has_stable=False)}
    assert no_stable[ConditionType.READY].status == "False"
    assert no_stable[ConditionType.READY].reason == Reason.PLACEMENT_REFUSED


def test_a_cleared_refusal_says_degraded_false_when_nothing_else_does() -> None:
    shown = {
        "conditions": [
            {
                "type": "Degraded",
                "status": "True",
                "reason": "PlacementRefused",
                "message": "x",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    ready = [Cond(ConditionType.READY, "False", Reason.NO_STABLE_REVISION, "")]
    cleared = clear_refusal(ready, dm({"model": "laya:en"}, shown))
    assert [(c.type, c.status) for c in cleared][-1] == (ConditionType.DEGRADED, "False")
    assert clear_refusal(ready, dm({"model": "laya:en"})) == ready

"""The stable's Ready, ModelReady and Degraded from what the steady state found (pure)."""

from __future__ import annotations

from controller.reconciler.steady import StableHealth, degraded_condition, readiness_conditions
from kube.controller_status import Cond


def by_type(conds: list) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in conds}


def test_ready_serves_while_one_replica_is_model_ready_and_model_ready_needs_all() -> None:
    assert by_type(readiness_conditions(2, 2)) == {
        "Ready": ("True", "Serving"),
        "ModelReady": ("True", "ModelReady"),
    }
    assert by_type(readiness_conditions(1, 2)) == {
        "Ready": ("True", "ReplicasNotModelReady"),
        "ModelReady": ("False", "ReplicasNotModelReady"),
    }
    assert by_type(readiness_conditions(0, 2)) == {
        "Ready": ("False", "NoModelReadyPods"),
        "ModelReady": ("False", "NoModelReadyPods"),
    }


def test_degraded_names_the_first_of_conflict_store_replicas_and_cache() -> None:
    store = Cond("Degraded", "True", "StoreLost", "lost")
    cache = Cond("Degraded", "True", "CacheNotShareable", "shared")
    whole, short = StableHealth(desired=2, model_ready=2), StableHealth(desired=2, model_ready=1)
    assert degraded_condition(["Service x"], store, short, [cache]).reason == "ResourceConflict"
    assert degraded_condition([], store, short, [cache]) is store
    found = degraded_condition([], None, short, [cache])
    assert (found.reason, found.message) == ("ReplicasNotModelReady", "1/2 replicas model-ready")
    assert degraded_condition([], None, whole, [cache]) is cache
    calm = degraded_condition([], None, whole, [])
    assert (calm.status, calm.reason) == ("False", "AsExpected")

"""What the controller does about the stable's store PVC (seed 001 store rows)."""

from __future__ import annotations

from typing import Any

from controller.reconciler.store_recovery import store_health
from decisionmodel.rollout.contracts import (
    DMRef,
    RevisionObjectsInput,
    RevisionRecord,
    RevisionSpec,
    StoreRecoveryInput,
    StoreRecoveryOutcome,
    store_workflow_id,
)

DM = DMRef(namespace="ns", name="m", uid="u")
INP = RevisionObjectsInput(
    dm=DM,
    record=RevisionRecord(hash="abc", model="laya:en", digest="d" * 64),
    revision=RevisionSpec(model="laya:en"),
)


class FakeRecoveries:
    def __init__(self, state: StoreRecoveryOutcome | str | None = None) -> None:
        self.current = state
        self.started: list[tuple[StoreRecoveryInput, str]] = []

    async def start(self, inp: StoreRecoveryInput, wid: str) -> None:
        self.started.append((inp, wid))

    async def state(self, wid: str) -> StoreRecoveryOutcome | str | None:
        return self.current


def pvc(annotations: dict[str, str] | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m-store-abc", "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    return {"metadata": meta}


async def test_a_healthy_store_is_probed_and_silent() -> None:
    fake = FakeRecoveries()
    health = await store_health(fake, INP, pvc(), None)  # type: ignore[arg-type]
    assert health.condition is None and health.probe and not fake.started


async def test_a_missing_store_starts_its_recovery_and_is_not_probed() -> None:
    fake = FakeRecoveries()
    health = await store_health(fake, INP, None, None)  # type: ignore[arg-type]
    assert health.condition is not None and health.condition.reason == "StoreLost"
    assert not health.probe
    assert fake.started == [(StoreRecoveryInput(objects=INP), store_workflow_id(DM, "abc"))]


async def test_a_recovering_store_waits_for_its_workflow() -> None:
    fake = FakeRecoveries("running")
    marked = pvc({"decisionmodel.io/store-recovering": "true"})
    health = await store_health(fake, INP, marked, None)  # type: ignore[arg-type]
    assert health.condition is not None and health.condition.reason == "StoreLost"
    assert not health.probe and not fake.started


async def test_a_failed_recovery_names_the_retry_and_a_new_value_starts_another() -> None:
    failed = StoreRecoveryOutcome(recovered=False, message="prefetch Job failed: DigestMismatch")
    marked = pvc({"decisionmodel.io/store-recovering": "true"})
    health = await store_health(FakeRecoveries(failed), INP, marked, None)  # type: ignore[arg-type]
    assert health.condition is not None and health.condition.reason == "StorePrefetchFailed"
    assert "decisionmodel.io/retry" in health.condition.message and not health.probe
    fresh = FakeRecoveries(None)  # the new retry value's ID has no workflow yet
    await store_health(fresh, INP, marked, "again")  # type: ignore[arg-type]
    assert fresh.started[0][1] == store_workflow_id(DM, "abc", "again")


async def test_a_store_being_deleted_is_left_to_a_human() -> None:
    fake = FakeRecoveries()
    health = await store_health(fake, INP, pvc(deleting=True), None)  # type: ignore[arg-type]
    assert health.condition is not None and health.condition.reason == "StoreTerminating"
    assert health.probe and not fake.started

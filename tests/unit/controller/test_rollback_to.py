"""decisionmodel.io/rollback-to (seed 002, issue 22): only the stable or the previous revision
may be named; the named one comes back with its whole recorded identity, as a normal gated
rollout, in place of the spec until the next spec change (issue 34); any other value is
refused, naming the two."""

from __future__ import annotations

from typing import Any

from test_decide import DIGEST_A, DIGEST_B, dm

from controller.reconciler.decide import decide
from decisionmodel.rollout.dispatch import (
    DispatchSettings,
    desired_revision,
    rollback_refusal,
)
from decisionmodel.rollout.rollback_to import RollbackPlan, rollback_condition, rollback_plan
from decisionmodel.rollout.spec_mapping import record_for

ANNOTATION = "decisionmodel.io/rollback-to"


def recorded(spec: dict[str, Any], digest: str) -> dict[str, Any]:
    """The status record a promotion of ``spec`` at ``digest`` writes."""
    desired = desired_revision(dm(spec), DispatchSettings())
    record = record_for(desired.revision, digest, desired.image)
    return record.to_status()


PREVIOUS = recorded(
    {"model": "laya:en", "device": "cpu", "resources": {"requests": {"cpu": "2"}}}, DIGEST_A
)
STABLE = recorded({"model": "laya:multilingual"}, DIGEST_B)
STATUS = {"stableRevision": STABLE, "previousRevision": PREVIOUS}


def test_the_previous_revision_comes_back_whole_through_a_rollout() -> None:
    # The spec has moved on to something else again: the annotation decides meanwhile.
    obj = dm({"model": "laya:other"}, STATUS, {ANNOTATION: PREVIOUS["hash"]})
    desired = desired_revision(obj, DispatchSettings())
    assert desired.requested_hash == PREVIOUS["hash"] and desired.resolved
    revision = desired.revision
    assert (revision.model, revision.digest, revision.resources) == (
        "laya:en",
        DIGEST_A,
        {"requests": {"cpu": "2"}},
    )
    assert revision.image is None  # the runtime's default image, not an override
    # The worker computes the same hash from it: the rollout is of that very revision.
    assert record_for(revision, DIGEST_A).hash == PREVIOUS["hash"]
    decision = decide(obj, desired, [])
    assert decision.start and not decision.at_stable
    assert rollback_refusal(obj) is None


def test_naming_the_stable_keeps_it_in_place_of_the_spec() -> None:
    obj = dm({"model": "laya:other"}, STATUS, {ANNOTATION: STABLE["hash"]})
    decision = decide(obj, desired_revision(obj, DispatchSettings()), [])
    assert decision.at_stable and not decision.start


def test_any_other_revision_is_refused_and_the_spec_is_followed() -> None:
    obj = dm({"model": "laya:other"}, STATUS, {ANNOTATION: "0123456789abcdef"})
    message = rollback_refusal(obj)
    assert message is not None
    assert PREVIOUS["hash"] in message and STABLE["hash"] in message
    assert desired_revision(obj, DispatchSettings()).requested_hash.startswith("u")


def test_a_revision_whose_spec_set_no_resources_comes_back_under_its_own_hash() -> None:
    """Status records the built-in requests the Pods ran with; the hash is over the spec's
    (none): the request must be spelt as the spec was, or the rollback is a new revision."""
    obj = dm({"model": "laya:en"}, {"stableRevision": PREVIOUS, "previousRevision": STABLE},
             {ANNOTATION: STABLE["hash"]})  # fmt: skip
    assert STABLE["resources"]  # recorded: what the Pods ran
    desired = desired_revision(obj, DispatchSettings())
    assert desired.requested_hash == STABLE["hash"]
    assert desired.revision.resources == {}
    assert record_for(desired.revision, DIGEST_B).hash == STABLE["hash"]


# --- issue 34: the annotation ends, the next spec change supersedes it ------------------------
# dm() builds generation 3: a record taken at 3 is in force, one taken at 2 is for an older spec.


def test_the_stable_it_put_back_is_left_for_the_next_spec_change() -> None:
    """The freeze: a record of the stable taken at an older generation no longer decides; the
    spec's revision is desired, and the annotation (if still there) is removed."""
    record = {"revision": STABLE["hash"], "generation": 2}
    obj = dm(
        {"model": "laya:other"}, {**STATUS, "rollbackTo": record}, {ANNOTATION: STABLE["hash"]}
    )
    plan = rollback_plan(obj)
    assert plan.in_force is None and plan.remove_annotation
    assert plan.superseded == STABLE["hash"]
    desired = desired_revision(obj, DispatchSettings())
    assert desired.requested_hash.startswith("u")  # laya:other, unresolved
    decision = decide(obj, desired, [])
    assert decision.start and not decision.at_stable
    assert rollback_condition(obj, plan) is None


def test_the_record_keeps_the_revision_after_the_annotation_is_gone() -> None:
    obj = dm({"model": "laya:other"}, {**STATUS, "rollbackTo": {"revision": STABLE["hash"],
             "generation": 3}})  # fmt: skip
    plan = rollback_plan(obj)
    assert plan.in_force is not None and plan.in_force.done
    decision = decide(obj, desired_revision(obj, DispatchSettings()), [])
    assert decision.at_stable and not decision.start
    said = rollback_condition(obj, plan)
    assert said is not None and said.reason == "RollbackServing"
    assert STABLE["hash"] in said.message and "generation 3" in said.message
    assert "laya:other" in said.message and "next spec change" in said.message


def test_the_annotation_is_removed_once_done_and_recorded_only() -> None:
    # Taken in this reconcile (not in status yet): kept, so a crash loses no request.
    fresh = dm({"model": "laya:other"}, STATUS, {ANNOTATION: STABLE["hash"]})
    plan = rollback_plan(fresh)
    assert plan.in_force is not None and plan.in_force.record() == {
        "revision": STABLE["hash"],
        "generation": 3,
    }
    assert not plan.remove_annotation
    taken = {**STATUS, "rollbackTo": plan.in_force.record()}
    assert rollback_plan(dm({"model": "laya:other"}, taken, {ANNOTATION: STABLE["hash"]})) == (
        RollbackPlan(plan.in_force, remove_annotation=True)
    )
    # In progress (the previous revision is not the stable yet): the annotation stays.
    going = {**STATUS, "rollbackTo": {"revision": PREVIOUS["hash"], "generation": 3}}
    obj = dm({"model": "laya:other"}, going, {ANNOTATION: PREVIOUS["hash"]})
    plan = rollback_plan(obj)
    assert plan.in_force is not None and not plan.in_force.done and not plan.remove_annotation
    said = rollback_condition(obj, plan)
    assert said is not None and said.reason == "RollbackInProgress"


def test_a_spec_change_supersedes_a_rollback_in_progress() -> None:
    going = {**STATUS, "rollbackTo": {"revision": PREVIOUS["hash"], "generation": 2}}
    obj = dm({"model": "laya:other"}, going, {ANNOTATION: PREVIOUS["hash"]})
    plan = rollback_plan(obj)
    assert plan == RollbackPlan(remove_annotation=True, superseded=PREVIOUS["hash"])
    assert desired_revision(obj, DispatchSettings()).requested_hash.startswith("u")


def test_removing_the_annotation_before_it_served_withdraws_it() -> None:
    going = {**STATUS, "rollbackTo": {"revision": PREVIOUS["hash"], "generation": 3}}
    assert rollback_plan(dm({"model": "laya:other"}, going)) == RollbackPlan()


def test_a_new_annotation_after_a_superseded_one_is_taken_at_the_new_generation() -> None:
    # The controller removed the superseded annotation and cleared the record; set anew:
    obj = dm({"model": "laya:other"}, STATUS, {ANNOTATION: PREVIOUS["hash"]})
    plan = rollback_plan(obj)
    assert plan.in_force is not None and plan.in_force.generation == 3


def test_a_failed_rollback_says_so_and_how_to_go_on() -> None:
    failed = {**PREVIOUS, "reason": "EvaluationFailed", "message": "accuracy 0.5 < 0.8"}
    going = {**STATUS, "failedRevision": failed,
             "rollbackTo": {"revision": PREVIOUS["hash"], "generation": 3}}  # fmt: skip
    obj = dm({"model": "laya:other"}, going, {ANNOTATION: PREVIOUS["hash"]})
    said = rollback_condition(obj, rollback_plan(obj))
    assert said is not None and said.reason == "EvaluationFailed"
    assert "decisionmodel.io/retry" in said.message and "spec change" in said.message

"""decisionmodel.io/rollback-to (seed 002, issue 22): only the stable or the previous revision
may be named; the named one comes back with its whole recorded identity, as a normal gated
rollout, whatever the spec says meanwhile; any other value is refused, naming the two."""

from __future__ import annotations

from typing import Any

from test_decide import DIGEST_A, DIGEST_B, dm

from controller.reconciler.decide import decide
from controller.reconciler.dispatch import (
    DispatchSettings,
    desired_revision,
    rollback_refusal,
)
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


def test_naming_the_stable_keeps_it_whatever_the_spec_says() -> None:
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

"""The controller's dispatch decision, as a pure function of the object and running rollouts."""

from __future__ import annotations

from typing import Any

from controller.reconciler.decide import decide
from controller.temporal.rollouts import RunningRollout
from decisionmodel.api import DecisionModel
from decisionmodel.rollout.contracts import DMRef, retry_key, workflow_id
from decisionmodel.rollout.dispatch import (
    DispatchSettings,
    desired_revision,
    runtime_update_available,
)
from decisionmodel.rollout.spec_mapping import record_for, rollout_policy

DIGEST_A = "a" * 64
DIGEST_B = "b" * 64


def dm(
    spec: dict[str, Any],
    status: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> DecisionModel:
    return DecisionModel.from_k8s(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {
                "name": "m",
                "namespace": "ns",
                "uid": "u1",
                "generation": 3,
                "annotations": annotations or {},
            },
            "spec": spec,
            "status": status or {},
        }
    )


REF = DMRef(namespace="ns", name="m", uid="u1", generation=3)


def rev(obj: DecisionModel) -> str:
    return desired_revision(obj, DispatchSettings()).requested_hash


def test_first_apply_starts_unresolved_rollout() -> None:
    obj = dm({"model": "laya:en"})
    d = decide(obj, desired_revision(obj, DispatchSettings()), [])
    assert d.start and d.target_id == workflow_id(REF, rev(obj))
    assert rev(obj).startswith("u")


def test_running_under_unresolved_id_is_recognised_by_its_resolved_revision() -> None:
    tagged = dm({"model": "laya:en"})
    desired = desired_revision(tagged, DispatchSettings())
    # The candidate's digest is not reused (issue 22: a tag is resolved again for a new
    # revision), yet the candidate it resolved to is recognised as this revision.
    resolved = record_for(desired.revision, DIGEST_A, desired.image).hash
    candidate = {"hash": resolved, "model": "laya:en", "digest": DIGEST_A}
    with_candidate = dm({"model": "laya:en"}, {"candidateRevision": candidate})
    assert rev(with_candidate).startswith("u")
    running = [RunningRollout("rollout/ns/m/u123", None, resolved)]
    d = decide(with_candidate, desired_revision(with_candidate, DispatchSettings()), running)
    assert not d.start and d.cancel == () and d.target_id == "rollout/ns/m/u123"


def test_a_tag_named_spec_at_its_stable_starts_nothing_and_a_new_revision_resolves_again() -> None:
    tagged = dm({"model": "laya:en"})
    desired = desired_revision(tagged, DispatchSettings())
    stable = {
        "hash": record_for(desired.revision, DIGEST_A, desired.image).hash,
        "model": "laya:en",
        "digest": DIGEST_A,
    }
    at_stable = dm({"model": "laya:en"}, {"stableRevision": stable})
    d = decide(at_stable, desired_revision(at_stable, DispatchSettings()), [])
    assert not d.start and d.at_stable
    # A resources change is a new revision: its digest is unknown until the tag is resolved.
    bigger = dm(
        {"model": "laya:en", "resources": {"requests": {"cpu": "2"}}}, {"stableRevision": stable}
    )
    assert rev(bigger).startswith("u")
    assert decide(bigger, desired_revision(bigger, DispatchSettings()), []).start


def test_new_revision_cancels_the_other_and_starts_once_it_has_closed() -> None:
    obj = dm(
        {"model": "laya:multilingual"},
        {"stableRevision": {"hash": "s", "model": "laya:en", "digest": DIGEST_A}},
    )
    desired = desired_revision(obj, DispatchSettings())
    running = [RunningRollout("rollout/ns/m/old", None, "oldrev")]
    d = decide(obj, desired, running)
    assert not d.start and d.cancel == ("rollout/ns/m/old",)
    assert d.waiting == ("rollout/ns/m/old",) and d.target_id == workflow_id(REF, rev(obj))
    closed = decide(obj, desired, [])
    assert closed.start and closed.waiting == () and closed.target_id == d.target_id
    # Past the controller's bound it starts beside the run that does not close.
    overdue = decide(obj, desired, running, overdue=True)
    assert overdue.start and overdue.cancel == ("rollout/ns/m/old",) and overdue.waiting == ()


def test_a_pinned_digest_waits_for_the_stopping_run_of_its_tag() -> None:
    """Explorer seeds 4416, 4423, 4437: the spec pins the digest its tag's run is resolving.
    The run still shows the unresolved hash; only resolve would tell that both are one
    revision, so the pinned run waits until the tag's run has closed."""
    tag = dm({"model": "laya:en"}, {"stableRevision": {"hash": "s", "model": "laya:x"}})
    tag_run = RunningRollout(workflow_id(REF, rev(tag)), None, rev(tag))
    pinned = dm(
        {"model": "laya:en", "digest": DIGEST_B},
        {"stableRevision": {"hash": "s", "model": "laya:x"}},
    )
    d = decide(pinned, desired_revision(pinned, DispatchSettings()), [tag_run])
    assert not d.start and d.cancel == (tag_run.workflow_id,)
    assert d.waiting == (tag_run.workflow_id,)


def test_spec_back_to_stable_cancels_candidate_clears_failed_and_spares_the_promoter() -> None:
    stable = {"hash": "PLACEHOLDER", "model": "laya:en", "digest": DIGEST_A}
    obj = dm({"model": "laya:en"}, {"stableRevision": stable})
    stable_hash = rev(obj)
    obj = dm(
        {"model": "laya:en"},
        {
            "stableRevision": {**stable, "hash": stable_hash},
            "failedRevision": {"hash": "f", "model": "laya:x"},
        },
    )
    running = [RunningRollout("cand", None, "other"), RunningRollout("promoter", None, stable_hash)]
    d = decide(obj, desired_revision(obj, DispatchSettings()), running)
    assert not d.start and d.clear_failed and d.cancel == ("cand",)


def test_failed_revision_is_not_retried_without_a_new_token() -> None:
    base = dm({"model": "laya:nope"})
    failed = {"hash": rev(base), "model": "laya:nope", "reason": "ModelNotFound"}
    obj = dm({"model": "laya:nope"}, {"failedRevision": failed})
    assert not decide(obj, desired_revision(obj, DispatchSettings()), []).start
    consumed = dm(
        {"model": "laya:nope"},
        {"failedRevision": failed, "lastRetryToken": "t1"},
        {"decisionmodel.io/retry": "t1"},
    )
    assert not decide(consumed, desired_revision(consumed, DispatchSettings()), []).start
    fresh = dm(
        {"model": "laya:nope"},
        {"failedRevision": failed, "lastRetryToken": "t1"},
        {"decisionmodel.io/retry": "t2"},
    )
    d = decide(fresh, desired_revision(fresh, DispatchSettings()), [])
    assert d.start and d.consume_retry == "t2"
    assert d.target_id == f"rollout/ns/m/{rev(base)}/{retry_key('t2')}"


def test_a_retry_after_a_moved_tag_resolves_again_instead_of_reusing_the_failed_digest() -> None:
    """The failed revision recorded the digest the tag had; the tag moved since. Without a new
    token the revision is recognised (no restart); with one, the retry's input carries no
    digest, so resolve asks the registry again (the documented fix works)."""
    from harness.helpers import spec_hash

    from decisionmodel.rollout.dispatch import rollout_input

    spec = {"model": "laya:en"}
    image = desired_revision(dm(spec), DispatchSettings()).image
    resolved = spec_hash(dm(spec).spec, DIGEST_A, image)
    failed = {"hash": resolved, "model": "laya:en", "digest": DIGEST_A, "reason": "DigestMismatch"}
    held = dm(spec, {"failedRevision": failed})
    desired = desired_revision(held, DispatchSettings())
    assert not desired.resolved and desired.revision.digest is None
    assert not decide(held, desired, []).start
    retried = dm(spec, {"failedRevision": failed}, {"decisionmodel.io/retry": "after-move"})
    d = decide(retried, desired_revision(retried, DispatchSettings()), [])
    assert d.start and d.consume_retry == "after-move"
    inp = rollout_input(retried, DispatchSettings(), retry_token="after-move")
    assert inp.revision.digest is None
    # Once the token is consumed its run is left alone, though visibility shows it under the
    # unresolved hash (failedRevision is cleared only by that run's resolve).
    consumed = dm(
        spec,
        {"failedRevision": failed, "lastRetryToken": "after-move"},
        {"decisionmodel.io/retry": "after-move"},
    )
    wanted = desired_revision(consumed, DispatchSettings())
    run = d.target_id
    assert run is not None
    for shown in (wanted.requested_hash, "0" * 16):  # unresolved, then a new digest's hash
        kept = decide(consumed, wanted, [RunningRollout(run, None, shown)])
        assert not kept.start and kept.cancel == ()


def test_consumed_retry_run_is_left_running() -> None:
    base = dm({"model": "laya:nope"})
    failed = {"hash": rev(base), "model": "laya:nope", "reason": "ModelNotFound"}
    obj = dm(
        {"model": "laya:nope"},
        {"failedRevision": failed, "lastRetryToken": "t1"},
        {"decisionmodel.io/retry": "t1"},
    )
    running = [RunningRollout(f"rollout/ns/m/{rev(base)}/{retry_key('t1')}", None, rev(base))]
    d = decide(obj, desired_revision(obj, DispatchSettings()), running)
    assert not d.start and d.cancel == ()


def test_replicas_cache_auth_rollout_do_not_change_the_revision() -> None:
    a = dm({"model": "laya:en", "digest": DIGEST_B})
    b = dm(
        {
            "model": "laya:en",
            "digest": DIGEST_B,
            "replicas": 3,
            "cache": {"size": "20Gi", "accessModes": ["ReadWriteMany"]},
            "auth": {"apiKeySecretRef": {"name": "k", "key": "token"}},
        }
    )
    assert rev(a) == rev(b)
    assert rev(a) != rev(dm({"model": "laya:en", "digest": DIGEST_B, "device": "cuda"}))


# --- runtime version policy (seed 001 "Upgrading the operator") ------------------------------

STABLE_ON_0_9 = {
    "stableRevision": {
        "hash": "s",
        "engine": "ollaya",
        "model": "laya:en",
        "digest": DIGEST_A,
        "device": "cpu",
        "runtimeVersion": "0.9.0",
    }
}
UPGRADED = DispatchSettings(runtime_version="0.10.0")
FOLLOW = DispatchSettings(runtime_version="0.10.0", runtime_version_policy="FollowOperator")


def test_pinned_keeps_the_stables_runtime_so_an_upgrade_starts_no_rollout() -> None:
    obj = dm({"model": "laya:en"}, STABLE_ON_0_9)
    on_old = dm({"model": "laya:en", "runtimeVersion": "0.9.0"}, STABLE_ON_0_9)
    assert desired_revision(obj, UPGRADED).revision.runtime_version == "0.9.0"
    assert (
        desired_revision(obj, UPGRADED).requested_hash
        == desired_revision(on_old, UPGRADED).requested_hash
    )
    assert runtime_update_available(obj, UPGRADED) == "0.10.0"


def test_follow_operator_takes_the_default_so_an_upgrade_rolls() -> None:
    obj = dm({"model": "laya:en"}, STABLE_ON_0_9)
    assert desired_revision(obj, FOLLOW).revision.runtime_version == "0.10.0"
    assert (
        desired_revision(obj, FOLLOW).requested_hash
        != desired_revision(obj, UPGRADED).requested_hash
    )
    assert runtime_update_available(obj, FOLLOW) is None


def test_no_update_notice_when_the_runtime_was_chosen_or_is_current() -> None:
    chosen = dm({"model": "laya:en", "runtimeVersion": "0.9.0"}, STABLE_ON_0_9)
    assert runtime_update_available(chosen, UPGRADED) is None
    image = dm({"model": "laya:en", "image": "registry.example.com/ollaya:custom"}, STABLE_ON_0_9)
    assert runtime_update_available(image, UPGRADED) is None
    current = dm({"model": "laya:en"}, STABLE_ON_0_9)
    assert runtime_update_available(current, DispatchSettings(runtime_version="0.9.0")) is None
    first = dm({"model": "laya:en"})
    assert runtime_update_available(first, UPGRADED) is None


# --- policy (issue 12, point 4) ---------------------------------------------------------------

GATES = {
    "evaluation": {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.90",
    }
}


def test_a_running_rollout_with_another_policy_is_replaced() -> None:
    """Same revision, other policy (a hand-started run without gates, or spec.rollout changed):
    cancelled, not adopted; the revision starts again once it has closed."""
    obj = dm({"model": "laya:en", "rollout": GATES})
    desired = desired_revision(obj, DispatchSettings())
    wid = workflow_id(REF, rev(obj))
    forged = rollout_policy(dm({"model": "laya:en"})).digest()  # no evaluation
    d = decide(obj, desired, [RunningRollout(wid, "r1", rev(obj), forged)])
    assert not d.start and d.cancel == (wid,) and d.replaced == ((wid, forged),)
    assert d.policy == rollout_policy(obj).digest() and "policy" in d.why
    # The same run with the spec's policy is left running; an unknown policy too.
    for known in (rollout_policy(obj).digest(), None):
        d = decide(obj, desired, [RunningRollout(wid, "r1", rev(obj), known)])
        assert not d.start and d.cancel == () and d.replaced == ()
    # Once it has closed, the revision starts again (the same workflow ID).
    d = decide(obj, desired, [])
    assert d.start and d.target_id == wid


def test_a_retry_waits_for_its_predecessor_to_finish_its_rollback_without_cancelling_it() -> None:
    base = dm({"model": "laya:nope"})
    failed = {"hash": rev(base), "model": "laya:nope", "reason": "EvaluationFailed"}
    obj = dm(
        {"model": "laya:nope"},
        {"failedRevision": failed, "lastRetryToken": "t1"},
        {"decisionmodel.io/retry": "t2"},
    )
    desired = desired_revision(obj, DispatchSettings())
    predecessor = RunningRollout(workflow_id(REF, rev(base)), None, rev(base))
    d = decide(obj, desired, [predecessor])
    assert not d.start and d.cancel == () and d.waiting == (predecessor.workflow_id,)
    assert d.consume_retry == "t2"  # consumed only when it starts (reconcile)
    assert decide(obj, desired, []).start

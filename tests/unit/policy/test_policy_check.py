"""The policy re-check at the point of use (issue 12, point 4): what evaluate and promote compare
with the live DecisionModel, as pure functions of the input and the live spec."""

from __future__ import annotations

from typing import Any

import pytest

from decisionmodel.api import DecisionModel
from decisionmodel.errors import PolicyMismatch
from decisionmodel.rollout.contracts import (
    EvaluateInput,
    PromoteInput,
    RevisionRecord,
    RolloutPolicy,
    approval_token,
)
from decisionmodel.rollout.dispatch import DispatchSettings, rollout_input
from decisionmodel.rollout.policy_check import check_evaluation, check_promotion, policy_problem
from decisionmodel.rollout.spec_mapping import rollout_policy
from decisionmodel.vocabulary import PERMANENT_REASONS, Reason

EVALUATION = {
    "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
    "minAccuracy": "0.90",
}
CANDIDATE = RevisionRecord(hash="cand000000000000", model="laya:en", digest="a" * 64)
DATASET = "d" * 64


def dm(rollout: dict[str, Any]) -> DecisionModel:
    return DecisionModel.from_k8s(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 2},
            "spec": {"model": "laya:en", "rollout": rollout},
        }
    )


GATED = dm({"evaluation": EVALUATION})
MANUAL = dm({"evaluation": EVALUATION, "promotion": "Manual"})


def promote_input(obj: DecisionModel, **changes: Any) -> PromoteInput:
    inp = rollout_input(obj, DispatchSettings())
    fields: dict[str, Any] = {
        "dm": inp.dm,
        "candidate": CANDIDATE,
        "replicas": 1,
        "policy": inp.policy(),
        "dataset_digest": DATASET if inp.evaluation else None,
    }
    return PromoteInput(**(fields | changes))


def test_the_digest_covers_gates_dataset_cases_and_promotion_but_not_timeouts() -> None:
    base = rollout_policy(GATED).digest()
    other_set = {"configMapRef": {"name": "o", "key": "k"}}
    changed = [
        dm({"evaluation": {**EVALUATION, "minAccuracy": "0.10"}}),
        dm({"evaluation": {**EVALUATION, "maxECE": "0.2"}}),
        dm({"evaluation": {**EVALUATION, "maxCases": 3}}),
        dm({"evaluation": {**EVALUATION, "datasetRef": other_set}}),
        dm({"evaluation": EVALUATION, "promotion": "Manual"}),
        dm({}),
    ]
    digests = {rollout_policy(o).digest() for o in changed}
    assert base not in digests and len(digests) == len(changed)
    slow = dm({"evaluation": EVALUATION, "timeouts": {"evaluating": "1h"}})
    assert rollout_policy(slow).digest() == base


def test_dispatch_carries_the_policy_the_live_spec_has() -> None:
    # The controller's input and the activities' reading of the spec agree (else every
    # dispatched rollout would be refused).
    for obj in (GATED, MANUAL, dm({})):
        assert rollout_input(obj, DispatchSettings()).policy() == rollout_policy(obj)


def test_a_hand_started_input_without_evaluation_is_refused_before_promotion() -> None:
    forged = rollout_input(GATED, DispatchSettings()).model_copy(update={"evaluation": None})
    inp = promote_input(GATED, policy=forged.policy(), dataset_digest=None)
    with pytest.raises(PolicyMismatch) as err:
        check_promotion(inp, rollout_policy(GATED), live_stable=None)
    message = str(err.value)
    assert err.value.reason == Reason.POLICY_MISMATCH and err.value.permanent
    assert "no evaluation" in message and "minAccuracy 0.90" in message
    assert "stable revision keeps serving" in message and "decisionmodel.io/retry" in message


def test_other_gates_are_refused_before_evaluating() -> None:
    inp = rollout_input(GATED, DispatchSettings())
    assert inp.evaluation is not None
    lowered = inp.evaluation.model_copy(update={"min_accuracy": "0.10"})
    evaluate = EvaluateInput(
        dm=inp.dm, candidate=CANDIDATE, model="laya:en", policy=lowered, promotion=inp.promotion
    )
    with pytest.raises(PolicyMismatch, match=r"^evaluation refused: .*minAccuracy 0\.10"):
        check_evaluation(evaluate, rollout_policy(GATED))
    # The live gates pass; an input from before the check (no promotion) is compared on its
    # evaluation part.
    same = evaluate.model_copy(update={"policy": inp.evaluation, "promotion": None})
    check_evaluation(same, rollout_policy(GATED))
    other_mode = same.model_copy(update={"promotion": "Manual"})
    with pytest.raises(PolicyMismatch):
        check_evaluation(other_mode, rollout_policy(GATED))


def test_an_input_without_a_policy_is_refused_at_promotion() -> None:
    with pytest.raises(PolicyMismatch, match="no policy"):
        check_promotion(promote_input(GATED, policy=None), rollout_policy(GATED), None)


def test_manual_requires_the_approval_bound_to_candidate_and_live_gates() -> None:
    live = rollout_policy(MANUAL)
    token = approval_token(CANDIDATE.hash, live.evaluation, DATASET)
    check_promotion(promote_input(MANUAL, approval=token), live, live_stable="stable0")
    # The first revision is never held: no approval needed without a stable.
    check_promotion(promote_input(MANUAL), live, live_stable=None)
    with pytest.raises(PolicyMismatch, match="accepted none"):
        check_promotion(promote_input(MANUAL), live, live_stable="stable0")
    # An approval bound to other gates (or another candidate) does not promote.
    assert live.evaluation is not None
    other = live.evaluation.model_copy(update={"min_accuracy": "0.10"})
    for stale in (approval_token(CANDIDATE.hash, other, DATASET), "otherrevision000"):
        with pytest.raises(PolicyMismatch, match="not the one bound"):
            check_promotion(promote_input(MANUAL, approval=stale), live, live_stable="stable0")


def test_the_same_policy_passes_and_automatic_needs_no_approval() -> None:
    check_promotion(promote_input(GATED), rollout_policy(GATED), live_stable="stable0")
    assert policy_problem(rollout_policy(GATED), rollout_policy(GATED)) is None


def test_policy_mismatch_is_permanent() -> None:
    assert Reason.POLICY_MISMATCH in PERMANENT_REASONS


def test_the_message_never_carries_more_than_references() -> None:
    secret_ds = dm(
        {"evaluation": {**EVALUATION, "datasetRef": {"secretRef": {"name": "ds", "key": "k"}}}}
    )
    why = policy_problem(None, rollout_policy(secret_ds))
    assert why is not None and "Secret ds/k" in why
    assert RolloutPolicy().digest() == RolloutPolicy(promotion="Automatic").digest()

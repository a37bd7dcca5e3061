"""RolloutState: the progress query's answer and the approval checks, without Temporal."""

from __future__ import annotations

from decisionmodel.rollout.contracts import (
    DMRef,
    EvaluationOutcome,
    EvaluationPolicy,
    KeyRef,
    Phase,
    RejectedApproval,
    RevisionRecord,
    RevisionSpec,
    RolloutInput,
    RolloutProgress,
    RolloutResult,
)
from decisionmodel.vocabulary import EvaluationResult, Reason
from workflows.rollout_state import RolloutState

RECORD = RevisionRecord(hash="r0000000000000a", model="laya:en", digest="a" * 64)


def rollout_input(evaluation: bool = False) -> RolloutInput:
    return RolloutInput(
        dm=DMRef(namespace="ns", name="dm", uid="uid-1"),
        requested_revision="u000000000000001",
        revision=RevisionSpec(model="laya:en"),
        evaluation=EvaluationPolicy(
            dataset=KeyRef(kind="ConfigMap", name="golden", key="cases.jsonl"),
            min_accuracy="0.80",
            max_cases=40,
        )
        if evaluation
        else None,
    )


def outcome(cases: int = 12) -> EvaluationOutcome:
    return EvaluationOutcome(
        result=EvaluationResult.PASSED,
        reason=Reason.EVALUATION_PASSED,
        message="ok",
        accuracy="0.9000",
        ece="0.0500",
        brier="0.0800",
        cases=cases,
        failed_cases=0,
        dataset_digest="d" * 64,
    )


def test_a_fresh_state_reports_pending() -> None:
    # What the query answered before `run` set the input (a query racing the first task).
    assert RolloutState().progress() == RolloutProgress(
        phase=Phase.PENDING, step="pending", requested_revision=""
    )


def test_progress_carries_the_candidate_the_evaluation_and_the_end() -> None:
    state = RolloutState(inp=rollout_input(evaluation=True))
    state.phase, state.step, state.record = Phase.EVALUATING, "evaluate", RECORD
    state.evaluation = outcome(cases=12)
    state.rejected.append(RejectedApproval(approval="x", why="stale"))
    state.result, state.reason, state.message = RolloutResult.ROLLED_BACK, "Aborted", "why"
    progress = state.progress()
    assert progress == RolloutProgress(
        phase=Phase.EVALUATING,
        step="evaluate",
        requested_revision="u000000000000001",
        revision=RECORD.hash,
        digest=RECORD.digest,
        cases_done=12,
        cases_total=40,
        evaluation=outcome(cases=12),
        rejected_approvals=[RejectedApproval(approval="x", why="stale")],
        result=RolloutResult.ROLLED_BACK,
        reason="Aborted",
        message="why",
    )
    # A copy: a later rejection does not change an answer already given.
    state.rejected.append(RejectedApproval(approval="y", why="stale"))
    assert len(progress.rejected_approvals) == 1


def test_expected_approval_is_shown_only_while_awaiting_promotion() -> None:
    state = RolloutState(inp=rollout_input(), record=RECORD, expected_approval="tok")
    state.phase = Phase.AWAITING_PROMOTION
    assert state.progress().expected_approval == "tok"
    state.phase = Phase.PROMOTING
    assert state.progress().expected_approval is None


def test_reasons_are_stored_as_plain_strings() -> None:
    # The vocabulary's members go in; the query's wire form is the same either way.
    state = RolloutState()
    state.reason = Reason.ABORTED
    assert type(state.reason) is str and state.reason == "Aborted"


def test_approval_before_awaiting_promotion_is_refused() -> None:
    state = RolloutState(phase=Phase.CACHING)
    why = state.approval_problem("r0000000000000a")
    assert why is not None and "no candidate awaits promotion (phase Caching)" in why


def test_approval_for_another_candidate_is_refused() -> None:
    state = RolloutState(phase=Phase.AWAITING_PROMOTION, expected_approval="tok")
    why = state.approval_problem("old")
    assert why is not None and "does not match" in why and "'tok'" in why
    assert state.approval_problem("tok") is None


def test_the_applied_approval_again_is_a_repeat_not_a_problem() -> None:
    state = RolloutState(phase=Phase.AWAITING_PROMOTION, expected_approval="tok")
    assert not state.is_repeated_approval("tok")
    state.approved = True
    assert state.is_repeated_approval("tok")
    assert not state.is_repeated_approval("other")

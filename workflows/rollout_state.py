"""What a RolloutWorkflow knows at any moment: one model, read by the ``progress`` query.

The steps write it, the messages (``promote``, ``approve``, ``abort``) read and write it, and
the query builds the ``RolloutProgress`` contract from it. Nothing here talks to Temporal: it is
plain data with the two answers derived from it (the progress, and why an approval is refused).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.rollout.contracts import (
    CleanupProgress,
    EvaluationOutcome,
    Phase,
    RejectedApproval,
    RevisionRecord,
    RolloutInput,
    RolloutProgress,
    RolloutResult,
)


class RolloutState(BaseModel):
    """The workflow's state; mutable, one instance per workflow run."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    inp: RolloutInput | None = None
    phase: Phase = Phase.PENDING
    step: str = "pending"
    record: RevisionRecord | None = None  # the candidate, once resolved
    expected_approval: str | None = None  # the token a manual promotion must carry
    approved: bool = False
    # Held on an inconclusive evaluation (onInconclusive: Hold), and why a person rejected it.
    held_inconclusive: bool = False
    rejected_by: str | None = None
    abort_reason: str | None = None
    rejected: list[RejectedApproval] = Field(default_factory=list)
    evaluation: EvaluationOutcome | None = None
    result: RolloutResult | None = None
    reason: str | None = None
    message: str | None = None
    # True while the steps before promotion run: the window in which an abort or a cancel
    # stops the rollout. Off once promotion is committed and while a failure is recorded.
    stoppable: bool = True
    cleanup: CleanupProgress | None = None  # a compensation step failing, being retried

    def require_input(self) -> RolloutInput:
        assert self.inp is not None
        return self.inp

    def progress(self) -> RolloutProgress:
        """The ``progress`` query's answer."""
        inp = self.inp
        return RolloutProgress(
            phase=self.phase,
            step=self.step,
            requested_revision=inp.requested_revision if inp else "",
            revision=self.record.hash if self.record else None,
            digest=self.record.digest if self.record else None,
            expected_approval=self.expected_approval
            if self.phase == Phase.AWAITING_PROMOTION
            else None,
            cases_total=inp.evaluation.max_cases if inp and inp.evaluation else 0,
            cases_done=self.evaluation.cases if self.evaluation else 0,
            evaluation=self.evaluation,
            rejected_approvals=list(self.rejected),
            result=self.result,
            reason=self.reason,
            message=self.message,
            cleanup=self.cleanup,
        )

    def is_repeated_approval(self, approval: str) -> bool:
        """The approval that was already applied, given again (idempotent, not refused)."""
        return self.approved and approval == self.expected_approval

    def approval_problem(self, approval: str) -> str | None:
        """Why ``approval`` cannot promote now, or None when it is the one awaited."""
        if self.phase != Phase.AWAITING_PROMOTION or self.expected_approval is None:
            return (
                f"approval {approval!r} refused: no candidate awaits promotion "
                f"(phase {self.phase.value}); approve once the phase is AwaitingPromotion"
            )
        if approval != self.expected_approval:
            return (
                f"approval {approval!r} refused: it does not match the candidate awaiting "
                f"promotion (expected {self.expected_approval!r}); a stale approval never "
                "promotes a later candidate"
            )
        return None

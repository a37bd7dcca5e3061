"""What the DecisionModel says while a compensation step keeps failing (issue 22, point 7).

A rollback or a superseded cleanup that cannot delete the candidate (an admission policy or
RBAC refusing deletes, the API server away) is retried for ever (``RolloutWorkflow._until_done``);
without this the only trace was the workflow's current details, while ``kubectl get dm`` said
RolledBack and the candidate's Deployment (perhaps holding GPUs) kept running. The condition
``CleanupPending`` names the step, the objects, the workflow and the last error; the controller
exports it as ``decisionmodel_cleanup_pending`` and the alert of the same name links its runbook.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from decisionmodel.rollout.contracts import ConditionUpdate, DMRef, StatusUpdate
    from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason

# The change id: histories from before it retried without writing these.
CLEANUP_SHOWN = "cleanup-shown-on-the-decision-model"


def pending(
    dm: DMRef, step: str, objects: list[str], rounds: int, error: str, pause: int
) -> StatusUpdate:
    """CleanupPending=True, and a Warning Event, after a round of ``step`` ran out."""
    named = f" ({', '.join(objects)})" if objects else ""
    message = (
        f"{step}{named} failed for {rounds} round(s) and is retried every {pause}s by workflow "
        f"{workflow.info().workflow_id}; last error: {error}. Fix what refuses it (an admission "
        "policy, RBAC, a finalizer, the API server's reachability); nothing is given up"
    )
    return StatusUpdate(
        dm=dm,
        conditions=[
            ConditionUpdate(
                type=ConditionType.CLEANUP_PENDING,
                status=ConditionStatus.TRUE,
                reason=Reason.CLEANUP_PENDING,
                message=message,
            )
        ],
        event_reason=Reason.CLEANUP_PENDING,
        event_message=message,
        event_type="Warning",
    )


def finished(dm: DMRef, step: str, rounds: int) -> StatusUpdate:
    """CleanupPending=False once the step that kept failing is done."""
    return StatusUpdate(
        dm=dm,
        conditions=[
            ConditionUpdate(
                type=ConditionType.CLEANUP_PENDING,
                status=ConditionStatus.FALSE,
                reason=Reason.CLEANUP_DONE,
                message=f"{step} finished after {rounds + 1} round(s)",
            )
        ],
    )

"""``decisionmodel.io/rollback-to`` (seed 002; ``dmrollout undo``) and how it ends (issue 34).

The annotation asks for a revision status records in full (the stable or the previous one) in
place of the spec's. The controller takes it into ``status.rollbackTo`` with the spec's
generation, and from then on that record, not the annotation, says what the DecisionModel
serves:

- while the named revision rolls out, the annotation stays (removing it withdraws the request);
- once the named revision is the stable, the annotation has done its work: the controller
  removes it, and the revision keeps serving in place of the spec;
- the next spec change (a higher ``metadata.generation``) ends it, in progress or done: the
  annotation (if still there) is removed, the record cleared, and the spec rolls out.

Before issue 34 the annotation stayed in force for good: once its revision was the stable,
every later spec change was ignored without a word (a GitOps commit silently not deployed).

Pure functions of the DecisionModel: the reconcile applies the plan (condition, record,
annotation removal, Events).
"""

from __future__ import annotations

from dataclasses import dataclass

from decisionmodel.api import DecisionModel
from decisionmodel.api.status import DecisionModelStatus, RevisionStatus
from decisionmodel.engine.render.labels import ANNOTATION_ROLLBACK_TO
from decisionmodel.rollout.contracts import ConditionUpdate
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason


@dataclass(frozen=True)
class RollbackTo:
    """A rollback-to in force: ``target`` is served (or rolled out) in place of the spec's
    generation ``generation``."""

    target: RevisionStatus
    generation: int
    done: bool  # the target is the stable revision

    def record(self) -> dict[str, object]:
        """``status.rollbackTo`` as written."""
        return {"revision": self.target.hash, "generation": self.generation}


@dataclass(frozen=True)
class RollbackPlan:
    in_force: RollbackTo | None = None
    # The annotation has done its work (its record is in status), or a spec change ended it.
    remove_annotation: bool = False
    # The revision of a rollback-to a spec change has just ended (for the Event), if any.
    superseded: str | None = None


def named(status: DecisionModelStatus | None, wanted: str) -> RevisionStatus | None:
    """The stable or previous revision of that hash, when status records it in full: only a
    revision that passed its gates may come back this way, never an unreviewed one."""
    if status is None:
        return None
    for rev in (status.stable_revision, status.previous_revision):
        if rev is not None and rev.hash == wanted and rev.digest and rev.model:
            return rev
    return None


def rollback_plan(dm: DecisionModel) -> RollbackPlan:
    status = dm.status
    wanted = (dm.metadata.annotations or {}).get(ANNOTATION_ROLLBACK_TO) or None
    recorded = status.rollback_to if status else None
    generation = dm.metadata.generation or 0
    stable = status.stable_revision if status else None
    if recorded is not None and recorded.generation != generation:
        # Taken for an older spec: the spec changed since, which ends it; so does the
        # annotation that asked for it, if it is still there (not one set anew for another).
        return RollbackPlan(
            remove_annotation=wanted == recorded.revision, superseded=recorded.revision
        )
    if wanted:
        target = named(status, wanted)
        if target is not None:
            done = stable is not None and stable.hash == target.hash
            # Removed only once status holds the record: a crash in between loses no request.
            taken = recorded is not None and recorded.revision == wanted
            rollback = RollbackTo(target, generation, done)
            return RollbackPlan(rollback, remove_annotation=done and taken)
        # Refused (rollback_refusal says why): one taken before stays in force.
    if recorded is None:
        return RollbackPlan()
    target = named(status, recorded.revision)
    done = stable is not None and stable.hash == recorded.revision
    if target is None or (not wanted and not done):
        # The annotation removed before its revision served: the request is withdrawn.
        return RollbackPlan()
    return RollbackPlan(RollbackTo(target, recorded.generation, done))


def rollback_condition(dm: DecisionModel, plan: RollbackPlan) -> ConditionUpdate | None:
    """RollbackTo=True while one is in force, saying which revision serves instead of the
    spec and what ends it; None (absent) while the spec is what the DecisionModel asks for."""
    rollback = plan.in_force
    if rollback is None:
        return None
    target = rollback.target
    status = dm.status
    stable = status.stable_revision if status else None
    failed = status.failed_revision if status else None
    what = f"revision {target.hash} ({target.model}@sha256:{(target.digest or '')[:12]})"
    instead = f"in place of generation {rollback.generation} of the spec ({dm.spec.model})"
    ends = "the next spec change ends it and rolls the spec out"
    if rollback.done:
        reason: str = Reason.ROLLBACK_SERVING
        message = (
            f"{what} serves, put back by {ANNOTATION_ROLLBACK_TO}, {instead}; the spec is not "
            f"served until it changes: {ends} (to keep this revision, set the spec to it)"
        )
    elif failed is not None and failed.hash == target.hash:
        reason = failed.reason or Reason.CANDIDATE_REJECTED
        message = (
            f"the rollback to {what} {instead} failed ({failed.reason}): revision "
            f"{stable.hash if stable else '?'} keeps serving; a new decisionmodel.io/retry value "
            f"tries it again, removing {ANNOTATION_ROLLBACK_TO} or a spec change goes back to "
            "the spec"
        )
    else:
        reason = Reason.ROLLBACK_IN_PROGRESS
        message = (
            f"{ANNOTATION_ROLLBACK_TO} puts {what} back {instead}: a rollout of its recorded "
            f"identity runs, revision {stable.hash if stable else '?'} serves meanwhile; {ends}"
        )
    return ConditionUpdate(
        type=ConditionType.ROLLBACK_TO,
        status=ConditionStatus.TRUE,
        reason=reason,
        message=message,
    )

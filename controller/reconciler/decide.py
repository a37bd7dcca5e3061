"""Which rollout should run for one DecisionModel: a pure function of the object and the rollouts
running for it.

- desired revision = stable → cancel any candidate; clear failedRevision (the spec came back);
- desired = failed revision and no new retry token → nothing (a failed revision is not retried
  until the spec yields a new hash or ``decisionmodel.io/retry`` changes);
- desired already running → nothing (maybe forward an approval); but a run whose policy digest
  (its input's evaluation, gates and promotion mode) is not the spec's is cancelled and the
  revision started again under the spec's policy once it has closed (a hand-started run, or
  spec.rollout changed mid-rollout; docs/security.md);
- else cancel the other running rollout(s) of this DecisionModel, and start the desired one
  once they have closed (within the fleet budget; queued otherwise: Pending / RolloutQueued,
  FIFO). A stopping run removes its candidate first, and it may be the very revision the spec
  now asks for under another name (a pinned digest and the tag it pins resolve to one revision,
  which only resolve tells): two runs of it at once would each act on the same objects
  (explorer seeds 3458, 4416). ``overdue``: one did not close within the controller's bound
  (a cleanup retried for ever, a run no worker serves), and the desired one starts beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.temporal.rollouts import RunningRollout
from decisionmodel.api import DecisionModel
from decisionmodel.api.status import FailedRevisionStatus
from decisionmodel.engine.render.labels import ANNOTATION_RETRY
from decisionmodel.rollout.contracts import workflow_id
from decisionmodel.rollout.dispatch import DesiredRevision
from decisionmodel.rollout.spec_mapping import dm_ref, rollout_policy


@dataclass(frozen=True)
class Decision:
    start: bool = False
    cancel: tuple[str, ...] = ()
    clear_failed: bool = False
    consume_retry: str | None = None
    target_id: str | None = None
    at_stable: bool = False  # the spec asks for the stable revision
    why: str = ""
    # Runs of the desired revision cancelled because their policy is not the spec's (each with
    # the policy digest it enforces); the revision starts again once they have closed.
    replaced: tuple[tuple[str, str], ...] = ()
    policy: str = ""  # the spec's policy digest
    # Runs still going that the desired one waits for before it starts (cancelled just now,
    # or ending by themselves: an abort's or a retry's predecessor finishing its rollback).
    waiting: tuple[str, ...] = ()


def decide(
    dm: DecisionModel,
    desired: DesiredRevision,
    running: list[RunningRollout],
    re_resolve: bool = False,
    overdue: bool = False,
) -> Decision:
    """``re_resolve``: a ModelNotFound failure is due to be resolved again
    (controller.reconciler.re_resolve): it starts as a new attempt, no annotation needed.
    ``overdue``: start even though other runs have not closed yet (module doc)."""
    status = dm.status
    stable = status.stable_revision if status else None
    failed = status.failed_revision if status else None
    if stable is not None and desired.is_revision(stable):
        return Decision(
            # A rollout that promoted this very revision is finishing (grace, then deleting the
            # previous revision): leave it be.
            cancel=tuple(r.workflow_id for r in running if r.revision != stable.hash),
            clear_failed=failed is not None,
            at_stable=True,
            why="the spec asks for the stable revision",
        )
    retry = None
    if failed is not None and desired.is_revision(failed):
        token = (dm.metadata.annotations or {}).get(ANNOTATION_RETRY)
        consumed = status.last_retry_token if status else None
        if (not token or token == consumed) and not re_resolve:
            return _failed_stays(dm, desired, failed, consumed, running)
        # A new token is a retry asked for; a re-resolve without one reuses no token.
        retry = token if token and token != consumed else None
    return _roll_out(dm, desired, running, retry, overdue)


def _failed_stays(
    dm: DecisionModel,
    desired: DesiredRevision,
    failed: FailedRevisionStatus,
    consumed: str | None,
    running: list[RunningRollout],
) -> Decision:
    """The spec asks for the revision that failed, and no new retry token: nothing starts.
    A run of this revision may still be finishing its rollback (status is recorded before the
    candidate's objects go), or be the retry of the consumed token: let it. The run of the
    consumed retry token is this revision too, whatever hash its search attribute shows (the
    unresolved one, or a new digest's after resolve)."""
    retry_run = workflow_id(dm_ref(dm), desired.requested_hash, consumed) if consumed else None
    return Decision(
        cancel=tuple(
            r.workflow_id
            for r in running
            if r.revision not in (None, failed.hash) and r.workflow_id != retry_run
        ),
        why=f"revision {failed.hash} failed ({failed.reason}); set a new "
        f"{ANNOTATION_RETRY} value to retry",
    )


def _roll_out(
    dm: DecisionModel,
    desired: DesiredRevision,
    running: list[RunningRollout],
    retry: str | None,
    overdue: bool,
) -> Decision:
    """The desired revision rolls out: its run found among ``running`` or started (``retry``:
    the new retry token it consumes), the runs of other revisions superseded."""
    status = dm.status
    target = workflow_id(dm_ref(dm), desired.requested_hash, retry)
    # The rollout of this revision may run under the ID of the unresolved identity (``u…``):
    # it reports the resolved hash in its DmRevision search attribute and in candidateRevision.
    candidate = status.candidate_revision if status else None
    is_candidate = candidate is not None and desired.is_revision(candidate)
    # The hashes this revision goes by: the requested one, and the candidate's resolved one.
    ours = {desired.requested_hash, *([candidate.hash] if candidate and is_candidate else [])}
    mine = [r for r in running if r.workflow_id == target or (retry is None and r.revision in ours)]
    if not mine and retry is None and is_candidate and len(running) == 1:
        mine = list(running)  # visibility not yet showing the upserted revision
    if mine:
        target = mine[0].workflow_id
    # Runs of other revisions are superseded; earlier runs of this revision (a retry's
    # predecessor finishing its rollback) end by themselves.
    others = tuple(
        r.workflow_id
        for r in running
        if r.workflow_id != target and (r.revision is None or r.revision not in ours)
    )
    # The revision hash leaves the policy out: a run of the right revision may still enforce
    # another policy (started by hand, or spec.rollout changed since). It is replaced as a new
    # revision would be; its activities would refuse it anyway (decisionmodel.rollout.policy_check).
    policy = rollout_policy(dm).digest()
    replaced = tuple(
        (r.workflow_id, r.policy) for r in mine if r.policy is not None and r.policy != policy
    )
    why = "running" if mine else "new revision"
    if replaced:
        why = f"policy {policy} of spec.rollout is not the running rollout's"
    waiting = () if mine or overdue else tuple(r.workflow_id for r in running)
    if waiting:
        why = f"new revision, once {', '.join(waiting)} has closed"
    return Decision(
        start=not mine and not waiting,
        cancel=others + tuple(wid for wid, _ in replaced),
        consume_retry=retry,
        target_id=target,
        why=why,
        replaced=replaced,
        policy=policy,
        waiting=waiting,
    )

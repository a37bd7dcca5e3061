"""Restart discipline: a rollout that ended without a verdict is started again, but not for ever.

A rollout workflow ends with a verdict (Promoted, RolledBack, Failed, Superseded, Aborted: the
workflow completed) or without one: terminated by hand, timed out, failed by a bug, or
cancelled before it could compensate. Without a verdict nothing records ``failedRevision``,
so the next reconcile would start the same revision again at once, and a deterministic failure
would loop for ever.

So before starting a workflow ID again the controller reads that ID's closed runs: after the
n-th run in a row that ended without a verdict it waits ``base * 2^(n-1)`` from that run's close
(capped), and past ``max_restarts`` it stops and records the revision as failed with reason
``RolloutRestartsExhausted``, naming the workflow ID and the fix (``decisionmodel.io/retry``,
which starts a new workflow ID and so a new count). A completed run resets the count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from controller.temporal.rollouts import ClosedRun

# Temporal's WorkflowExecutionStatus names of runs that ended without the workflow's own verdict.
VERDICTLESS: Final = frozenset({"TERMINATED", "TIMED_OUT", "FAILED", "CANCELED"})


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 3
    backoff: timedelta = timedelta(seconds=30)
    max_backoff: timedelta = timedelta(minutes=10)


@dataclass(frozen=True)
class RestartPlan:
    """``start`` now; or wait ``wait``; or ``exhausted`` (record the failure, never start)."""

    start: bool
    restarts: int = 0  # verdictless runs in a row so far (0: a first start)
    wait: timedelta = timedelta(0)
    exhausted: bool = False
    last_status: str | None = None


def verdictless_in_a_row(runs: list[ClosedRun]) -> list[ClosedRun]:
    """The latest runs that ended without a verdict, newest first, up to a completed one."""
    streak: list[ClosedRun] = []
    for run in sorted(runs, key=lambda r: r.close_time, reverse=True):
        if run.status not in VERDICTLESS:
            break
        streak.append(run)
    return streak


def plan_restart(runs: list[ClosedRun], now: datetime, policy: RestartPolicy) -> RestartPlan:
    streak = verdictless_in_a_row(runs)
    if not streak:
        return RestartPlan(start=True)
    count, last = len(streak), streak[0]
    if count > policy.max_restarts:
        return RestartPlan(start=False, restarts=count, exhausted=True, last_status=last.status)
    delay = min(policy.backoff * 2 ** (count - 1), policy.max_backoff)
    wait = last.close_time + delay - now
    if wait > timedelta(0):
        return RestartPlan(start=False, restarts=count, wait=wait, last_status=last.status)
    return RestartPlan(start=True, restarts=count, last_status=last.status)


def exhausted_message(workflow_id: str, plan: RestartPlan, policy: RestartPolicy) -> str:
    return (
        f"rollout workflow {workflow_id} ended without a verdict ({plan.last_status}) "
        f"{plan.restarts} times in a row; dmrollout stopped restarting it after "
        f"{policy.max_restarts} restarts. Read its history in the Temporal UI (or "
        f"`dmrollout history`), fix the cause, then retry: kubectl annotate dm <name> "
        'decisionmodel.io/retry="$(date +%s)" --overwrite'
    )

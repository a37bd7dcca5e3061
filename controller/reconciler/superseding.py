"""A new revision starts once the runs it replaces have closed (controller.reconciler.decide),
within a bound.

A stopping run removes its candidate before it closes, and it may be the very revision the
spec now asks for under another name (a pinned digest and the tag it pins: explorer seeds 3458,
4416, 4423, 4437). Started beside it, the new run acted on the same objects as the old one's
cleanup, and the old run's last status writes could land after the new run's first. Waiting
costs the seconds a cleanup takes. A cleanup retried for ever (an admission policy refusing
deletes: CleanupPending says so) or a run no worker serves (RolloutStranded) would hold the new
revision for ever, so after ``STOP_WAIT_SECONDS`` it starts beside the old run, as before, with
a Warning Event naming it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.temporal.rollouts import RunningRollout
from decisionmodel.api import DecisionModel

STOP_WAIT_SECONDS = 120.0
# How soon to look again while waiting: the stopping run's last status write (a watch event)
# comes before its cleanup ends, so nothing else wakes the reconcile when it closes.
RECHECK_SECONDS = 2.0


@dataclass
class Superseding:
    """Since when each DecisionModel's next run has waited (monotonic; per process: a new
    leader waits its own bound, which only delays, never doubles, a start)."""

    bound: float = STOP_WAIT_SECONDS
    monotonic: Callable[[], float] = time.monotonic
    _since: dict[str, float] = field(default_factory=dict)

    def overdue(self, key: str, waiting: tuple[str, ...]) -> bool:
        if not waiting:
            self._since.pop(key, None)
            return False
        since = self._since.setdefault(key, self.monotonic())
        return self.monotonic() - since > self.bound

    def forget(self, key: str) -> None:
        self._since.pop(key, None)


def closing_run(dm: DecisionModel, running: list[RunningRollout], target: str | None) -> str | None:
    """The run status.rollout names when the reconcile did not look at it: it recorded its
    end (an abort, a rollback) and may still be removing its candidate. The reconcile only
    describes runs in a rollout phase (an idle DecisionModel costs Temporal nothing); this one
    is described only when a start is about to happen."""
    status = dm.status
    wid = status.rollout.workflow_id if status and status.rollout else None
    if not wid or wid == target or any(r.workflow_id == wid for r in running):
        return None
    return wid


def waiting_message(waiting: tuple[str, ...]) -> str:
    runs = ", ".join(f"rollout workflow {wid}" for wid in waiting)
    return (
        f"starts the new revision once {runs} has closed (a stopping rollout removes its "
        f"candidate first; after {STOP_WAIT_SECONDS:.0f}s the new one starts beside it)"
    )


def overdue_message(waiting: tuple[str, ...]) -> str:
    runs = ", ".join(f"rollout workflow {wid}" for wid in waiting)
    return (
        f"{runs} did not close within {STOP_WAIT_SECONDS:.0f}s of being stopped; the new "
        "revision starts beside it. Look at its CleanupPending condition or its history in the "
        "Temporal UI for what holds it (`dmrollout status`)"
    )

"""ModelNotFound is re-resolved (seed 001: "requeued and re-resolved"), with a bounded backoff.

A tag that does not exist yet usually will: the model is being published, or a typo is being
fixed upstream. A revision that failed for it is started again by itself, 30 s after the
failure, then 60 s, 120 s, ... at most every 10 minutes, without a retry annotation; any other
failure still waits for a spec change or ``decisionmodel.io/retry``. The attempt count is kept
in memory (a controller restart starts the backoff again, harmlessly).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from decisionmodel.api.status import FailedRevisionStatus
from decisionmodel.vocabulary import Reason

FIRST: Final = timedelta(seconds=30)
LONGEST: Final = timedelta(minutes=10)


@dataclass
class ReResolves:
    # DecisionModel key -> (the failed revision's hash, re-resolves started for it).
    attempts: dict[str, tuple[str, int]] = field(default_factory=dict)

    def due_at(self, key: str, failed: FailedRevisionStatus | None) -> datetime | None:
        """When ``failed`` is next re-resolved; None when it is not a ModelNotFound."""
        if failed is None or failed.reason != Reason.MODEL_NOT_FOUND or failed.failed_at is None:
            self.attempts.pop(key, None)
            return None
        hash_, count = self.attempts.get(key, (failed.hash, 0))
        if hash_ != failed.hash:
            count = 0
        wait: timedelta = min(FIRST * 2**count, LONGEST)
        due: datetime = failed.failed_at + wait
        return due

    def started(self, key: str, failed: FailedRevisionStatus) -> None:
        hash_, count = self.attempts.get(key, (failed.hash, 0))
        self.attempts[key] = (failed.hash, count + 1 if hash_ == failed.hash else 1)

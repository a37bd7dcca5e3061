"""What an evaluation phase keeps in the worker process only: each case's record (never in a
heartbeat, a result or history).

A retried attempt on the same worker (a Pod lost, a QUEUE_FULL streak) finds them and resumes
where the heartbeat says; an attempt on another worker finds none and runs its phase again from
the first case, because intervals over a part of the cases would not be the intervals of the run.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from decisionmodel.evaluation.case_records import CaseRecord

# Phases kept per worker process: a few rollouts' worth (500 cases is ~100 KiB of records).
STORE_SIZE: Final = 32

PhaseKey = tuple[str, ...]


@dataclass
class PhaseMemory:
    """The records of the cases run so far, in dataset order."""

    records: list[CaseRecord] = field(default_factory=list)

    def add(self, record: CaseRecord) -> None:
        self.records.append(record)


class PhaseMemoryStore:
    """Per (activity run, phase, revision, dataset digest), least recently used dropped first."""

    def __init__(self, size: int = STORE_SIZE) -> None:
        self._size = size
        self._kept: OrderedDict[PhaseKey, PhaseMemory] = OrderedDict()

    def memory(self, key: PhaseKey, done: int) -> PhaseMemory:
        """The phase's memory when it holds exactly the ``done`` cases the heartbeat counts,
        else a new empty one."""
        kept = self._kept.get(key)
        if kept is None or len(kept.records) < done:
            kept = PhaseMemory()
        elif len(kept.records) > done:
            # The server's last heartbeat lags the cases counted here (heartbeats are
            # throttled): keep the first ``done``, as the attempt resumes there.
            kept = PhaseMemory(kept.records[:done])
        self._kept[key] = kept
        self._kept.move_to_end(key)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return kept

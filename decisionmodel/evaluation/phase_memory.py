"""What an evaluation phase keeps in the worker process only: each case's record and the ECE
bootstrap sums fed case by case (never in a heartbeat, a result or history).

A retried attempt on the same worker (a Pod lost, a QUEUE_FULL streak) finds them and resumes
where the heartbeat says; an attempt on another worker finds none and runs its phase again from
the first case, because intervals over a part of the cases would not be the intervals of the run.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.ece_bootstrap import EceResamples

# Phases kept per worker process: a few rollouts' worth (500 cases is ~100 KiB of records and
# ~240 KiB of bootstrap sums).
STORE_SIZE: Final = 32

PhaseKey = tuple[str, ...]


@dataclass
class PhaseMemory:
    """``resamples`` only with intervals (``seed`` given): feeding them costs ~0.5 ms a case."""

    resamples: EceResamples | None
    records: list[CaseRecord] = field(default_factory=list)

    def add(self, record: CaseRecord) -> None:
        if self.resamples is not None:
            self.resamples.add(len(self.records), record)
        self.records.append(record)


class PhaseMemoryStore:
    """Per (activity run, phase, revision, dataset digest), least recently used dropped first."""

    def __init__(self, size: int = STORE_SIZE) -> None:
        self._size = size
        self._kept: OrderedDict[PhaseKey, PhaseMemory] = OrderedDict()

    def memory(self, key: PhaseKey, done: int, seed: int | None) -> PhaseMemory:
        """The phase's memory when it holds exactly the ``done`` cases the heartbeat counts,
        else a new empty one."""
        kept = self._kept.get(key)
        seen = kept.resamples.seed if kept is not None and kept.resamples is not None else None
        if kept is None or len(kept.records) < done or seen != seed:
            kept = PhaseMemory(EceResamples(seed) if seed is not None else None)
        elif len(kept.records) > done:
            # The server's last heartbeat lags the cases counted here (heartbeats are
            # throttled): keep the first ``done``, as the attempt resumes there.
            kept = _first(kept, done, seed)
        self._kept[key] = kept
        self._kept.move_to_end(key)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return kept


def _first(memory: PhaseMemory, done: int, seed: int | None) -> PhaseMemory:
    again = PhaseMemory(EceResamples(seed) if seed is not None else None)
    for record in memory.records[:done]:
        again.add(record)
    return again

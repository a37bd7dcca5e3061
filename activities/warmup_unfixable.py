"""A candidate whose Pods fail the gate for a reason waiting cannot fix (issue 22).

``warmup_inspect`` keeps probing a candidate whose Pods are not model-ready until the start
deadline (10 minutes by default), because most reasons pass: a model still loading, a pin not
yet set. Two do not: every Pod reporting another digest (the tag moved under the pinned one)
or another device class (a runtime that fell back to CPU on a node without the GPU); nor a runtime
that answers 500 MODEL_LOAD_FAILED to every load (a device or memory limit it cannot load with:
holding the Pods, GPUs among them, for the whole deadline helps nobody; issue 34). When every
live candidate Pod has said the same such thing on ``checks`` rounds in a row, the step fails
at once with that reason (the workflow rolls the candidate back, the stable serves), instead of
waiting out the deadline. A Pod that is still pending, or one that passes, keeps the deadline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from decisionmodel.engine.runtime_client import GateVerdict
from decisionmodel.errors import DeviceMismatch, DigestMismatch, DmrolloutError, ModelLoadFailed
from decisionmodel.vocabulary import Reason

UNFIXABLE: Final[dict[Reason, type[DmrolloutError]]] = {
    Reason.DIGEST_MISMATCH: DigestMismatch,
    Reason.DEVICE_MISMATCH: DeviceMismatch,
    Reason.MODEL_LOAD_FAILED: ModelLoadFailed,
}
# Rounds in a row with the same verdict before it counts (a round follows each Pod change and
# each poll interval, so a few seconds; enough for a runtime that answered mid-load).
UNFIXABLE_CHECKS: Final = 5


@dataclass
class UnfixableWatch:
    checks: int = UNFIXABLE_CHECKS
    # Pod name -> (the unfixable reason it keeps reporting, rounds in a row).
    streak: dict[str, tuple[Reason, int]] = field(default_factory=dict)

    def see(self, live: list[str], judged: dict[str, GateVerdict]) -> DmrolloutError | None:
        """After one round: the error to fail the step with, or None to go on waiting."""
        for name, found in judged.items():
            before = self.streak.get(name)
            kind = _kind(found)
            if kind in UNFIXABLE:
                count = before[1] + 1 if before and before[0] == kind else 1
                self.streak[name] = (kind, count)
            else:
                self.streak.pop(name, None)
        for name in [n for n in self.streak if n not in live]:
            del self.streak[name]  # replaced or gone: its successor starts afresh
        if not live or any(self.streak.get(n, (None, 0))[1] < self.checks for n in live):
            return None
        reason = self.streak[live[0]][0]
        example = next(v.message for n, v in judged.items() if n in live and _kind(v) == reason)
        return UNFIXABLE[reason](
            f"every candidate Pod ({len(live)}) reported {reason} on {self.checks} checks in a "
            f"row ({example}); waiting cannot fix it, so the candidate is rolled back now "
            "instead of at the start deadline"
        )


def _kind(found: GateVerdict) -> Reason:
    return Reason.MODEL_LOAD_FAILED if found.load_failed else found.reason

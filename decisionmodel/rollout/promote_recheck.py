"""Promote's re-check of the candidate's Pods, judged (pure): go on, wait, or refuse.

Right before the promotion is recorded, each model-ready Pod of the candidate is inspected
again (``/api/ps``). An *answer* that shows the model lost, another digest, device or pin is a
verdict on the candidate: with fewer than ``replicas`` Pods still passing, the promotion is
refused at once and the candidate rolled back. A Pod that does *not answer* (a transport
error, a 401 while an API key rotates) says nothing about the candidate, only about the path
to it: the re-check waits for it, as the steady state and the post-promotion watch tolerate
it (REFERENCE "Readiness gate": transport errors are tolerated, a lost model flips at once),
for the same window, counted from the first unanswered round across the activity's attempts.
Past the window it is refused like a lost model, with how long it did not answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from decisionmodel.rollout.unanswered import outside

Outcome = Literal["pass", "wait", "refuse"]


@dataclass(frozen=True)
class Round:
    """One inspection of the candidate's model-ready Pods."""

    ready: int
    unanswered: list[str]  # "<pod>: <why>" of Pods that did not answer
    lost: list[str]  # "<pod>: <reason> (<message>)" of Pods whose answer fails the gate


@dataclass(frozen=True)
class Judgement:
    outcome: Outcome
    message: str = ""


def judge(seen: Round, replicas: int, candidate: str, waited: float, window: float) -> Judgement:
    """``waited``: seconds since the first round with unanswered Pods (0 in that round)."""
    if seen.ready >= replicas:
        return Judgement("pass")
    shortfall = f"candidate {candidate} is no longer model-ready ({seen.ready}/{replicas})"
    fix = (
        "it is rolled back and the stable keeps serving; set decisionmodel.io/retry to roll it "
        "out again"
    )
    if seen.ready + len(seen.unanswered) < replicas:
        said = "; ".join(seen.lost) or "no model-ready Pod"
        return Judgement("refuse", f"{shortfall} while awaiting promotion: {said}; {fix}")
    quiet = "; ".join(seen.unanswered)
    if outside(waited, window):
        return Judgement(
            "refuse",
            f"{shortfall}: its Pods did not answer the re-check before promotion for "
            f"{window:.0f}s ({quiet}); {fix}",
        )
    return Judgement(
        "wait",
        f"the re-check before promotion cannot reach {quiet}; the promotion waits for an "
        f"answer ({waited:.0f}s of {window:.0f}s), then rolls the candidate back; check the "
        "network from the worker to the Pods (a NetworkPolicy) and the runtime's logs",
    )

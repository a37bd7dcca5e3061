"""The post-promotion watch's judgement: when a new stable has really failed (pure).

The watch (``activities/watch_promoted.py``) inspects the new stable's Pods every period and
hands what it saw here. A promotion is rolled back only for a reason that waiting would not
fix, never because the fleet changed size under it:

- a Pod that answers with the wrong digest, device or pin is a *gate failure*; when there are
  fewer passing Pods than the live desired replicas (the DecisionModel's ``spec.replicas`` as
  it is now, so an HPA or ``kubectl scale`` down is respected) while gate failures are present,
  that is a strike, and ``strikes`` in a row fail the watch;
- a serving Pod that does not answer (transport error, 401 during an API-key rotation) is
  tolerated for ``error_window`` seconds, the steady state's window, and is left in
  the Service meanwhile; past the window it counts as a gate failure;
- a Pod that never passed its gate (a replacement or a scale-up still warming) is neither
  passing nor failing, unless it reports a gate failure;
- no passing Pod at all for ``error_window`` seconds, while some are desired, fails the watch;
- *an outage*: no Pod passing, a Pod that served in this watch now failing or not answering,
  while Pods of the previous revision (kept warm for the watch, looked at in the same round)
  pass their gate, fails the watch at once. Waiting is what the strikes and the error window
  are for when there is nothing to go back to; here the Service would select only failing Pods
  while a revision that answers is at hand (issue 34: 9 of 21 probes through the Service failed
  waiting for a second strike, and Pods that stopped answering kept the Service for the whole
  error window).

A judgement still open when the window ends (a Pod not answering inside its ``error_window``,
no Pod passing, a strike) is *pending*: the watch goes on until it is decided, at most one
``error_window`` and the strikes past the window. Issue 34: with a window shorter than the
error window (1m < 180 s), a new stable whose Pods all crashed or stopped answering was never
judged; the watch held, and the previous revision was deleted: an outage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from decisionmodel.engine.runtime_client import GateVerdict
from decisionmodel.rollout.unanswered import AnswerWindow, outside
from decisionmodel.vocabulary import Reason


@dataclass(frozen=True)
class PodLook:
    """One inspection of one Pod: who, whether it was serving (gate True), what it said."""

    uid: str
    name: str
    serving: bool
    verdict: GateVerdict


@dataclass(frozen=True)
class Judgement:
    failed: bool
    passing: int
    # Pods whose verdict is tolerated for now: their gate is left as it is.
    tolerated: frozenset[str]
    message: str = ""


@dataclass
class WatchJudge:
    error_window: float
    strikes_needed: int = 2
    unanswered: AnswerWindow = field(init=False)
    no_ready_since: float | None = None
    strikes: int = 0
    # Pods seen serving (gate True, or passing) in this watch: once its gate is set False, a
    # Pod that lost its model is not "still warming".
    served: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.unanswered = AnswerWindow(self.error_window)

    def judge(self, looks: list[PodLook], desired: int, now: float, fallback: int = 0) -> Judgement:
        """``fallback``: the previous revision's Pods that passed their gate in this round."""
        passing = sum(1 for look in looks if look.verdict.ready)
        tolerated, failures = self._sort(looks, now)
        outage = self._outage(looks, passing, desired, fallback)
        if outage is not None:
            return Judgement(True, passing, tolerated, outage)
        self.strikes = self.strikes + 1 if failures and passing < desired else 0
        if self.strikes >= self.strikes_needed:
            why = "; ".join(failures)
            return Judgement(
                True,
                passing,
                tolerated,
                f"{self.strikes} checks in a row with {passing}/{desired} Pods passing its "
                f"readiness gate ({why})",
            )
        gone = self._without_ready(passing, desired, now)
        if gone is not None:
            return Judgement(True, passing, tolerated, gone)
        return Judgement(False, passing, tolerated)

    def pending(self, now: float) -> bool:
        """Whether a judgement is still open: ending the watch now would hold a promotion that
        the next checks could fail. Each one closes within ``error_window`` (and the strikes)."""
        open_errors = self.unanswered.open(now)
        none_ready = self.no_ready_since is not None and not outside(
            now - self.no_ready_since, self.error_window
        )
        return open_errors or none_ready or self.strikes > 0

    def _sort(self, looks: list[PodLook], now: float) -> tuple[frozenset[str], list[str]]:
        """The Pods tolerated for now, and the gate failures (named with their reason)."""
        tolerated: set[str] = set()
        failures: list[str] = []
        # A Pod that answered again (or went away) is forgiven.
        self.unanswered.only(look.uid for look in looks if look.verdict.unanswered)
        for look in looks:
            said = f"{look.name}: {look.verdict.reason} ({look.verdict.message[:200]})"
            if look.serving or look.verdict.ready:
                self.served.add(look.uid)
            if look.verdict.ready:
                continue
            if look.uid not in self.served and look.verdict.reason == Reason.PROBE_ERROR:
                tolerated.add(look.uid)  # still warming: not a verdict on the revision
            elif not look.verdict.unanswered:
                failures.append(said)  # an answer: wrong digest, device, pin, or model lost
            elif self.unanswered.tolerates(look.uid, now):
                tolerated.add(look.uid)
            else:
                failures.append(f"{said} for {self.error_window:.0f}s")
        return frozenset(tolerated), failures

    def _outage(
        self, looks: list[PodLook], passing: int, desired: int, fallback: int
    ) -> str | None:
        """No Pod serves while the previous revision's do: the Pods that served in this watch
        and fail now, named with what they said; None when that is not the case. A Pod that
        never served and says nothing but a probe error (a replacement warming, as ``_sort``
        tells) is no evidence: it may serve in a moment."""
        if passing > 0 or desired == 0 or fallback == 0:
            return None
        failing = [
            f"{look.name}: {look.verdict.reason} ({look.verdict.message[:200]})"
            for look in looks
            if look.uid in self.served or look.verdict.reason != Reason.PROBE_ERROR
        ]
        if not failing:
            return None
        return (
            f"no Pod serves ({'; '.join(failing)}) while {fallback} Pod(s) of the previous "
            "revision pass their readiness gate"
        )

    def _without_ready(self, passing: int, desired: int, now: float) -> str | None:
        if passing > 0 or desired == 0:
            self.no_ready_since = None
            return None
        if self.no_ready_since is None:
            self.no_ready_since = now
        if not outside(now - self.no_ready_since, self.error_window):
            return None
        return f"no Pod passed its readiness gate for {self.error_window:.0f}s ({desired} desired)"

"""Always-valid gates: each gate judged after every case by betting, so that looking after
every case, stopping as soon as the gate is decided, adding cases later or retrying keeps each
verdict's error within its bound (issue 35 item 4).

A gate "the mean of x is at least t" (side ``min``; ``max`` mirrors it) has two bettors, each
starting with wealth 1 and betting on every case's outcome x in [lo, hi] before seeing it:

- the pass bettor bets the mean is above t: wealth *= 1 + lam * (x - t);
- the fail bettor bets it is below: wealth *= 1 - lam * (x - t).

Under the pass bettor's null (the true mean is at most t) its wealth is a nonnegative
supermartingale whatever it bets, as long as the bet is chosen before x is seen; by Ville's
inequality it ever reaches 1/alpha with probability at most alpha, at any look and any
stopping rule. The gate is Passed once the pass bettor's wealth reaches 1/alpha and Failed once
the fail bettor's does; Inconclusive while neither has. This is testing by betting (Shafer &
Vovk; Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting", JRSS-B
2024), the construction behind the confidence sequences always-valid experimentation platforms
use.

The bet: the growth-rate-adaptive (aGRAPA) one, lam = (m - t) / (v + (m - t)^2) from the mean m
and variance v of the outcomes before this one, clipped to [0, TRUNCATION / (t - lo)] (so a
factor is never below 1 - TRUNCATION). For the first few cases m and v are pulled towards the
null's boundary: a mean of t, with the largest variance a mean of t allows in [lo, hi],
(t - lo)(hi - t) (Bhatia-Davis). So the first bet is 0 and bets grow only as the evidence moves
away from t. (Pulled towards the middle of [lo, hi] instead, a gate at 0.9 spent its first
cases betting against itself: bench/gate_looks.py measured 228 cases on average to pass a
candidate one margin above, 216 now; the likelihood-ratio bettor that knows the truth, the
floor of any always-valid test, 202.) Any predictable bet keeps the guarantee, so a test
continued from a ledger written with the older bet stays valid.

A case of several questions contributes its share of right questions (x = correct / pairs):
the null is then "each case's expected share is at most t", the unit the fixed-n intervals use
too (cases, not questions, are independent).

Pure, and the state is a few numbers (no case content), so it can be carried from one
evaluation to the next (:meth:`SequentialGate.to_wire`): an evaluation of the same revision on
more cases continues the same bettors instead of starting a fresh test. Only **new** cases may
be fed to a continued gate: the argument needs each outcome to be a fresh draw given the past,
and feeding the same cases again (a retry on the same dataset) multiplies the wealth on
evidence already counted. A ledger must record which cases it consumed and skip them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Final, Literal

from decisionmodel.vocabulary import EvaluationResult

Side = Literal["min", "max"]
# The most of its wealth a bettor stakes on one case (the literature's c = 1/2): more grows
# faster when the bet is right and risks ruin faster when it is not.
TRUNCATION: Final = 0.5
# How many pseudo-cases at the threshold the bet's mean and variance start from.
PRIOR_CASES: Final = 1.0


@dataclass(frozen=True)
class Bettor:
    """One bettor's state: its direction (+1 bets the mean is above the threshold, -1 below),
    the log of its wealth, and the running sums its next bet is computed from."""

    direction: int
    log_wealth: float = 0.0
    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    def stake(self, threshold: float, lo: float, hi: float) -> float:
        """The bet on the next outcome, from the outcomes before it only (predictable)."""
        weight = PRIOR_CASES + self.n
        mean = (PRIOR_CASES * threshold + self.total) / weight
        spread = self.squares - self.total**2 / self.n if self.n else 0.0
        widest = (threshold - lo) * (hi - threshold)
        var = max((PRIOR_CASES * widest + spread) / weight, 1e-12)
        edge = self.direction * (mean - threshold)
        room = (threshold - lo) if self.direction > 0 else (hi - threshold)
        cap = TRUNCATION / room if room > 0 else 1e12
        return min(max(edge / (var + edge**2), 0.0), cap)

    def after(self, x: float, threshold: float, lo: float, hi: float) -> Bettor:
        lam = self.stake(threshold, lo, hi)
        factor = 1.0 + lam * self.direction * (x - threshold)
        return replace(
            self,
            log_wealth=self.log_wealth + math.log(max(factor, 1e-300)),
            n=self.n + 1,
            total=self.total + x,
            squares=self.squares + x * x,
        )


@dataclass(frozen=True)
class SequentialGate:
    """A gate judged on the outcomes so far: ``threshold`` on the mean of x in [lo, hi], side
    ``min`` (passing means the mean is at least it) or ``max``; ``alpha`` each side's error."""

    threshold: float
    side: Side
    alpha: float
    lo: float = 0.0
    hi: float = 1.0
    passer: Bettor | None = None
    failer: Bettor | None = None

    def __post_init__(self) -> None:
        up = 1 if self.side == "min" else -1
        if self.passer is None:
            object.__setattr__(self, "passer", Bettor(direction=up))
        if self.failer is None:
            object.__setattr__(self, "failer", Bettor(direction=-up))

    @property
    def cases(self) -> int:
        assert self.passer is not None
        return self.passer.n

    @property
    def mean(self) -> float:
        """The mean outcome of the cases so far (0 before any)."""
        assert self.passer is not None
        return self.passer.total / self.passer.n if self.passer.n else 0.0

    def after(self, x: float) -> SequentialGate:
        """The gate once the outcome ``x`` of one more case is seen."""
        if not self.lo <= x <= self.hi:
            raise ValueError(f"outcome {x} outside [{self.lo}, {self.hi}]")
        assert self.passer is not None and self.failer is not None
        t, lo, hi = self.threshold, self.lo, self.hi
        return replace(
            self, passer=self.passer.after(x, t, lo, hi), failer=self.failer.after(x, t, lo, hi)
        )

    def verdict(self) -> EvaluationResult:
        assert self.passer is not None and self.failer is not None
        bar = math.log(1 / self.alpha)
        if self.passer.log_wealth >= bar:
            return EvaluationResult.PASSED
        if self.failer.log_wealth >= bar:
            return EvaluationResult.FAILED
        return EvaluationResult.INCONCLUSIVE

    def to_wire(self) -> dict[str, Any]:
        """The state as JSON-safe numbers (a ledger's entry: no case content)."""
        return asdict(self)

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> SequentialGate:
        bettors = {k: Bettor(**raw[k]) for k in ("passer", "failer")}
        return cls(**{**raw, **bettors})

    def evidence(self) -> tuple[float, float]:
        """The pass and fail bettors' wealth (1 at the start; the verdict at 1/alpha)."""
        assert self.passer is not None and self.failer is not None
        return math.exp(self.passer.log_wealth), math.exp(self.failer.log_wealth)


def run_until_decided(gate: SequentialGate, outcomes: list[float]) -> tuple[SequentialGate, int]:
    """Feed ``outcomes`` one by one and stop at the first verdict (or their end): the gate
    and how many were used."""
    for i, x in enumerate(outcomes):
        gate = gate.after(x)
        if gate.verdict() != EvaluationResult.INCONCLUSIVE:
            return gate, i + 1
    return gate, len(outcomes)

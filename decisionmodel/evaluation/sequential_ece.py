"""Always-valid ECE gates (``maxECE``, ``maxECEIncrease`` with ``sequential``; issue 35 item 4).

The binned ECE is not the mean of one outcome per case, so the betting test of sequential.py
does not apply as it is. With ``x_b`` a case's calibration gap in bin ``b`` (the sum of
``correct - confidence`` over its points in that bin, divided by its points), the case-weighted
ECE is ``Σ_b |μ_b|``, ``μ_b = E x_b`` (the points' ECE when every case has as many points: the
sequential tests count cases, not questions). For any signs ``sigma``, ``w = Σ_b sigma_b x_b``
is one outcome in [-1, 1] per case whose mean is ``Σ_b sigma_b μ_b``, and the ECE is that mean
at the true signs ``sigma* = sign(μ)``. Both bounds are confidence sequences (they hold at
every case at once) for such a ``w`` by the predictable plug-in empirical-Bernstein
construction (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by
betting", JRSS-B 2024, Theorem 2), with bets ``λ_i`` that do not depend on the signs:

- **upper** (a pass needs it at or below ``maxECE``): at the unknown ``sigma*``, ``Σ λ_i w_i``
  is at most ``Σ_b |Σ_i λ_i x_b,i|`` and the variance term ``w_i²`` at most
  ``a_i² = (Σ_b |x_b,i|)²``, so
  ``U = (Σ_b |Σ_i λ_i x_b,i| + 2 log(1/alpha) + 2 Σ a_i² ψ(λ_i)) / Σ λ_i`` bounds the ECE with
  probability ``1 - alpha`` at every case (``ψ(λ) = (-log(1 - λ) - λ) / 4``). One statistic, not
  one interval per bin: no union over the bins.
- **lower** (a fail needs it above): the signs ``s_i`` the cases before case ``i`` show (never its
  own: no selection bias) give ``w_i = Σ_b s_b,i x_b,i`` whose conditional mean is at most the
  ECE, so ``L = (Σ λ_i w_i - 2 log(1/alpha) - 2 Σ w_i² ψ(λ_i)) / Σ λ_i`` bounds it from below.
  Noise does not add to it: a calibrated model's ``L`` stays below 0 but with probability
  ``alpha``, so it is not failed for the plug-in's upward bias (the fixed-n gate's issue).

``maxECEIncrease`` compares the candidate's bounds with the stable's, each at half the error:
passed when ``U(candidate) - L(stable) <= margin``, failed when ``L(candidate) - U(stable) >
margin``. A verdict is kept once reached (each bound holds at every case, so the first
crossing stands). The state is a few sums per revision (numbers only), carried by the ledger
like the betting tests'; the bets are predictable whatever level they were sized for, so a
test continued at a stricter confidence stays valid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.metrics import ECE_BINS
from decisionmodel.vocabulary import EvaluationResult, Gate

# The most a bet may be (the paper's c).
BET_CAP: Final = 0.75
# The gates these bounds judge, by their spec names.
ECE_GATES: Final = (str(Gate.MAX_ECE), str(Gate.MAX_ECE_INCREASE))


def _psi(lam: float) -> float:
    return (-math.log(1 - lam) - lam) / 4


def case_gaps(record: CaseRecord) -> list[float]:
    """``x_b`` of one case: its points' ``correct - confidence`` per bin, over its points."""
    gaps = [0.0] * ECE_BINS
    for b, confidence, right in record.points:
        gaps[b] += right - confidence
    m = len(record.points)
    return [g / m for g in gaps] if m else gaps


@dataclass(frozen=True)
class EceSequence:
    """One revision's running sums: what both bounds are computed from."""

    alpha: float
    n: int = 0
    spread: float = 0.0  # Σ (a_i / 2)², the bets' variance estimate
    bets: float = 0.0  # Σ λ_i
    betted: tuple[float, ...] = field(default=(0.0,) * ECE_BINS)  # Σ λ_i x_b,i
    gaps: tuple[float, ...] = field(default=(0.0,) * ECE_BINS)  # Σ x_b,i: the signs
    upper_penalty: float = 0.0  # Σ a_i² ψ(λ_i)
    signed: float = 0.0  # Σ λ_i w_i, predictable signs
    lower_penalty: float = 0.0  # Σ w_i² ψ(λ_i)

    @property
    def cases(self) -> int:
        return self.n

    def after(self, record: CaseRecord) -> EceSequence:
        x = case_gaps(record)
        t = self.n + 1
        var = (0.25 + self.spread) / t
        lam = min(math.sqrt(2 * math.log(1 / self.alpha) / (var * t * math.log(1 + t))), BET_CAP)
        a = sum(abs(v) for v in x)
        w = sum((1.0 if g >= 0 else -1.0) * v for g, v in zip(self.gaps, x, strict=True))
        return replace(
            self,
            n=t,
            spread=self.spread + (a / 2) ** 2,
            bets=self.bets + lam,
            betted=tuple(b + lam * v for b, v in zip(self.betted, x, strict=True)),
            gaps=tuple(g + v for g, v in zip(self.gaps, x, strict=True)),
            upper_penalty=self.upper_penalty + a * a * _psi(lam),
            signed=self.signed + lam * w,
            lower_penalty=self.lower_penalty + w * w * _psi(lam),
        )

    def bounds(self) -> tuple[float, float]:
        """(lower, upper) of the case-weighted ECE, within [0, 1]."""
        if self.bets <= 0:
            return 0.0, 1.0
        bar = 2 * math.log(1 / self.alpha)
        upper = (sum(abs(b) for b in self.betted) + bar + 2 * self.upper_penalty) / self.bets
        lower = (self.signed - bar - 2 * self.lower_penalty) / self.bets
        return max(lower, 0.0), min(upper, 1.0)

    def estimate(self) -> float:
        return sum(abs(g) for g in self.gaps) / self.n if self.n else 0.0

    def to_wire(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "n": self.n,
            "spread": self.spread,
            "bets": self.bets,
            "betted": list(self.betted),
            "gaps": list(self.gaps),
            "upper_penalty": self.upper_penalty,
            "signed": self.signed,
            "lower_penalty": self.lower_penalty,
        }

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> EceSequence:
        return cls(
            alpha=float(raw["alpha"]),
            n=int(raw["n"]),
            spread=float(raw["spread"]),
            bets=float(raw["bets"]),
            betted=tuple(float(v) for v in raw["betted"]),
            gaps=tuple(float(v) for v in raw["gaps"]),
            upper_penalty=float(raw["upper_penalty"]),
            signed=float(raw["signed"]),
            lower_penalty=float(raw["lower_penalty"]),
        )


@dataclass(frozen=True)
class EceGate:
    """``maxECE`` (``stable`` None) or ``maxECEIncrease``: the sequences and the verdict, kept
    once reached (each bound holds at every case, so the first crossing stands)."""

    threshold: float
    candidate: EceSequence
    stable: EceSequence | None = None
    decided: EvaluationResult = EvaluationResult.INCONCLUSIVE

    @classmethod
    def fresh(cls, threshold: float, alpha: float, increase: bool) -> EceGate:
        # An increase spends half its error on each revision's bounds.
        share = alpha / 2 if increase else alpha
        return cls(threshold, EceSequence(share), EceSequence(share) if increase else None)

    @property
    def cases(self) -> int:
        return self.candidate.cases

    def verdict(self) -> EvaluationResult:
        return self.decided

    def bounds(self) -> tuple[float, float]:
        """The gated figure's (lower, upper): the ECE, or the candidate's minus the stable's."""
        lower, upper = self.candidate.bounds()
        if self.stable is None:
            return lower, upper
        base_lower, base_upper = self.stable.bounds()
        return lower - base_upper, upper - base_lower

    def estimate(self) -> float:
        found = self.candidate.estimate()
        return found - self.stable.estimate() if self.stable is not None else found

    def after(self, candidate: CaseRecord, stable: CaseRecord | None) -> EceGate:
        """One more case (of both revisions for an increase); a decided gate reads no more."""
        if self.decided != EvaluationResult.INCONCLUSIVE:
            return self
        moved = replace(self, candidate=self.candidate.after(candidate))
        if self.stable is not None:
            assert stable is not None, "an ECE increase compares with the stable"
            moved = replace(moved, stable=self.stable.after(stable))
        lower, upper = moved.bounds()
        if upper <= self.threshold:
            return replace(moved, decided=EvaluationResult.PASSED)
        if lower > self.threshold:
            return replace(moved, decided=EvaluationResult.FAILED)
        return moved

    def to_wire(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "candidate": self.candidate.to_wire(),
            "stable": self.stable.to_wire() if self.stable is not None else None,
            "decided": self.decided.value,
        }

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> EceGate:
        stable = raw.get("stable")
        return cls(
            float(raw["threshold"]),
            EceSequence.from_wire(raw["candidate"]),
            EceSequence.from_wire(stable) if stable is not None else None,
            EvaluationResult(raw["decided"]),
        )

    def at_alpha(self, alpha: float) -> EceGate:
        """The same sums judged at another (stricter) ``alpha``: valid, as the bets were
        predictable whatever level they were sized for; a verdict reached at the looser level
        is judged again."""
        share = alpha / 2 if self.stable is not None else alpha
        gate = replace(
            self,
            candidate=replace(self.candidate, alpha=share),
            stable=replace(self.stable, alpha=share) if self.stable is not None else None,
            decided=EvaluationResult.INCONCLUSIVE,
        )
        lower, upper = gate.bounds()
        if upper <= self.threshold:
            return replace(gate, decided=EvaluationResult.PASSED)
        if lower > self.threshold:
            return replace(gate, decided=EvaluationResult.FAILED)
        return gate


def ece_fed(
    gate: EceGate, candidate: Sequence[CaseRecord], stable: Sequence[CaseRecord] | None
) -> EceGate:
    """``gate`` fed the cases of this evaluation in dataset order (an increase: those the
    stable answered too), from its state at the evaluation's start."""
    answered = list(stable or [])
    for i, record in enumerate(candidate):
        if gate.stable is not None and i >= len(answered):
            break
        gate = gate.after(record, answered[i] if gate.stable is not None else None)
    return gate

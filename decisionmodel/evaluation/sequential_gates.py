"""The gates a sequential evaluation judges, each by its own betting test (sequential.py) over
the same stream of cases (issue 35 item 4).

Each gate is a mean of one bounded outcome per case, so the betting test applies as it is:

- ``minAccuracy``: the case's share of right questions, in [0, 1], at least the threshold;
- ``maxAccuracyDrop``: the candidate's share minus the stable's on the same case, in [-1, 1], at
  least minus the margin (the stable's mean share minus the candidate's at most the margin);
- ``maxNegativeFlipRate``: 1 when the stable got the case right (every question) and the
  candidate did not, in [0, 1], at most the threshold.

A gate stops being fed once it has a verdict: Ville's inequality bounds the chance its bettor
*ever* reaches 1/alpha wrongly, so the verdict stands whatever the other gates go on to read.
The evaluation is Failed once any gate is, Passed once every gate is, Inconclusive otherwise.
Each verdict's error is at most alpha = (1 - confidence) / 2, as each fixed-n gate's; a false
fail of the evaluation is a union over the gates, as with fixed n (docs/evaluation.md).

A slice's gates (``slices[fraud].minAccuracy``, ``.maxAccuracyDrop``) are the same tests on
that slice's cases only, each at alpha over the number of slice comparisons (Bonferroni, as
with fixed n).

The ECE gates are not means of a per-case outcome (the binned ECE is a sum of absolute means):
sequential_ece.py bounds them with confidence sequences instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.sequential import SequentialGate, Side
from decisionmodel.vocabulary import EvaluationResult, Gate


@dataclass(frozen=True)
class Kind:
    """How one gate is tested: the outcome's range, the test's side on it, whether it needs the
    stable's answer to the same case, and the figure the decision record names."""

    gate: Gate
    figure: str
    side: Side
    lo: float
    hi: float
    paired: bool


KINDS: Final = {
    Gate.MIN_ACCURACY: Kind(Gate.MIN_ACCURACY, "accuracy", "min", 0.0, 1.0, False),
    Gate.MAX_ACCURACY_DROP: Kind(Gate.MAX_ACCURACY_DROP, "accuracy drop", "min", -1.0, 1.0, True),
    Gate.MAX_NEGATIVE_FLIP_RATE: Kind(
        Gate.MAX_NEGATIVE_FLIP_RATE, "negative flips", "max", 0.0, 1.0, True
    ),
}
PAIRED_GATES: Final = tuple(g for g, k in KINDS.items() if k.paired)
# A slice's gates are named as the spec and the decision record name them.
SLICE_PREFIX: Final = "slices["


def share(record: CaseRecord) -> float:
    """The case's share of right questions (a case the runtime refused counts 0)."""
    return min(max(record.correct / record.pairs, 0.0), 1.0) if record.pairs else 0.0


def outcome(gate: Gate, candidate: CaseRecord, stable: CaseRecord | None) -> float:
    """The gate's outcome of one case."""
    if gate == Gate.MIN_ACCURACY:
        return share(candidate)
    assert stable is not None, f"{gate} compares with the stable"
    if gate == Gate.MAX_ACCURACY_DROP:
        return share(candidate) - share(stable)
    return 1.0 if stable.right and not candidate.right else 0.0


def fresh(gate: Gate, threshold: str, alpha: float) -> SequentialGate:
    """A new test of ``gate`` at ``threshold`` as written (a drop's margin is tested as the
    candidate-minus-stable mean being at least minus it)."""
    kind = KINDS[gate]
    limit = float(Decimal(threshold))
    at = -limit if gate == Gate.MAX_ACCURACY_DROP else limit
    return SequentialGate(threshold=at, side=kind.side, alpha=alpha, lo=kind.lo, hi=kind.hi)


def fed(gate: SequentialGate, outcomes: Iterable[float]) -> SequentialGate:
    """``gate`` fed ``outcomes`` in order until it has a verdict (then it reads no more)."""
    for x in outcomes:
        if gate.verdict() != EvaluationResult.INCONCLUSIVE:
            break
        gate = gate.after(x)
    return gate


def base_gate(name: str) -> Gate:
    """The gate a name tests: ``slices[fraud].minAccuracy`` tests minAccuracy."""
    return Gate(name.rpartition("].")[2] if name.startswith(SLICE_PREFIX) else name)


def slice_of(name: str) -> str | None:
    """The slice a gate's name restricts it to (None: every case)."""
    return name[len(SLICE_PREFIX) :].rpartition("].")[0] if name.startswith(SLICE_PREFIX) else None


def slice_gate(slice_name: str, gate: Gate) -> str:
    return f"{SLICE_PREFIX}{slice_name}].{gate}"


def fresh_named(name: str, threshold: str, alpha: float) -> SequentialGate:
    return fresh(base_gate(name), threshold, alpha)


def record_fed(
    start: Mapping[str, SequentialGate],
    candidate: Sequence[CaseRecord],
    stable: Sequence[CaseRecord] | None,
) -> dict[str, SequentialGate]:
    """Each gate fed the cases of this evaluation it reads (a slice's: that slice's; a paired
    one's: those the stable answered too), in dataset order, from its state at the start of
    the evaluation (pure: the same records give the same gates)."""
    answered = list(stable or [])
    found: dict[str, SequentialGate] = {}
    for name, gate in start.items():
        kind, where = KINDS[base_gate(name)], slice_of(name)
        rows = [
            (c, answered[i] if i < len(answered) else None)
            for i, c in enumerate(candidate)
            if where is None or c.slice == where
        ]
        if kind.paired:
            rows = [(c, s) for c, s in rows if s is not None]
        found[name] = fed(gate, (outcome(kind.gate, c, s) for c, s in rows))
    return found


def overall(verdicts: Iterable[EvaluationResult]) -> EvaluationResult:
    """Failed when any gate is, Passed when every gate is, else Inconclusive."""
    found = set(verdicts)
    if EvaluationResult.FAILED in found:
        return EvaluationResult.FAILED
    if EvaluationResult.INCONCLUSIVE in found or not found:
        return EvaluationResult.INCONCLUSIVE
    return EvaluationResult.PASSED

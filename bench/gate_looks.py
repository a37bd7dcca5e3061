"""Benchmark: repeated looks, retries and cases to a decision, fixed-n gates beside the
always-valid (sequential) ones (issue 35 items 1 and 4).

A candidate exactly at ``minAccuracy`` t (one question per case, every case right with
probability t): how often it ends Passed or Failed when

- **looks**: the gate is judged after every tenth of the dataset and the evaluation stops at
  the first verdict (a person adding cases after each Inconclusive, or a dashboard that stops
  when it sees a verdict): the fixed-n interval (`decide`'s Clopper-Pearson) is judged at each
  look; the sequential gate (decisionmodel/evaluation/sequential.py) after every case;
- **retries**: the whole evaluation run again on fresh cases up to four times while it stays
  Inconclusive (``dmrollout retry``): fixed-n starts a fresh test each time; the sequential
  gate continues the same bettors (the ledger a later evaluation carries).

The same for the other sequential gates (maxAccuracyDrop, maxNegativeFlipRate:
sequential_gates.py), each with a candidate exactly at its threshold, and for two slices each
exactly at ``slices.minAccuracy`` (the family's false pass: both pass; false fail: either
fails), and for the ECE gates (sequential_ece.py) with a candidate's ECE, or its increase over a
calibrated stable, exactly at 0.1.

The bound is ``(1 - c)/2`` per side. A cell over it by more than 2.58 Monte Carlo standard
errors prints OVER; only the sequential rows must hold (the fixed-n rows show why a sequential
design is needed), and the exit status is 1 when one of them is over.

Cases to a decision: a candidate one margin (0.05) above t, the mean number of cases the
sequential gate uses with the cap at which it passes 80 % of the time, beside the exact fixed-n
sample with 80 % power (Clopper-Pearson, one side at ``(1 - c)/2``).

    .venv/bin/python bench/gate_looks.py [--runs 4000] [--cases 50 200 500 2000] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import statistics
from collections.abc import Callable
from decimal import Decimal

from decisionmodel.evaluation import intervals as iv
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.decision import judge
from decisionmodel.evaluation.exact_binomial import clopper_pearson
from decisionmodel.evaluation.scoring import PairOutcome
from decisionmodel.evaluation.sequential import SequentialGate, run_until_decided
from decisionmodel.evaluation.sequential_ece import EceGate, ece_fed
from decisionmodel.evaluation.sequential_gates import fed, fresh, overall
from decisionmodel.vocabulary import EvaluationResult, Gate

LOOKS = 10
RETRIES = 4
THRESHOLD = 0.90
MARGIN = 0.05


def _outcomes(rng: random.Random, p: float, n: int) -> list[float]:
    return [1.0 if rng.random() < p else 0.0 for _ in range(n)]


def _fixed(outcomes: list[float], level: float) -> EvaluationResult:
    records = [CaseRecord.of([PairOutcome(x > 0.5, 0.8, x > 0.5)]) for x in outcomes]
    z = iv.z_of(level)
    found = iv.accuracy(records, z)
    return judge(Gate.MIN_ACCURACY, "accuracy", found, Decimal(str(THRESHOLD)), "min", z=z).verdict


def fixed_looks(rng: random.Random, n: int, level: float) -> EvaluationResult:
    outcomes = _outcomes(rng, THRESHOLD, n)
    for k in range(1, LOOKS + 1):
        verdict = _fixed(outcomes[: n * k // LOOKS], level)
        if verdict != EvaluationResult.INCONCLUSIVE:
            return verdict
    return EvaluationResult.INCONCLUSIVE


def fixed_retries(rng: random.Random, n: int, level: float) -> EvaluationResult:
    for _ in range(1 + RETRIES):
        verdict = _fixed(_outcomes(rng, THRESHOLD, n), level)
        if verdict != EvaluationResult.INCONCLUSIVE:
            return verdict
    return EvaluationResult.INCONCLUSIVE


def _drop_outcomes(rng: random.Random, n: int) -> list[float]:
    """Candidate minus stable per case, the stable right and the candidate wrong 5 % of the
    time, the reverse 3 %: a true drop of exactly DROP_MARGIN."""
    found = []
    for _ in range(n):
        u = rng.random()
        found.append(-1.0 if u < 0.05 else 1.0 if u < 0.08 else 0.0)
    return found


DROP_MARGIN = "0.02"
FLIP_RATE = "0.05"
Outcomes = Callable[[random.Random, int], list[float]]
# Each sequential gate and a candidate exactly at its threshold.
GATES: dict[str, tuple[Gate, str, Outcomes]] = {
    f"minAccuracy {THRESHOLD}": (
        Gate.MIN_ACCURACY,
        str(THRESHOLD),
        lambda rng, n: _outcomes(rng, THRESHOLD, n),
    ),
    f"maxAccuracyDrop {DROP_MARGIN}": (Gate.MAX_ACCURACY_DROP, DROP_MARGIN, _drop_outcomes),
    f"maxNegativeFlipRate {FLIP_RATE}": (
        Gate.MAX_NEGATIVE_FLIP_RATE,
        FLIP_RATE,
        lambda rng, n: _outcomes(rng, float(FLIP_RATE), n),
    ),
}


def sequential(
    rng: random.Random, n: int, level: float, tries: int, gate_name: str = ""
) -> EvaluationResult:
    """The gate's verdict, a look after every case, continued over ``tries`` evaluations of
    ``n`` fresh cases each while it stays Inconclusive (the ledger)."""
    kind, threshold, outcomes = GATES[gate_name or f"minAccuracy {THRESHOLD}"]
    gate = fresh(kind, threshold, (1 - level) / 2)
    for _ in range(tries):  # each try continues the same bettors on fresh cases
        gate, _ = run_until_decided(gate, outcomes(rng, n))
        if gate.verdict() != EvaluationResult.INCONCLUSIVE:
            break
    return gate.verdict()


def slices_sequential(rng: random.Random, n: int, level: float, tries: int) -> EvaluationResult:
    """Two slices, each exactly at ``slices.minAccuracy`` 0.90, cases alternating between them:
    each slice's test at half the error (Bonferroni), the family Failed when either fails and
    Passed when both pass."""
    alpha = (1 - level) / 2 / 2
    gates = [fresh(Gate.MIN_ACCURACY, str(THRESHOLD), alpha) for _ in range(2)]
    for _ in range(tries):
        outcomes = _outcomes(rng, THRESHOLD, n)
        gates = [fed(g, outcomes[i::2]) for i, g in enumerate(gates)]
        verdict = overall(g.verdict() for g in gates)
        if verdict != EvaluationResult.INCONCLUSIVE:
            return verdict
    return overall(g.verdict() for g in gates)


ECE_AT = 0.1


def _ece_case(rng: random.Random, accuracy: float) -> CaseRecord:
    right = rng.random() < accuracy
    return CaseRecord.of([PairOutcome(right, 0.8, right)])


def ece_sequential(
    rng: random.Random, n: int, level: float, tries: int, increase: bool
) -> EvaluationResult:
    """maxECE 0.1 with the candidate's ECE exactly 0.1 (confidence 0.8, right 70 %), or
    maxECEIncrease 0.1 against a calibrated stable (right 80 %): each evaluation ``n`` fresh
    cases, continued while Inconclusive (sequential_ece.py)."""
    gate = EceGate.fresh(ECE_AT, (1 - level) / 2, increase)
    for _ in range(tries):
        cand = [_ece_case(rng, 0.8 - ECE_AT) for _ in range(n)]
        stable = [_ece_case(rng, 0.8) for _ in range(n)] if increase else None
        gate = ece_fed(gate, cand, stable)
        if gate.verdict() != EvaluationResult.INCONCLUSIVE:
            break
    return gate.verdict()


def _ece_design(
    rng: random.Random, n: int, level: float, *, tries: int, increase: bool
) -> EvaluationResult:
    return ece_sequential(rng, n, level, tries, increase)


def _tried(gate_name: str, tries: int) -> Callable[[random.Random, int, float], EvaluationResult]:
    return lambda rng, n, level: sequential(rng, n, level, tries, gate_name)


def fixed_n_for_power(t: float, p: float, alpha: float, power: float = 0.8) -> int:
    """The smallest n whose exact one-sided test passes a true ``p`` with ``power``."""
    n = 10
    while n < 20000:
        k = (
            next(k for k in range(n + 1) if clopper_pearson(k, n, alpha)[0] >= t)
            if (clopper_pearson(n, n, alpha)[0] >= t)
            else n + 1
        )
        chance = sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))
        if chance >= power:
            return n
        n += max(1, n // 50)
    return n


def cases_to_decision(runs: int, level: float) -> tuple[int, float, int]:
    """(cap for 80 % power, mean cases used with it, fixed-n for 80 % power)."""
    rng = random.Random("cases-to-decision")
    p, alpha = THRESHOLD + MARGIN, (1 - level) / 2
    stops = []
    for _ in range(runs):
        gate, used = run_until_decided(
            SequentialGate(THRESHOLD, "min", alpha), _outcomes(rng, p, 4000)
        )
        stops.append(used if gate.verdict() == EvaluationResult.PASSED else 10**9)
    stops.sort()
    cap = stops[int(0.8 * runs)]
    return cap, statistics.mean(min(s, cap) for s in stops), fixed_n_for_power(THRESHOLD, p, alpha)


def oracle_cases(runs: int, level: float, cap: int) -> tuple[int, float]:
    """The floor of any always-valid test: the bettor that knows the true accuracy p stakes
    Kelly's fraction, so its wealth is the likelihood ratio of p against t (Wald's one-sided
    SPRT); by Wald's identity no e-process grows faster on average, so no always-valid test
    reaches 1/alpha in fewer cases on average. (its cap for 80 % power, its mean cases with
    the sequential gate's ``cap``)."""
    rng = random.Random("oracle")
    p, alpha = THRESHOLD + MARGIN, (1 - level) / 2
    up, down = math.log(p / THRESHOLD), math.log((1 - p) / (1 - THRESHOLD))
    bar, stops = math.log(1 / alpha), []
    for _ in range(runs):
        wealth, used = 0.0, 10**9
        for i, x in enumerate(_outcomes(rng, p, 4000)):
            wealth += up if x else down
            if wealth >= bar:
                used = i + 1
                break
        stops.append(used)
    stops.sort()
    return stops[int(0.8 * runs)], statistics.mean(min(s, cap) for s in stops)


def _wald_floor(level: float) -> float:
    """ln(1/alpha) over the information per case KL(p || t): Wald's mean cases to the bar."""
    p, t = THRESHOLD + MARGIN, THRESHOLD
    kl = p * math.log(p / t) + (1 - p) * math.log((1 - p) / (1 - t))
    return math.log(2 / (1 - level)) / kl


def _over(rate: float, bound: float, runs: int) -> bool:
    return rate > bound + 2.58 * math.sqrt(bound * (1 - bound) / runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--cases", type=int, nargs="+", default=[50, 200, 500, 2000])
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--quick", action="store_true", help="CI: 400 runs, n 200")
    # `make bench-gates BENCH_ARGS=...` passes gate_errors.py's options too: ignored here.
    args = parser.parse_known_args(argv)[0]
    if args.quick:
        args.runs, args.cases = 400, [200]
    level, bound = args.confidence, (1 - args.confidence) / 2
    mc = math.sqrt(bound * (1 - bound) / args.runs)
    print(f"minAccuracy {THRESHOLD}, a candidate exactly at it; confidence {level}: bound "
          f"{bound:.4f} per side; {args.runs} seeded runs per cell (Monte Carlo standard "
          f"error at the bound {mc:.4f}; OVER: above it by 2.58 of them)")  # fmt: skip
    print("the other sequential gates, a candidate exactly at theirs: true drop "
          f"{DROP_MARGIN} (stable right and candidate wrong 5 %, the reverse 3 %), "
          f"negative flips {FLIP_RATE}")  # fmt: skip
    print(f"{'design':<56} {'cases':>5}  {'false pass':>10}  {'false fail':>10}  result")
    designs: list[tuple[str, Callable[[random.Random, int, float], EvaluationResult], bool]] = [
        (f"fixed-n, {LOOKS} looks, stop at a verdict", fixed_looks, False),
        (f"fixed-n, up to {RETRIES} retries on fresh cases", fixed_retries, False),
    ]
    for gate_name in GATES:
        designs += [
            (f"{gate_name}: sequential, every case", _tried(gate_name, 1), True),
            (f"{gate_name}: sequential, {RETRIES} retries", _tried(gate_name, 1 + RETRIES), True),
        ]
    for name, increase in ((f"maxECE {ECE_AT}", False), (f"maxECEIncrease {ECE_AT}", True)):
        designs += [
            (
                f"{name}: sequential, every case",
                functools.partial(_ece_design, tries=1, increase=increase),
                True,
            ),
            (
                f"{name}: sequential, {RETRIES} retries",
                functools.partial(_ece_design, tries=1 + RETRIES, increase=increase),
                True,
            ),
        ]
    designs += [
        (
            "2 slices at 0.9: sequential, every case",
            lambda r, n, c: slices_sequential(r, n, c, 1),
            True,
        ),
        (
            f"2 slices at 0.9: sequential, {RETRIES} retries",
            lambda r, n, c: slices_sequential(r, n, c, 1 + RETRIES),
            True,
        ),
    ]
    bad = 0
    for name, design, held in designs:
        for n in args.cases:
            verdicts = [
                design(random.Random(f"{name}|{n}|{s}"), n, level) for s in range(args.runs)
            ]
            fp = verdicts.count(EvaluationResult.PASSED) / args.runs
            ff = verdicts.count(EvaluationResult.FAILED) / args.runs
            over = _over(fp, bound, args.runs) or _over(ff, bound, args.runs)
            bad += over and held
            shown = ("OVER" if held else "over (expected)") if over else "ok"
            print(f"{name:<56} {n:>5}  {fp:>10.4f}  {ff:>10.4f}  {shown}", flush=True)
    cap, mean, fixed = cases_to_decision(max(200, args.runs // 10), level)
    print()
    print(
        f"cases to a decision, true accuracy {THRESHOLD + MARGIN:.2f} (one margin above): "
        f"sequential passes 80 % within {cap} cases, using {mean:.0f} on average; the fixed-n "
        f"test needs {fixed} for 80 % power ({mean / fixed:.0%} of it; goal 60 %)"
    )
    best_cap, best_mean = oracle_cases(max(200, args.runs // 10), level, cap)
    print(
        f"floor of any always-valid test: the bettor that knows the true accuracy (the "
        f"likelihood ratio) passes 80 % within {best_cap} cases, using {best_mean:.0f} on "
        f"average with the same cap ({best_mean / fixed:.0%} of fixed-n); "
        f"ln(1/alpha)/KL = {_wald_floor(level):.0f} cases to its bar on average"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

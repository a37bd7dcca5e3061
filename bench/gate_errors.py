"""Benchmark: each evaluation gate's error rates *at its threshold*, beside the bound.

With ``confidence: c`` every gate promises (docs/evaluation.md, "What confidence controls"):
a candidate whose true figure sits exactly at the threshold is Passed at most ``(1 - c)/2`` of
the time (false pass) and Failed at most ``(1 - c)/2`` of the time (false fail); the rest of the
time it is Inconclusive. This bench measures both over seeded synthetic evaluations, per gate,
per number of cases, with one and with three questions per case (questions of one case share a
case effect, so they are not independent), using the product's own interval and verdict code.
A cell is **over** when its rate exceeds the bound by more than 2.58 Monte Carlo standard
errors of the bound (a one-sided 0.5 % test: the runs are seeded, so the table is the same on
every machine). The exit status is 1 when a cell is over.

Truth by construction (``delta`` is the threshold):
- minAccuracy: every question right with probability ``delta`` (± a case effect);
- maxAccuracyDrop: stable right with probability 0.90; the candidate flips right→wrong and
  wrong→right so that its accuracy is ``delta`` lower;
- maxECE: confidences uniform in [0.5, 0.88], right with probability ``confidence - delta``
  (over-confident by ``delta`` in every bin: binned ECE = ``delta``); also a calibrated model
  (true ECE 0), whose Failed share must be 0;
- maxECEIncrease: a calibrated stable and a candidate over-confident by ``delta``;
- maxNegativeFlipRate: the stable right on 90 % of cases, the candidate wrong on a ``delta``
  share of all cases the stable got right;
- slices: four slices, each at the threshold (the family: Failed if any slice fails).

    .venv/bin/python bench/gate_errors.py [--runs 4000] [--cases 50 200 500 2000]
        [--questions 1 3] [--confidence 0.95] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from decisionmodel.evaluation import ece_bounds
from decisionmodel.evaluation import intervals as iv
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.decision import (
    SliceGates,
    decide,
    judge,
    undecided_point_failures,
)
from decisionmodel.evaluation.gates import EvaluationGates
from decisionmodel.evaluation.scoring import PairOutcome
from decisionmodel.vocabulary import EvaluationResult, Gate

Records = list[CaseRecord]
Verdict = Callable[[random.Random, int, int, float], EvaluationResult]  # rng, n, q, confidence


def _effect(rng: random.Random, questions: int, p: float) -> float:
    """A case effect shared by a case's questions (none with one question)."""
    if questions == 1:
        return 0.0
    size = min(0.05, p, 1 - p)
    return size if rng.random() < 0.5 else -size


def _case(outcomes: list[tuple[bool, float]], slice_: str | None = None) -> CaseRecord:
    return CaseRecord.of([PairOutcome(r, c, r) for r, c in outcomes], slice_)


def _accuracy_cases(
    rng: random.Random, n: int, q: int, p: float, slice_: str | None = None
) -> Records:
    out = []
    for _ in range(n):
        e = _effect(rng, q, p)
        out.append(_case([(rng.random() < p + e, rng.uniform(0.5, 1.0)) for _ in range(q)], slice_))
    return out


def min_accuracy(threshold: float) -> Verdict:
    def run(rng: random.Random, n: int, q: int, level: float) -> EvaluationResult:
        found = iv.accuracy(_accuracy_cases(rng, n, q, threshold), iv.z_of(level))
        return judge(
            Gate.MIN_ACCURACY, "accuracy", found, Decimal(str(threshold)), "min", z=iv.z_of(level)
        ).verdict

    return run


def _paired(rng: random.Random, n: int, q: int, drop: float) -> tuple[Records, Records]:
    """Stable right with p 0.90; negative flips 0.01 + drop, positive flips 0.01 (of pairs)."""
    p, positive = 0.90, 0.01
    to_wrong, to_right = (positive + drop) / p, positive / (1 - p)
    stable, candidate = [], []
    for _ in range(n):
        e = _effect(rng, q, p)
        s_pairs, c_pairs = [], []
        for _ in range(q):
            right = rng.random() < p + e
            flip = rng.random() < (to_wrong if right else to_right)
            c = rng.uniform(0.5, 1.0)
            s_pairs.append((right, c))
            c_pairs.append((right != flip, c))
        stable.append(_case(s_pairs))
        candidate.append(_case(c_pairs))
    return candidate, stable


def max_accuracy_drop(margin: float) -> Verdict:
    def run(rng: random.Random, n: int, q: int, level: float) -> EvaluationResult:
        candidate, stable = _paired(rng, n, q, margin)
        drop = iv.accuracy_difference(candidate, stable, iv.z_of(level)).negated()
        return judge(
            Gate.MAX_ACCURACY_DROP, "drop", drop, Decimal(str(margin)), z=iv.z_of(level)
        ).verdict

    return run


def _calibration_cases(rng: random.Random, n: int, q: int, over: float) -> Records:
    out = []
    for _ in range(n):
        e = rng.choice((-0.1, 0.1)) if q > 1 else 0.0
        pairs = []
        for _ in range(q):
            c = rng.uniform(0.5, 0.88)
            pairs.append((rng.random() < c - over + e, c))
        out.append(_case(pairs))
    return out


def max_ece(threshold: float, truth: float) -> Verdict:
    def run(rng: random.Random, n: int, q: int, level: float) -> EvaluationResult:
        found = ece_bounds.ece_interval(_calibration_cases(rng, n, q, truth), level)
        return judge(Gate.MAX_ECE, "ECE", found, Decimal(str(threshold)), z=iv.z_of(level)).verdict

    return run


def max_ece_increase(margin: float) -> Verdict:
    def run(rng: random.Random, n: int, q: int, level: float) -> EvaluationResult:
        stable, candidate = [], []
        for _ in range(n):
            e = rng.choice((-0.1, 0.1)) if q > 1 else 0.0
            cs = [rng.uniform(0.5, 0.88) for _ in range(q)]
            stable.append(_case([(rng.random() < c + e, c) for c in cs]))
            candidate.append(_case([(rng.random() < c - margin + e, c) for c in cs]))
        found = ece_bounds.ece_difference(candidate, stable, level)
        return judge(
            Gate.MAX_ECE_INCREASE, "ECE increase", found, Decimal(str(margin)), z=iv.z_of(level)
        ).verdict

    return run


def max_negative_flip_rate(rate: float) -> Verdict:
    def run(rng: random.Random, n: int, q: int, level: float) -> EvaluationResult:
        stable, candidate = [], []
        for _ in range(n):
            right = rng.random() < 0.90
            wrong_now = right and rng.random() < rate / 0.90
            c = [rng.uniform(0.5, 1.0) for _ in range(q)]
            stable.append(_case([(right, x) for x in c]))
            answers = [right] * q
            if wrong_now:
                answers[rng.randrange(q)] = False
            candidate.append(_case(list(zip(answers, c, strict=True))))
        negative, _ = iv.flip_rates(candidate, stable, iv.z_of(level))
        return judge(
            Gate.MAX_NEGATIVE_FLIP_RATE, "flips", negative, Decimal(str(rate)), z=iv.z_of(level)
        ).verdict

    return run


def slices(threshold: float, count: int = 4) -> Verdict:
    gates = EvaluationGates(min_accuracy=Decimal("0"))

    def run(rng: random.Random, n: int, q: int, level: float) -> EvaluationResult:
        records: Records = []
        for i in range(count):
            records += _accuracy_cases(rng, n // count, q, threshold, f"s{i}")
        spec = SliceGates(min_accuracy=str(threshold), min_cases=min(30, n // count))
        return decide(gates, Decimal(str(level)), records, None, ("bench",), spec).result

    return run


@dataclass(frozen=True)
class Cell:
    gate: str
    truth: str
    verdict: Verdict
    # A calibrated model: Failed must never happen (its Passed share is power, not an error).
    never: bool = False


CELLS = (
    Cell("minAccuracy 0.90", "accuracy 0.90", min_accuracy(0.90)),
    Cell("minAccuracy 0.98", "accuracy 0.98", min_accuracy(0.98)),
    Cell("maxAccuracyDrop 0.02", "drop 0.02", max_accuracy_drop(0.02)),
    Cell("maxECE 0.05", "ECE 0.05", max_ece(0.05, 0.05)),
    Cell("maxECE 0.05", "ECE 0 (calibrated)", max_ece(0.05, 0.0), never=True),
    Cell("maxECEIncrease 0.02", "increase 0.02", max_ece_increase(0.02)),
    Cell("maxNegativeFlipRate 0.05", "flips 0.05", max_negative_flip_rate(0.05)),
    Cell("slices minAccuracy 0.90", "4 slices at 0.90", slices(0.90)),
)


def promote_rates(truth: float, n: int, runs: int, level: float) -> tuple[float, float]:
    """``onInconclusive: Promote`` against ``minAccuracy: "0.90"`` with a true accuracy of
    ``truth``: (how often the candidate is promoted, how often the point gate passed it)."""
    gates = EvaluationGates(min_accuracy=Decimal("0.90"))
    promoted = point = 0
    for seed in range(runs):
        rng = random.Random(f"promote|{truth}|{n}|{seed}")
        records = _accuracy_cases(rng, n, 1, truth)
        found = decide(gates, Decimal(str(level)), records, None, ("bench",))
        unsure = found.result == EvaluationResult.INCONCLUSIVE
        promoted += found.result == EvaluationResult.PASSED or (
            unsure and not undecided_point_failures(found)
        )
        point += sum(r.correct for r in records) / n >= 0.90
    return promoted / runs, point / runs


def measure(cell: Cell, n: int, q: int, runs: int, level: float) -> dict[str, Any]:
    passed = failed = 0
    for seed in range(runs):
        rng = random.Random(f"{cell.gate}|{cell.truth}|{n}|{q}|{seed}")
        verdict = cell.verdict(rng, n, q, level)
        passed += verdict == EvaluationResult.PASSED
        failed += verdict == EvaluationResult.FAILED
    return {"gate": cell.gate, "truth": cell.truth, "cases": n, "questions": q, "runs": runs,
            "false_pass": passed / runs, "false_fail": failed / runs}  # fmt: skip


def over(rate: float, bound: float, runs: int) -> bool:
    return rate > bound + 2.58 * math.sqrt(bound * (1 - bound) / runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--cases", type=int, nargs="+", default=[50, 200, 500, 2000])
    parser.add_argument("--questions", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--quick", action="store_true", help="CI: 1000 runs, n 50 and 200")
    parser.add_argument("--only", default="", help="cells whose gate contains this text")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.cases = 1000, [50, 200]
    bound = (1 - args.confidence) / 2
    mc = math.sqrt(bound * (1 - bound) / args.runs)
    print(f"confidence {args.confidence}: bound (1-c)/2 = {bound:.4f} per side; {args.runs} "
          f"seeded runs per cell (Monte Carlo error of the bound ±{mc:.4f})")  # fmt: skip
    print(f"{'gate':<26} {'truth':<20} {'cases':>5} {'q':>2}  {'false pass':>10}  "
          f"{'false fail':>10}  {'bound':>6}  result")  # fmt: skip
    rows, bad = [], 0
    for cell in CELLS:
        if args.only not in cell.gate:
            continue
        for q in args.questions:
            for n in args.cases:
                started = time.monotonic()
                row = measure(cell, n, q, args.runs, args.confidence)
                fails_bound = 0.0 if cell.never else bound
                if cell.never:
                    bad_here = row["false_fail"] > 0
                else:
                    bad_here = over(row["false_pass"], bound, args.runs) or over(
                        row["false_fail"], bound, args.runs
                    )
                bad += bad_here
                row |= {"bound": bound, "over": bad_here, "seconds": time.monotonic() - started}
                rows.append(row)
                shown = "(power)" if cell.never else f"{row['false_pass']:.4f}"
                print(f"{cell.gate:<26} {cell.truth:<20} {n:>5} {q:>2}  {shown:>10}  "
                      f"{row['false_fail']:>10.4f}  {fails_bound:>6.4f}  "
                      f"{'OVER' if bad_here else 'ok'}", flush=True)  # fmt: skip
    print()
    print("onInconclusive Promote, minAccuracy 0.90, one question per case: promoted beside")
    print("the point gate it replaced (never more often)")
    print(f"{'true accuracy':>13} {'cases':>5}  {'promoted':>8}  {'point gate':>10}  result")
    for truth in (0.88, 0.90):
        for n in args.cases:
            promoted, point = promote_rates(truth, n, args.runs, args.confidence)
            # Never more permissive than the point gate (within Monte Carlo error).
            loose = promoted > point + 2.58 * math.sqrt(max(point * (1 - point), 1e-4) / args.runs)
            bad += loose
            rows.append({"gate": "onInconclusive Promote", "truth": truth, "cases": n,
                         "promoted": promoted, "point_gate": point, "over": loose})  # fmt: skip
            print(f"{truth:>13.2f} {n:>5}  {promoted:>8.4f}  {point:>10.4f}  "
                  f"{'OVER' if loose else 'ok'}", flush=True)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    print(f"{bad} cell(s) over their bound")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

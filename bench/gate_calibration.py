"""Benchmark: how often the interval gates decide right, over seeded synthetic evaluations.

Issue 24's bar for the relative gate (``maxAccuracyDrop``, a non-inferiority test on the paired
difference candidate - stable): at confidence 0.95,

- on a dataset whose true difference is 0 by construction, the gate passes or is inconclusive
  in at least 95 % of 200 seeded runs (it almost never fails a candidate that is as good);
- on one with a true drop of twice the margin, it fails in at least 95 % of them.

"By construction": the stable answers each case right with probability ``--accuracy``; the
candidate's answer differs from the stable's on a share of the cases: ``--flips`` / 2 flip each
way (true difference 0), and with a drop of ``d`` another ``d`` of the cases flip from right to
wrong. One question per case. The gate is the product's own code
(intervals.accuracy_difference and decision.judge); the runs differ only in their seed.

A second table gives ``minAccuracy`` at a threshold equal to the true accuracy (the
inconclusive band) and 0.03 below and above it.

Prints numbers beside their floors; asserts nothing; pure Python, no cluster, a few seconds:

    .venv/bin/python bench/gate_calibration.py [--runs 200] [--cases 500 2000 4000]
        [--margin 0.02] [--flips 0.02] [--accuracy 0.90] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from decisionmodel.evaluation import intervals as iv
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.decision import judge
from decisionmodel.evaluation.scoring import PairOutcome
from decisionmodel.vocabulary import EvaluationResult, Gate

FLOOR = 0.95


def case(right: bool, rng: random.Random) -> CaseRecord:
    return CaseRecord.of([PairOutcome(right, rng.uniform(0.5, 1.0), right)])


def paired_run(
    n: int, accuracy: float, flips: float, drop: float, seed: int
) -> tuple[list[CaseRecord], list[CaseRecord]]:
    """Stable and candidate records with a true accuracy difference of ``-drop``."""
    rng = random.Random(seed)
    negative, positive = flips / 2 + drop, flips / 2
    # A negative flip needs a stable that was right, a positive one a stable that was wrong.
    p_neg, p_pos = negative / accuracy, positive / (1 - accuracy)
    stable, candidate = [], []
    for _ in range(n):
        s_right = rng.random() < accuracy
        flip = rng.random() < (p_neg if s_right else p_pos)
        stable.append(case(s_right, rng))
        candidate.append(case(s_right != flip, rng))
    return candidate, stable


def relative_verdicts(args: argparse.Namespace, n: int, drop: float) -> Counter[str]:
    z = iv.z_of(args.confidence)
    margin = Decimal(str(args.margin))
    verdicts: Counter[str] = Counter()
    for seed in range(args.runs):
        candidate, stable = paired_run(n, args.accuracy, args.flips, drop, seed)
        diff = iv.accuracy_difference(candidate, stable, z)
        as_drop = diff.negated()
        verdicts[judge(Gate.MAX_ACCURACY_DROP, "drop", as_drop, margin).verdict.value] += 1
    return verdicts


def absolute_verdicts(args: argparse.Namespace, n: int, offset: float) -> Counter[str]:
    z = iv.z_of(args.confidence)
    threshold = Decimal(f"{args.accuracy + offset:.4f}")
    verdicts: Counter[str] = Counter()
    for seed in range(args.runs):
        rng = random.Random(10_000 + seed)
        records = [case(rng.random() < args.accuracy, rng) for _ in range(n)]
        found = iv.accuracy(records, z)
        verdicts[judge(Gate.MIN_ACCURACY, "accuracy", found, threshold, "min").verdict.value] += 1
    return verdicts


def share(verdicts: Counter[str], *which: EvaluationResult) -> float:
    return sum(verdicts[w.value] for w in which) / max(1, sum(verdicts.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cases", type=int, nargs="+", default=[500, 2000, 4000])
    parser.add_argument("--margin", type=float, default=0.02)
    parser.add_argument("--flips", type=float, default=0.02)
    parser.add_argument("--accuracy", type=float, default=0.90)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    print(
        f"maxAccuracyDrop {args.margin} at confidence {args.confidence}, {args.runs} seeded runs, "
        f"stable accuracy {args.accuracy}, {args.flips:.0%} of cases flip"
    )
    print(f"{'cases':>6}  {'true drop':>9}  {'pass':>5} {'inconcl':>7} {'fail':>5}  "
          f"{'measure':<22} {'value':>6}  {'floor':>5}")  # fmt: skip
    passed, failed, unsure = (
        EvaluationResult.PASSED,
        EvaluationResult.FAILED,
        EvaluationResult.INCONCLUSIVE,
    )
    for n in args.cases:
        for drop, measure, ok in (
            (0.0, "pass or inconclusive", (passed, unsure)),
            (2 * args.margin, "fail", (failed,)),
        ):
            v = relative_verdicts(args, n, drop)
            value = share(v, *ok)
            rows.append({"gate": "maxAccuracyDrop", "cases": n, "drop": drop, "measure": measure,
                         "value": value, "floor": FLOOR, **dict(v)})  # fmt: skip
            print(f"{n:>6}  {drop:>9.3f}  {v[passed.value]:>5} {v[unsure.value]:>7} "
                  f"{v[failed.value]:>5}  {measure:<22} {value:>6.1%}  {FLOOR:>5.0%}")  # fmt: skip
    print()
    print(f"minAccuracy around the true accuracy {args.accuracy}, {args.runs} runs")
    print(f"{'cases':>6}  {'threshold':>9}  {'pass':>5} {'inconcl':>7} {'fail':>5}")
    for n in args.cases:
        for offset in (-0.03, 0.0, 0.03):
            v = absolute_verdicts(args, n, offset)
            rows.append({"gate": "minAccuracy", "cases": n, "offset": offset, **dict(v)})
            print(f"{n:>6}  {args.accuracy + offset:>9.2f}  {v[passed.value]:>5} "
                  f"{v[unsure.value]:>7} {v[failed.value]:>5}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()

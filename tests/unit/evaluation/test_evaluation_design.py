"""What a golden set can decide (issue 35 item 6): the figures ``design`` states are checked
against the product's own gate code run over seeded samples, not against its own formulas."""

from __future__ import annotations

import math
import random
from decimal import Decimal

import pytest

from activities.evaluation_design import judged, refused, summary
from decisionmodel.evaluation import intervals as iv
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.decision import judge
from decisionmodel.evaluation.design import DESIGN_POWER, design
from decisionmodel.evaluation.sequential import SequentialGate, run_until_decided
from decisionmodel.rollout.contracts import EvaluationPolicy, KeyRef, SliceGates
from decisionmodel.vocabulary import EvaluationResult, Gate

CONFIDENCE = Decimal("0.95")
Z = iv.z_of(0.95)


def _record(right: bool) -> CaseRecord:
    return CaseRecord(pairs=1, correct=int(right), brier=0.0, points=())


def _passes_min_accuracy(rng: random.Random, n: int, t: float, p: float) -> bool:
    found = iv.accuracy([_record(rng.random() < p) for _ in range(n)], Z)
    verdict = judge(Gate.MIN_ACCURACY, "accuracy", found, Decimal(str(t)), "min", z=Z).verdict
    return verdict == EvaluationResult.PASSED


def _simulated(n: int, t: float, p: float, runs: int = 2000) -> float:
    rng = random.Random(f"{n}|{t}|{p}")
    return sum(_passes_min_accuracy(rng, n, t, p) for _ in range(runs)) / runs


@pytest.mark.parametrize(("n", "t"), [(50, "0.80"), (200, "0.90"), (500, "0.95")])
def test_min_accuracy_power_is_what_the_gate_does(n: int, t: str) -> None:
    (found,) = design({"minAccuracy": t}, CONFIDENCE, n)
    p = float(t) + (1 - float(t)) / 2
    assert found.design == f"accuracy {p:.4g}"
    assert found.power is not None
    measured = _simulated(n, float(t), p)
    assert abs(found.power - measured) < 4 * math.sqrt(0.25 / 2000), (found.power, measured)


def test_cases_for_power_reach_it_and_fewer_do_not() -> None:
    (found,) = design({"minAccuracy": "0.90"}, CONFIDENCE, 100)
    assert found.underpowered and found.cases_for_power is not None
    assert _simulated(found.cases_for_power, 0.90, 0.95) > DESIGN_POWER - 0.03
    assert _simulated(found.cases_for_power * 3 // 4, 0.90, 0.95) < DESIGN_POWER
    assert "about" in found.line() and str(found.cases_for_power) in found.line()


def test_a_threshold_no_outcome_can_pass() -> None:
    (small,) = design({"minAccuracy": "0.98"}, CONFIDENCE, 50)
    assert not small.can_pass and small.can_fail and small.power == 0.0
    assert "no outcome can pass it" in small.line()
    # Every one of 50 cases right: the exact lower bound is still below 0.98.
    assert iv.accuracy([_record(True)] * 50, Z).lower < 0.98
    (large,) = design({"minAccuracy": "0.98"}, CONFIDENCE, 500)
    assert large.can_pass


def test_flip_rate_power_is_what_the_interval_does() -> None:
    n, f = 400, 0.05
    (found,) = design({"maxNegativeFlipRate": str(f)}, CONFIDENCE, n)
    rng = random.Random("flips")
    tail = iv._tail(Z)
    runs = 2000
    passed = 0
    for _ in range(runs):
        flips = sum(rng.random() < f / 2 for _ in range(n))
        passed += iv.clopper_pearson(flips, n, tail)[1] <= f
    assert found.power is not None
    assert abs(found.power - passed / runs) < 4 * math.sqrt(0.25 / runs)


def test_a_drop_gate_states_when_an_equal_candidate_can_pass() -> None:
    """The narrowest interval an equally accurate candidate gets is with identical answers."""
    (found,) = design({"maxAccuracyDrop": "0.02"}, CONFIDENCE, 200)
    assert found.can_pass and found.power == 0.0 and found.cases_for_power is not None
    same = [_record(True)] * found.cases_for_power
    assert iv.accuracy_difference(same, same, Z).negated().upper <= 0.02
    fewer = [_record(True)] * (found.cases_for_power * 9 // 10)
    assert iv.accuracy_difference(fewer, fewer, Z).negated().upper > 0.02


def test_sequential_power_and_cases_to_a_verdict() -> None:
    (found,) = design({"minAccuracy": "0.90"}, CONFIDENCE, 500, sequential=True)
    rng = random.Random("independent")
    runs, passed, used = 300, 0, 0
    for _ in range(runs):
        outcomes = [1.0 if rng.random() < 0.95 else 0.0 for _ in range(500)]
        gate, n = run_until_decided(SequentialGate(0.90, "min", 0.025), outcomes)
        passed += gate.verdict() == EvaluationResult.PASSED
        used += n
    assert found.power is not None and found.expected_cases is not None
    assert abs(found.power - passed / runs) < 0.12
    assert abs(found.expected_cases - used / runs) < 0.15 * used / runs
    assert found.expected_cases < 500  # it stops early, on average


def test_slices_are_judged_at_their_bonferroni_share_and_small_ones_are_not_gated() -> None:
    found = design(
        {"minAccuracy": "0.80"},
        CONFIDENCE,
        400,
        slices={"a": 200, "b": 150, "tiny": 10},
        slice_gates={"minAccuracy": "0.80", "maxAccuracyDrop": None},
        slice_min_cases=30,
    )
    names = [g.gate for g in found]
    assert names == ["minAccuracy", "slices[a].minAccuracy", "slices[b].minAccuracy"]
    overall, a = found[0], found[1]
    # The same threshold on fewer cases and at half the tail: less power.
    assert a.power is not None and overall.power is not None and a.power < overall.power


def _policy(**update: object) -> EvaluationPolicy:
    base = EvaluationPolicy(
        dataset=KeyRef(kind="ConfigMap", name="golden", key="cases.jsonl"),
        min_accuracy="0.98",
        confidence="0.95",
    )
    return base.model_copy(update=update)


def test_refused_only_when_every_candidate_would_be_rolled_back_or_undecided() -> None:
    reject = _policy(on_inconclusive="Reject")
    why = refused(reject, judged(reject, 50, {}))
    assert why is not None
    assert why.startswith("spec.rollout.evaluation.minAccuracy 0.98 on the golden set's 50")
    assert "ConfigMap golden" in why and "onInconclusive: Hold" in why and "retry" in why
    hold = _policy(on_inconclusive="Hold")
    found = judged(hold, 50, {})
    assert refused(hold, found) is None  # a person decides: a usable, if weak, setting
    assert "too small to decide" in summary(hold, found)
    assert refused(reject, judged(reject, 1000, {})) is None
    # A sequential test's evidence is continued on appended cases by a retry: not refused.
    sequential = _policy(on_inconclusive="Reject", sequential=True)
    found = judged(sequential, 40, {})
    assert not found[0].can_pass and refused(sequential, found) is None


def test_slices_in_the_policy_are_judged() -> None:
    policy = _policy(min_accuracy="0.80", slices=SliceGates(min_accuracy="0.99", min_cases=30))
    found = judged(policy, 300, {"fraud": 40})
    assert [g.gate for g in found] == ["minAccuracy", "slices[fraud].minAccuracy"]
    assert not found[1].can_pass


def test_status_reads_back_as_the_lines_dmrollout_status_prints() -> None:
    from decisionmodel.api.status import EvaluationDesignStatus
    from decisionmodel.rollout.contracts import EvaluationDesign
    from decisionmodel.rollout.evaluation_status import design_lines

    found = design({"minAccuracy": "0.98"}, CONFIDENCE, 50)
    wire = EvaluationDesignStatus.model_validate(
        EvaluationDesign(checked=True, cases=50, gates=found).model_dump(mode="json")
    ).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["gates"][0]["canPass"] is False
    assert design_lines(wire) == [found[0].line()]
    unread = {"checked": False, "cases": 0, "message": "not checked: ConfigMap x is missing"}
    assert design_lines(unread) == ["not checked: ConfigMap x is missing"]
    assert design_lines(None) == []

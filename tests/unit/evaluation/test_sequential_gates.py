"""The paired gates of a sequential evaluation (maxAccuracyDrop, maxNegativeFlipRate): each its
own betting test over the cases both revisions answered, continued by the ledger, refused
nowhere they can be judged (issue 35 item 4)."""

from __future__ import annotations

import json
import random

import pytest

from activities.evaluate_sequential import Decided, SequentialRun, other_gates
from decisionmodel.api.status import EvaluationDecisionStatus
from decisionmodel.evaluation import parse_dataset
from decisionmodel.evaluation.case_records import CaseRecord
from decisionmodel.evaluation.dataset import MAX_CASES
from decisionmodel.evaluation.decision import SliceGates
from decisionmodel.evaluation.gates import EvaluationGates
from decisionmodel.evaluation.ledger import LedgerEntry, OtherGates
from decisionmodel.evaluation.sequential_decision import decide_sequential
from decisionmodel.evaluation.sequential_gates import fed, fresh, outcome, overall
from decisionmodel.vocabulary import EvaluationResult, Gate
from kube.rollout_status import ledger_of, ledger_with

PASSED, FAILED, INCONCLUSIVE = (
    EvaluationResult.PASSED,
    EvaluationResult.FAILED,
    EvaluationResult.INCONCLUSIVE,
)
PAIRED = {Gate.MAX_ACCURACY_DROP: "0.02", Gate.MAX_NEGATIVE_FLIP_RATE: "0.05"}


def dataset(n: int) -> bytes:
    line = {"state": {}, "questions": {"q": {"type": "noul"}}, "expected": {"q": True}}
    return "".join(json.dumps({**line, "state": {"i": i}}) + "\n" for i in range(n)).encode()


def record(right: bool) -> CaseRecord:
    return CaseRecord(pairs=1, correct=int(right), brier=0.0, points=(), rights=(right,))


def paired_records(
    rng: random.Random, n: int, stable_only: float, candidate_only: float, both: float = 0.9
) -> tuple[list[CaseRecord], list[CaseRecord]]:
    """Cases both got right with ``both``, only the stable ``stable_only``, only the
    candidate ``candidate_only``, neither the rest."""
    cand, stable = [], []
    for _ in range(n):
        u = rng.random()
        s = u < both or both <= u < both + stable_only
        c = u < both or both + stable_only <= u < both + stable_only + candidate_only
        cand.append(record(c))
        stable.append(record(s))
    return cand, stable


def begin(
    raw: bytes, entries: list[LedgerEntry], baseline: str = "stable1", **kw: str
) -> SequentialRun:
    written = kw or {str(g): t for g, t in PAIRED.items()}
    return SequentialRun.begin(
        entries, "rev1", "0.7", "0.95", raw, parse_dataset(raw, MAX_CASES),
        others=OtherGates(written, baseline),
    )  # fmt: skip


def run(test: SequentialRun, cand: list[CaseRecord], stable: list[CaseRecord]) -> int:
    """The activity's order (evaluate._in_rounds): a round of the candidate's cases (fewer
    once the test stops them), the stable's on the same cases, the paired gates read both;
    rounds of 100, then half again each, until the test decides. The cases read."""
    until, used = min(100, len(cand)), 0
    while True:
        try:
            while used < until:
                used += 1
                test.feed(cand[used - 1])
        except Decided:
            pass
        test.read(cand[:used], stable[:used])
        if test.decided or used < until or until >= len(cand):
            return used
        until = min(until + until // 2, len(cand))


def test_outcomes_are_the_per_case_difference_and_the_negative_flip() -> None:
    right, wrong = record(True), record(False)
    assert outcome(Gate.MAX_ACCURACY_DROP, wrong, right) == -1.0
    assert outcome(Gate.MAX_ACCURACY_DROP, right, wrong) == 1.0
    assert outcome(Gate.MAX_NEGATIVE_FLIP_RATE, wrong, right) == 1.0
    assert outcome(Gate.MAX_NEGATIVE_FLIP_RATE, right, wrong) == 0.0
    half = CaseRecord(pairs=2, correct=1, brier=0.0, points=(), rights=(True, False))
    assert outcome(Gate.MAX_ACCURACY_DROP, half, right) == -0.5
    assert outcome(Gate.MAX_NEGATIVE_FLIP_RATE, half, right) == 1.0  # not every question


def test_a_candidate_as_good_as_the_stable_passes_every_gate() -> None:
    cand, stable = paired_records(random.Random(3), 3000, 0.0, 0.0)
    test = begin(dataset(3000), [])
    used = run(test, cand, stable)
    assert test.decided and used < 3000
    entry = test.entry()
    assert entry.verdict == PASSED and {g.verdict for g in entry.gates} == {PASSED}
    assert {g.gate for g in entry.gates} == {str(g) for g in PAIRED}
    # minAccuracy decided first and kept its own count; the test counted every case read.
    assert entry.accuracy_cases is not None and entry.accuracy_cases < entry.cases == used


def test_a_candidate_that_drops_fails_its_drop_gate_though_minaccuracy_passes() -> None:
    # Stable right 95 %, candidate 85 %: accuracy clears 0.7, the drop (0.10) does not 0.02.
    cand, stable = paired_records(random.Random(5), 2000, 0.10, 0.0, both=0.85)
    test = begin(dataset(2000), [], maxAccuracyDrop="0.02")
    run(test, cand, stable)
    entry = test.entry()
    assert [(g.gate, g.verdict) for g in entry.gates] == [("maxAccuracyDrop", FAILED)]
    assert entry.verdict == FAILED and test.decided


def test_a_failing_minaccuracy_stops_the_candidate_at_once() -> None:
    cand, stable = paired_records(random.Random(8), 1000, 0.0, 0.0, both=0.4)
    test = begin(dataset(1000), [])
    used = run(test, cand, stable)
    assert test.gate.verdict() == FAILED and used < 1000
    assert test.entry().verdict == FAILED


def test_a_passing_minaccuracy_does_not_stop_the_paired_gates_reading() -> None:
    test = begin(dataset(500), [])
    for _ in range(200):
        test.feed(record(True))  # minAccuracy passes, the paired gates have read nothing
    assert test.gate.verdict() == PASSED and not test.decided


def test_the_ledger_continues_the_paired_gates_on_appended_cases() -> None:
    rng = random.Random(11)
    cand, stable = paired_records(rng, 240, 0.03, 0.01)
    first = begin(dataset(120), [])
    run(first, cand[:120], stable[:120])
    entry = first.entry()
    assert entry.verdict == INCONCLUSIVE and entry.cases == 120
    entries = ledger_of({"evaluationLedger": ledger_with({}, entry)})  # status round trip
    later = begin(dataset(240), entries)
    assert later.begun.offset == 120
    assert later.others["maxAccuracyDrop"].cases == 120
    run(later, cand[120:], stable[120:])
    whole = begin(dataset(240), [])
    run(whole, cand, stable)
    for gate in PAIRED:
        assert later.others[gate].evidence() == pytest.approx(whole.others[gate].evidence())


@pytest.mark.parametrize(
    ("baseline", "paired", "restarted"),
    [
        ("stable2", {}, {"maxAccuracyDrop", "maxNegativeFlipRate"}),
        ("stable1", {"maxAccuracyDrop": "0.03"}, {"maxAccuracyDrop"}),
    ],
)
def test_another_stable_or_threshold_restarts_that_gate_alone_on_new_cases(
    baseline: str, paired: dict[str, str], restarted: set[str]
) -> None:
    """minAccuracy's test goes on; the changed gate's starts again on the cases after those
    counted, never on the counted ones (a stable changed back and forth buys no fresh look)."""
    cand, stable = paired_records(random.Random(2), 60, 0.02, 0.02)
    first = begin(dataset(60), [])
    run(first, cand, stable)
    gates = {**{str(g): t for g, t in PAIRED.items()}, **paired}
    later = begin(dataset(120), [first.entry()], baseline, **gates)
    assert later.begun.offset == 60 and later.begun.restarted is None
    assert later.gate == first.gate  # minAccuracy continued
    assert {str(g) for g in later.begun.notes} == restarted
    for gate, test in later.others.items():
        assert test.cases == (0 if str(gate) in restarted else 60)
    entry = later.entry()
    assert entry.baseline == baseline
    shown = {g.gate: g.restarted for g in entry.gates}
    assert all("a new test on the cases after the 60 counted" in shown[g] for g in restarted)  # type: ignore[operator]


def test_the_decision_record_shows_every_gate_and_fits_status() -> None:
    cand, stable = paired_records(random.Random(5), 2000, 0.10, 0.0, both=0.85)
    test = begin(dataset(2000), [])
    used = run(test, cand, stable)
    gates = EvaluationGates.model_validate({"minAccuracy": "0.7", **PAIRED})
    decision = decide_sequential(
        gates, test.entry(), test.gate, cand[:used], stable[:used], ("d",), test.others
    )
    shown = {g.gate: g for g in decision.gates}
    assert list(shown) == ["minAccuracy", "maxAccuracyDrop", "maxNegativeFlipRate"]
    drop = shown["maxAccuracyDrop"]
    assert drop.verdict == FAILED and drop.side == "max" and drop.threshold == "0.02"
    assert float(drop.interval.lower) > 0.02  # read as stable - candidate
    assert decision.result == FAILED and all(g.sequential for g in decision.gates)
    EvaluationDecisionStatus.model_validate(decision.model_dump(mode="json", by_alias=True))
    assert "maxAccuracyDrop: pass evidence" in decision.sequential.line()  # type: ignore[union-attr]


def test_a_decided_gate_reads_no_more_and_the_family_verdict() -> None:
    gate = fed(fresh(Gate.MAX_NEGATIVE_FLIP_RATE, "0.05", 0.025), [0.0] * 400)
    assert gate.verdict() == PASSED
    assert fed(gate, [1.0] * 50) == gate
    assert overall([PASSED, PASSED]) == PASSED
    assert overall([PASSED, INCONCLUSIVE]) == INCONCLUSIVE
    assert overall([INCONCLUSIVE, FAILED]) == FAILED


@pytest.mark.parametrize("gate", [Gate.MAX_ACCURACY_DROP, Gate.MAX_NEGATIVE_FLIP_RATE])
def test_at_its_threshold_each_gate_errs_within_its_bound(gate: Gate) -> None:
    """Seeded, 300 runs of 300 cases, a look after every case: the error rate of each side
    within alpha plus 2.58 Monte Carlo standard errors (bench/gate_looks.py runs more)."""
    rng = random.Random(str(gate))
    passes = fails = 0
    for _ in range(300):
        if gate == Gate.MAX_ACCURACY_DROP:  # stable-only 5 %, candidate-only 3 %: drop 0.02
            xs = [
                -1.0 if (u := rng.random()) < 0.05 else 1.0 if u < 0.08 else 0.0 for _ in range(300)
            ]
        else:
            xs = [1.0 if rng.random() < 0.05 else 0.0 for _ in range(300)]
        verdict = fed(fresh(gate, PAIRED[gate], 0.025), xs).verdict()
        passes += verdict == PASSED
        fails += verdict == FAILED
    bound = 0.025 + 2.58 * (0.025 * 0.975 / 300) ** 0.5
    assert passes / 300 <= bound and fails / 300 <= bound


def sliced_dataset(slices: list[str]) -> bytes:
    line = {"questions": {"q": {"type": "noul"}}, "expected": {"q": True}}
    rows = [{**line, "state": {"i": i}, "slice": name} for i, name in enumerate(slices)]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def sliced_record(right: bool, name: str) -> CaseRecord:
    return CaseRecord(
        pairs=1, correct=int(right), brier=0.0, points=(), slice=name, rights=(right,)
    )


def test_slices_with_enough_cases_are_gated_at_their_bonferroni_share() -> None:
    cases = parse_dataset(sliced_dataset(["a"] * 40 + ["b"] * 40 + ["c"] * 5), MAX_CASES)
    slices = SliceGates(min_accuracy="0.6", max_accuracy_drop="0.1", min_cases=30)
    compared = other_gates({"maxAccuracyDrop": "0.02"}, slices, cases, "stable1")
    assert compared.written == {
        "maxAccuracyDrop": "0.02",
        "slices[a].minAccuracy": "0.6",
        "slices[a].maxAccuracyDrop": "0.1",
        "slices[b].minAccuracy": "0.6",
        "slices[b].maxAccuracyDrop": "0.1",
    }
    assert set(compared.shares.values()) == {4} and compared.baseline == "stable1"
    alone = other_gates({}, slices, cases, None)  # no stable: no drop, half the comparisons
    assert alone.written == {"slices[a].minAccuracy": "0.6", "slices[b].minAccuracy": "0.6"}
    assert set(alone.shares.values()) == {2} and alone.baseline is None


def test_a_fragile_slice_fails_its_gate_and_the_ledger_keeps_every_slice() -> None:
    names = ["main", "fragile"] * 300
    raw = sliced_dataset(names)
    slices = SliceGates(min_accuracy="0.6", min_cases=30)
    plan = other_gates({}, slices, parse_dataset(raw, MAX_CASES), None)
    test = SequentialRun.begin(
        [], "rev1", "0.5", "0.95", raw, parse_dataset(raw, MAX_CASES), others=plan
    )
    rng = random.Random(4)
    cand = [sliced_record(rng.random() < (0.95 if n == "main" else 0.3), n) for n in names]
    used = run(test, cand, cand)
    entry = test.entry()
    verdicts = {g.gate: g.verdict for g in entry.gates}
    assert verdicts["slices[fragile].minAccuracy"] == FAILED and entry.verdict == FAILED
    assert used < len(names) and all(g.comparisons == 2 for g in entry.gates)
    gates = EvaluationGates.model_validate({"minAccuracy": "0.5"})
    decision = decide_sequential(gates, entry, test.gate, cand[:used], None, ("d",), test.others)
    fragile = next(g for g in decision.gates if g.gate == "slices[fragile].minAccuracy")
    assert fragile.side == "min" and fragile.interval.figure.startswith("slice fragile accuracy")
    EvaluationDecisionStatus.model_validate(decision.model_dump(mode="json", by_alias=True))


def test_a_slice_appearing_later_raises_the_others_share_and_starts_its_own_test() -> None:
    slices = SliceGates(min_accuracy="0.6", min_cases=30)
    first_raw = sliced_dataset(["a"] * 60 + ["b"] * 10)
    cases = parse_dataset(first_raw, MAX_CASES)
    first = SequentialRun.begin(
        [], "rev1", "0.5", "0.95", first_raw, cases,
        others=other_gates({}, slices, cases, None),
    )  # fmt: skip
    records = [sliced_record(i % 3 != 0, c.slice or "") for i, c in enumerate(cases)]
    run(first, records, records)
    assert {g.gate for g in first.entry().gates} == {"slices[a].minAccuracy"}
    more_raw = first_raw + sliced_dataset(["b"] * 30).replace(b'"i": ', b'"i": 1000')
    more = parse_dataset(more_raw, MAX_CASES)
    later = SequentialRun.begin(
        [first.entry()], "rev1", "0.5", "0.95", more_raw, more,
        others=other_gates({}, slices, more, None),
    )  # fmt: skip
    assert later.begun.offset == 70 and later.begun.restarted is None
    assert later.begun.shares == {"slices[a].minAccuracy": 2, "slices[b].minAccuracy": 2}
    assert (
        later.others["slices[a].minAccuracy"].cases == first.others["slices[a].minAccuracy"].cases
    )
    assert later.others["slices[a].minAccuracy"].alpha == pytest.approx(0.025 / 2)
    assert later.others["slices[b].minAccuracy"].cases == 0 and not later.begun.notes


def test_the_ece_gates_join_the_test_and_the_ledger_continues_them() -> None:
    """maxECE judges the candidate alone (no stable needed); maxECEIncrease only with one; both
    kept in the ledger (status round trip) and continued exactly on appended cases."""
    raw = dataset(600)
    cases = parse_dataset(raw, MAX_CASES)
    gates = {"maxECE": "0.1", "maxECEIncrease": "0.05"}
    assert other_gates(gates, None, cases, None).written == {"maxECE": "0.1"}
    plan = other_gates(gates, None, cases, "stable1")
    assert plan.written == gates and plan.baseline == "stable1"
    rng = random.Random(12)
    cand, stable = paired_records(rng, 600, 0.0, 0.0)
    first = SequentialRun.begin([], "rev1", "0.5", "0.95", dataset(300), cases[:300], others=plan)
    run(first, cand[:300], stable[:300])
    entry = first.entry()
    assert [e.gate for e in entry.ece] == ["maxECE", "maxECEIncrease"]
    status = {"evaluationLedger": ledger_with({}, entry)}
    later = SequentialRun.begin(ledger_of(status), "rev1", "0.5", "0.95", raw, cases, others=plan)
    assert later.begun.offset == entry.cases and later.ece == first.ece
    decision = decide_sequential(
        EvaluationGates.model_validate({"minAccuracy": "0.5", **gates}),
        entry, first.gate, cand[: entry.cases], stable[: entry.cases], ("d",),
        first.others, first.ece,
    )  # fmt: skip
    shown = {g.gate: g for g in decision.gates}
    assert shown["maxECE"].side == "max" and shown["maxECE"].sequential
    assert "maxECE: bounds [" in decision.lines()[-1]
    EvaluationDecisionStatus.model_validate(decision.model_dump(mode="json", by_alias=True))

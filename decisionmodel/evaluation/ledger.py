"""The evaluation ledger: one sequential test per candidate revision, continued across
evaluations so that a retry or added cases cannot buy a pass (issue 35 item 4).

A sequential evaluation (``spec.rollout.evaluation.sequential``) judges ``minAccuracy`` by
betting (:mod:`decisionmodel.evaluation.sequential`) after every case and stops as soon as the
gate is decided. Its state is a few numbers, kept in ``status.evaluationLedger`` per revision:

- **lineage**: the digest of the dataset's first ``cases`` cases (their bytes as read). The
  next evaluation of the same revision continues the test only when the dataset still starts
  with exactly those cases (cases appended, or ``maxCases`` raised); it then feeds the cases
  after them only. Re-feeding a case already counted would multiply the bettors' wealth on
  evidence already used (a retry on the same dataset would be a fresh look at old data).
- A dataset that no longer starts with those cases (edited, reordered, replaced) starts a new
  test, said so in the decision record: a new sample is new evidence; the old test's verdict
  stays in the history of the run that reached it.
- **confidence**: the strictest one the test was judged at; lowering ``confidence`` between
  evaluations does not lower the bar (the bettors' wealth does not depend on it, the verdict's
  bar does, so raising it is always sound).
- a changed ``minAccuracy`` is another hypothesis: a new test. A paired gate
  (``maxAccuracyDrop``, ``maxNegativeFlipRate``: sequential_gates.py) with another threshold, or
  against another stable revision, is a new test of that gate alone, on the cases after those
  counted (minAccuracy's goes on; a stable changed back and forth buys no fresh look at old
  cases).
- a gate decided while the others read on keeps its own count of cases (``accuracy_cases``,
  each paired gate's ``cases``): raising ``confidence`` later can reopen it, and its next bets
  are computed from the cases it counted.

Numbers only: no case, label or answer; the digest binds the lineage without showing content.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.evaluation.dataset import GoldenCase
from decisionmodel.evaluation.decimal_format import render4
from decisionmodel.evaluation.sequential import Bettor, SequentialGate
from decisionmodel.evaluation.sequential_ece import ECE_GATES, EceGate
from decisionmodel.evaluation.sequential_gates import KINDS, base_gate, fresh, fresh_named, overall
from decisionmodel.vocabulary import EvaluationResult, Gate

# Revisions whose test status keeps (the newest first): enough for undo and rollback-to.
LEDGER_REVISIONS: Final = 8
DIGEST_HEX: Final = 16


class BettorsState(BaseModel):
    """A test's two bettors as numbers: their wealth as shown, and exactly (repr of floats)
    the state the next evaluation continues from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pass_evidence: str = Field(max_length=32)
    fail_evidence: str = Field(max_length=32)
    total: str = Field(max_length=32)
    squares: str = Field(max_length=32)
    pass_log_wealth: str = Field(max_length=32)
    fail_log_wealth: str = Field(max_length=32)

    @staticmethod
    def of(test: SequentialGate) -> dict[str, str]:
        assert test.passer is not None and test.failer is not None
        passing, failing = test.evidence()
        return {
            "pass_evidence": _wealth(passing),
            "fail_evidence": _wealth(failing),
            "total": repr(test.passer.total),
            "squares": repr(test.passer.squares),
            "pass_log_wealth": repr(test.passer.log_wealth),
            "fail_log_wealth": repr(test.failer.log_wealth),
        }

    def continued(self, gate: SequentialGate, n: int) -> SequentialGate:
        """``gate`` (fresh) with its bettors where this state left them, after ``n`` cases."""
        assert gate.passer is not None and gate.failer is not None
        up, down = gate.passer.direction, gate.failer.direction
        sums = (n, float(self.total), float(self.squares))
        passer = Bettor(up, float(self.pass_log_wealth), *sums)
        return replace(gate, passer=passer, failer=Bettor(down, float(self.fail_log_wealth), *sums))


class LedgerGate(BettorsState):
    """A gate's test within a revision's, besides minAccuracy: maxAccuracyDrop,
    maxNegativeFlipRate, or a slice's gate (``slices[fraud].minAccuracy``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gate: str = Field(max_length=96)
    threshold: str = Field(max_length=16)
    cases: int = Field(ge=0)
    verdict: EvaluationResult
    restarted: str | None = Field(default=None, max_length=200)
    # A slice's gate is judged at alpha over this many comparisons (Bonferroni).
    comparisons: int | None = Field(default=None, ge=1)

    @classmethod
    def of_test(cls, name: str, begun: TestStart, test: SequentialGate) -> LedgerGate:
        return cls(
            gate=name,
            threshold=begun.written[name],
            cases=test.cases,
            verdict=test.verdict(),
            **BettorsState.of(test),
            restarted=begun.notes.get(name),
            comparisons=begun.shares.get(name),
        )

    def restored(self, alpha: float) -> SequentialGate:
        return self.continued(fresh_named(self.gate, self.threshold, alpha), self.cases)

    def line(self) -> str:
        text = (
            f"{self.gate}: pass evidence {self.pass_evidence}, fail evidence "
            f"{self.fail_evidence} over {self.cases} cases"
        )
        return f"{text} ({self.restarted})" if self.restarted else text


class LedgerEce(BaseModel):
    """An ECE gate's test within a revision's (maxECE, maxECEIncrease: sequential_ece.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gate: str = Field(max_length=32)
    threshold: str = Field(max_length=16)
    cases: int = Field(ge=0)
    verdict: EvaluationResult
    lower: str = Field(max_length=16)
    upper: str = Field(max_length=16)
    restarted: str | None = Field(default=None, max_length=200)
    # The sums the next evaluation continues from: JSON numbers, exact.
    state: str = Field(max_length=4000)

    @classmethod
    def of_test(cls, name: str, begun: TestStart, test: EceGate) -> LedgerEce:
        lower, upper = test.bounds()
        return cls(
            gate=name,
            threshold=begun.written[name],
            cases=test.cases,
            verdict=test.verdict(),
            lower=render4(lower),
            upper=render4(upper),
            restarted=begun.notes.get(name),
            state=json.dumps(test.to_wire(), separators=(",", ":")),
        )

    def restored(self, alpha: float) -> EceGate:
        return EceGate.from_wire(json.loads(self.state)).at_alpha(alpha)

    def line(self) -> str:
        text = f"{self.gate}: bounds [{self.lower}, {self.upper}] over {self.cases} cases"
        return f"{text} ({self.restarted})" if self.restarted else text


class LedgerEntry(BettorsState):
    """One revision's sequential test: what it has consumed and where its bettors stand."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    revision: str = Field(max_length=64)
    threshold: str = Field(max_length=16)
    confidence: str = Field(max_length=16)
    dataset_prefix: str = Field(max_length=64)
    cases: int = Field(ge=0)
    this_evaluation: int = Field(ge=0)
    dataset_cases: int = Field(ge=0)
    evaluations: int = Field(ge=1)
    verdict: EvaluationResult
    needed: str = Field(max_length=32)
    restarted: str | None = Field(default=None, max_length=200)
    # minAccuracy's own count when it was decided before the paired gates (else ``cases``).
    accuracy_cases: int | None = Field(default=None, ge=0)
    # The other gates (paired ones judged against ``baseline``, the stable revision's hash).
    gates: list[LedgerGate] = Field(default_factory=list, max_length=64)
    baseline: str | None = Field(default=None, max_length=64)
    ece: list[LedgerEce] = Field(default_factory=list, max_length=len(ECE_GATES))

    @property
    def stopped_early(self) -> bool:
        return self.this_evaluation > 0 and self.cases < self.dataset_cases

    def line(self) -> str:
        """What the decision record says of the test, beside the gate's own line."""
        text = (
            f"sequential test: {self.cases} cases in all, {self.this_evaluation} in this "
            f"evaluation (evaluation {self.evaluations}); pass evidence {self.pass_evidence}, "
            f"fail evidence {self.fail_evidence}, {self.needed} decides"
        )
        for line in [g.line() for g in self.gates] + [e.line() for e in self.ece]:
            text += f"; {line}"
        if self.stopped_early:
            text += f"; stopped after {self.cases} of the dataset's {self.dataset_cases} cases"
        elif self.verdict == EvaluationResult.INCONCLUSIVE:
            text += (
                "; every case read is counted: append cases to the dataset (and raise "
                "maxCases if it reached it) to continue the test"
            )
        if self.restarted:
            text += f"; {self.restarted}"
        return text


@dataclass(frozen=True)
class TestStart:
    """Where an evaluation's test starts: minAccuracy's state and the other gates' (read from
    the case records after each round: the paired ones against ``baseline``, the slices'),
    the cases already counted, the evaluations before this one, and why an earlier test was
    not continued (if one was not)."""

    gate: SequentialGate
    offset: int
    evaluations: int
    confidence: Decimal
    restarted: str | None = None
    others: dict[str, SequentialGate] = field(default_factory=dict)
    baseline: str | None = None
    # The other gates' thresholds as the spec writes them (a drop is tested negated).
    written: dict[str, str] = field(default_factory=dict)
    # Why another gate's earlier test was not continued (another threshold or stable).
    notes: dict[str, str] = field(default_factory=dict)
    # A slice's gate: the comparisons its alpha is shared among (Bonferroni).
    shares: dict[str, int] = field(default_factory=dict)
    ece: dict[str, EceGate] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """Numbers only: a retried attempt of the same evaluation starts where this one did
        (the ledger in status may already hold this evaluation's own result)."""
        return {
            "gate": self.gate.to_wire(),
            "offset": self.offset,
            "evaluations": self.evaluations,
            "confidence": str(self.confidence),
            "restarted": self.restarted,
            "others": {g: s.to_wire() for g, s in self.others.items()},
            "baseline": self.baseline,
            "written": self.written,
            "notes": self.notes,
            "shares": self.shares,
            "ece": {g: e.to_wire() for g, e in self.ece.items()},
        }

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> TestStart:
        return cls(
            SequentialGate.from_wire(raw["gate"]),
            int(raw["offset"]),
            int(raw["evaluations"]),
            Decimal(raw["confidence"]),
            raw.get("restarted"),
            {g: SequentialGate.from_wire(w) for g, w in (raw.get("others") or {}).items()},
            raw.get("baseline"),
            dict(raw.get("written") or {}),
            dict(raw.get("notes") or {}),
            {g: int(k) for g, k in (raw.get("shares") or {}).items()},
            {g: EceGate.from_wire(w) for g, w in (raw.get("ece") or {}).items()},
        )


@dataclass(frozen=True)
class OtherGates:
    """What a test judges besides minAccuracy: each gate's threshold as written (the paired
    ones only with a stable ``baseline`` to compare with), and the slices' Bonferroni shares."""

    written: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None
    shares: dict[str, int] = field(default_factory=dict)

    def alpha(self, name: str, confidence: Decimal) -> float:
        return alpha_of(confidence) / self.shares.get(name, 1)

    def fresh(self, name: str, confidence: Decimal) -> SequentialGate | EceGate:
        """A new test of ``name``."""
        threshold, alpha = self.written[name], self.alpha(name, confidence)
        if name in ECE_GATES:
            return EceGate.fresh(float(threshold), alpha, name == Gate.MAX_ECE_INCREASE)
        return fresh_named(name, threshold, alpha)

    def split(
        self, tests: dict[str, SequentialGate | EceGate]
    ) -> tuple[dict[str, SequentialGate], dict[str, EceGate]]:
        others = {g: t for g, t in tests.items() if isinstance(t, SequentialGate)}
        return others, {g: t for g, t in tests.items() if isinstance(t, EceGate)}


def compares_with_stable(name: str) -> bool:
    """Whether the gate named ``name`` judges the candidate against the stable's answers."""
    if name in ECE_GATES:
        return name == Gate.MAX_ECE_INCREASE
    return KINDS[base_gate(name)].paired


def alpha_of(confidence: Decimal) -> float:
    """Each verdict's error: (1 - confidence) / 2, as the fixed-n gates."""
    return float((1 - confidence) / 2)


def prefix_digests(raw: bytes, cases: list[GoldenCase]) -> list[str]:
    """For k = 0 … len(cases): the digest of the dataset's bytes up to the end of case k's
    line (k = 0: of nothing), the lineage a test is continued on."""
    lines = raw.split(b"\n")
    found = [hashlib.sha256(b"").hexdigest()[:DIGEST_HEX]]
    digest = hashlib.sha256()
    done = 0
    for case in cases:
        for line in lines[done : case.line]:
            digest.update(line + b"\n")
        done = case.line
        found.append(digest.copy().hexdigest()[:DIGEST_HEX])
    return found


def start(
    entries: list[LedgerEntry],
    revision: str,
    threshold: str,
    confidence: Decimal,
    digests: list[str],
    others: OtherGates | None = None,
) -> TestStart:
    """The test this evaluation continues, or a new one (and why the earlier one was not)."""
    plan = others or OtherGates()
    tests, ece = plan.split({g: plan.fresh(g, confidence) for g in plan.written})
    fresh_start = TestStart(
        fresh(Gate.MIN_ACCURACY, threshold, alpha_of(confidence)),
        0,
        0,
        confidence,
        others=tests,
        baseline=plan.baseline,
        written=plan.written,
        shares=plan.shares,
        ece=ece,
    )
    prior = next((e for e in entries if e.revision == revision), None)
    if prior is None:
        return fresh_start
    why = None
    if Decimal(prior.threshold) != Decimal(threshold):
        why = f"minAccuracy changed from {prior.threshold}: a new test"
    elif prior.cases >= len(digests):
        why = (
            f"the dataset (or maxCases) now gives fewer cases than the {prior.cases} the "
            "earlier test counted: a new test on this dataset"
        )
    elif digests[prior.cases] != prior.dataset_prefix:
        why = (
            f"the dataset no longer starts with the {prior.cases} cases the earlier test "
            "counted: a new test on this dataset"
        )
    if why is not None:
        return replace(fresh_start, restarted=why)
    return _continued_start(prior, plan, max(confidence, Decimal(prior.confidence)))


def _continued_start(prior: LedgerEntry, plan: OtherGates, confidence: Decimal) -> TestStart:
    """minAccuracy's test continued at ``confidence`` (the strictest yet), and each other
    gate's where ``prior`` tested it alike (:func:`_continued`)."""
    shares = dict(plan.shares)
    found = {
        name: _continued(name, prior, replace(plan, shares=shares), confidence)
        for name in plan.written
    }
    for name, (_, _, share) in found.items():
        if share is not None:
            shares[name] = share
    tests, ece = plan.split({name: test for name, (test, _, _) in found.items()})
    return TestStart(
        _restored(prior, confidence),
        prior.cases,
        prior.evaluations,
        confidence,
        others=tests,
        baseline=plan.baseline,
        written=plan.written,
        notes={name: note for name, (_, note, _) in found.items() if note is not None},
        shares=shares,
        ece=ece,
    )


def _continued(
    name: str, prior: LedgerEntry, plan: OtherGates, confidence: Decimal
) -> tuple[SequentialGate | EceGate, str | None, int | None]:
    """The gate's test continued where ``prior`` tested the same threshold (against the same
    stable, for one that compares), at the stricter of its shares; else a new test of it on
    the cases after those counted (never the counted ones again: minAccuracy goes on, and a
    stable changed back and forth must not buy fresh looks at old cases), and why. Also the
    share it is judged at (None: not a slice's)."""
    earlier: dict[str, LedgerGate | LedgerEce] = {g.gate: g for g in prior.gates}
    earlier |= {e.gate: e for e in prior.ece}
    was, threshold = earlier.get(name), plan.written[name]
    compares = compares_with_stable(name)
    share = plan.shares.get(name)
    alike = was is not None and Decimal(was.threshold) == Decimal(threshold)
    if was is not None and alike and (not compares or prior.baseline == plan.baseline):
        if share is not None and isinstance(was, LedgerGate):
            share = max(share, was.comparisons or 1)  # never a looser bar than before
        alpha = alpha_of(confidence) / (share or 1)
        return was.restored(alpha), None, share
    note = None
    if was is not None:
        against = f" against revision {prior.baseline}" if compares else ""
        note = (
            f"a new test on the cases after the {prior.cases} counted "
            f"(was {was.threshold}{against})"
        )
    return plan.fresh(name, confidence), note, share


def _restored(prior: LedgerEntry, confidence: Decimal) -> SequentialGate:
    gate = fresh(Gate.MIN_ACCURACY, prior.threshold, alpha_of(confidence))
    return prior.continued(
        gate, prior.cases if prior.accuracy_cases is None else prior.accuracy_cases
    )


def entry_of(
    begun: TestStart,
    gate: SequentialGate,
    revision: str,
    threshold: str,
    digests: list[str],
    *,
    fed: int | None = None,
    others: dict[str, SequentialGate] | None = None,
    ece: dict[str, EceGate] | None = None,
) -> LedgerEntry:
    """The ledger entry once this evaluation fed the test ``fed`` cases (by default all the
    cases ``gate`` read): ``gate`` minAccuracy's test, ``others`` the other gates'."""
    assert gate.passer is not None and gate.failer is not None
    cases = begun.offset + fed if fed is not None else gate.cases
    tests = others if others is not None else begun.others
    eces = ece if ece is not None else begun.ece
    judged = [gate.verdict()] + [t.verdict() for t in tests.values()]
    judged += [e.verdict() for e in eces.values()]
    return LedgerEntry(
        revision=revision,
        threshold=threshold,
        confidence=str(begun.confidence),
        dataset_prefix=digests[cases],
        cases=cases,
        this_evaluation=cases - begun.offset,
        dataset_cases=len(digests) - 1,
        evaluations=begun.evaluations + 1,
        verdict=overall(judged),
        needed=_wealth(1 / gate.alpha),
        restarted=begun.restarted,
        **BettorsState.of(gate),
        accuracy_cases=gate.cases if gate.cases != cases else None,
        gates=[LedgerGate.of_test(g, begun, t) for g, t in tests.items()],
        baseline=begun.baseline if tests or eces else None,
        ece=[LedgerEce.of_test(g, begun, t) for g, t in eces.items()],
    )


def with_entry(entries: list[LedgerEntry], entry: LedgerEntry) -> list[LedgerEntry]:
    """``entry`` first, the other revisions' after it, at most :data:`LEDGER_REVISIONS`."""
    others = [e for e in entries if e.revision != entry.revision]
    return [entry, *others][:LEDGER_REVISIONS]


def _wealth(value: float) -> str:
    if value >= 1e6:
        return f"{value:.3g}"
    return f"{value:.4g}"

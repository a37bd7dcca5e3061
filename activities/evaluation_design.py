"""The check_evaluation_design activity: what the golden set can decide, before anything of the
revision is made (issue 35 item 6).

It reads the dataset as the evaluation will (the same reader, the same maxCases), keeps only
its shape (cases, cases per slice) and judges each gate with ``decisionmodel.evaluation.design``:

- a gate no outcome can decide, or one no outcome can pass while ``onInconclusive`` is Reject
  (every candidate would be rolled back; not for a sequential test, which the next evaluation
  continues on appended cases), fails the rollout at once with
  InvalidEvaluationPolicy, naming the field and the fix; nothing was made, the stable serves;
- a gate the dataset decides with less than 80 % power for a candidate one margin better is
  said at once (Evaluated=Unknown/EvaluationUnderpowered, a Warning Event) and the rollout goes
  on;
- a malformed dataset fails at once with DatasetInvalid (as the evaluation would, later);
  a dataset that cannot be read yet (missing, its Secret unlabelled) is left to the evaluation
  step, whose guards hold and say so.

Numbers only leave it: no case, label or answer.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from temporalio import activity

from activities import step_status
from activities.step_status import writes_step_status
from activities.typed_errors import typed_errors
from decisionmodel.errors import DmrolloutError, InvalidEvaluationPolicy
from decisionmodel.evaluation import parse_dataset
from decisionmodel.evaluation.design import GateDesign, design
from decisionmodel.rollout.contracts import (
    CHECK_EVALUATION_DESIGN,
    EvaluationDesign,
    EvaluationDesignInput,
    EvaluationPolicy,
)
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from kube.secrets import SecretReader


class EvaluationDesignActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings) -> None:
        self.kube = kube
        self.settings = settings
        self.secrets = SecretReader(kube)

    @activity.defn(name=CHECK_EVALUATION_DESIGN)
    @writes_step_status(step_status.designed, enter=False)
    async def check_evaluation_design(self, inp: EvaluationDesignInput) -> EvaluationDesign:
        policy = inp.policy
        async with typed_errors():
            try:
                raw = await self.secrets.dataset(inp.dm.namespace, policy.dataset, inp.dm)
            except DmrolloutError as err:
                if err.permanent:
                    raise
                return EvaluationDesign(checked=False, message=f"not checked: {err}"[:1000])
            cases = parse_dataset(raw, policy.max_cases)
            del raw
            slices = Counter(c.slice for c in cases if c.slice is not None)
            found = judged(policy, len(cases), dict(slices))
            refusal = refused(policy, found)
            if refusal is not None:
                raise InvalidEvaluationPolicy(refusal)
        return EvaluationDesign(
            checked=True, cases=len(cases), gates=found, message=summary(policy, found)
        )


def judged(policy: EvaluationPolicy, cases: int, slices: dict[str, int]) -> list[GateDesign]:
    assert policy.confidence is not None  # the workflow checks only interval-judged gates
    slice_gates = policy.slices
    return design(
        policy.gates(),
        Decimal(policy.confidence),
        cases,
        slices,
        {"minAccuracy": slice_gates.min_accuracy, "maxAccuracyDrop": slice_gates.max_accuracy_drop}
        if slice_gates is not None
        else None,
        slice_gates.min_cases if slice_gates is not None else 30,
        sequential=bool(policy.sequential),
    )


def refused(policy: EvaluationPolicy, found: list[GateDesign]) -> str | None:
    """Why the rollout must not start (the field and the fix), or None."""
    # A sequential test is continued by the next evaluation of the revision (status's ledger):
    # one that cannot pass on these cases still counts them, and a retry once cases are
    # appended goes on from there. Only a fixed-n rejection is the end of the evidence.
    rejecting = policy.inconclusive_action == "Reject" and not policy.sequential
    for gate in found:
        if gate.can_pass or (gate.can_fail and not rejecting):
            continue
        why = (
            "no outcome can decide it (it would stay Inconclusive)"
            if not gate.can_fail
            else "no outcome can pass it, and onInconclusive: Reject would roll back every "
            "candidate"
        )
        more = (
            f"add cases (about {gate.cases_for_power} for 80 % power)"
            if gate.cases_for_power is not None
            else "add cases"
        )
        return (
            f"spec.rollout.evaluation.{gate.gate} {gate.threshold} on the golden set's "
            f"{gate.cases} cases at confidence {policy.confidence}: {why}. Fix: {more} to "
            f"{policy.dataset.kind} {policy.dataset.name} (maxCases {policy.max_cases} reads at "
            "most that many), lower confidence, or set onInconclusive: Hold; then dmrollout retry"
        )[:1000]
    return None


def summary(policy: EvaluationPolicy, found: list[GateDesign]) -> str:
    weak = [g for g in found if g.weak]
    if not weak:
        return "; ".join(g.line() for g in found)[:1000]
    return (
        "the golden set is too small to decide "
        + "; ".join(g.line() for g in weak)
        + f" (confidence {policy.confidence}; the evaluation runs all the same)"
    )[:1000]

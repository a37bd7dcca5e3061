"""The workflow input is not trusted for policy (issue 12, point 4).

Workflows started by hand with the Temporal client, as anyone with write access to the namespace
could: evaluate and promote re-read the live DecisionModel and refuse a policy (evaluation,
gates, promotion mode, approval) other than its own with PolicyMismatch; the candidate is rolled
back, the stable keeps serving, status says why and how to retry.
"""

from __future__ import annotations

import uuid
from typing import Any

from harness.helpers import async_assert_eventually
from harness.rollout_harness import RolloutHarness, golden_jsonl, put_model
from temporalio.client import WorkflowHandle

from decisionmodel.rollout.contracts import Phase, RolloutOutcome, RolloutProgress, RolloutResult
from workflows.rollout import RolloutWorkflow

EVALUATION = {
    "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
    "minAccuracy": "0.80",
}


async def gated_with_stable(h: RolloutHarness, name: str, rollout: dict[str, Any]) -> str:
    """A DecisionModel whose first revision was promoted under ``rollout``, now asking for a
    poor model (accuracy 0.2: it fails minAccuracy 0.80). Returns the stable's hash."""
    tag = f"poor{uuid.uuid4().hex[:6]}"
    put_model("laya", tag, accuracy=0.2, revision=tag)
    h.golden_configmap("golden", golden_jsonl(20))
    h.create_dm(name, {"model": "laya:en", "rollout": rollout})
    first = await h.rollout(name)
    assert first.result == RolloutResult.PROMOTED and first.revision is not None
    h.update_spec(name, {"model": f"laya:{tag}"})
    return first.revision


def assert_refused(
    h: RolloutHarness,
    name: str,
    outcome: RolloutOutcome,
    stable: str,
    result: RolloutResult = RolloutResult.ROLLED_BACK,
) -> str:
    """Rolled back with PolicyMismatch, the stable untouched; returns the failure message."""
    assert outcome.result == result, outcome
    assert outcome.reason == "PolicyMismatch", outcome
    status = h.status(name)
    assert status["stableRevision"]["hash"] == stable
    assert status["phase"] == str(result)
    failed = status["failedRevision"]
    assert failed["reason"] == "PolicyMismatch"
    assert "decisionmodel.io/retry" in failed["message"]
    assert not h.pods(name, failed["hash"]), "the refused candidate's Pods are deleted"
    return str(failed["message"])


async def test_a_hand_started_rollout_without_gates_does_not_promote(
    harness: RolloutHarness,
) -> None:
    stable = await gated_with_stable(harness, "forged", {"evaluation": EVALUATION})
    outcome = await harness.rollout("forged", evaluation=None)  # as `temporal workflow start`
    message = assert_refused(harness, "forged", outcome, stable)
    assert message.startswith("promotion refused:")
    assert "no evaluation" in message and "minAccuracy 0.80" in message


async def test_other_gates_are_refused_before_evaluating(harness: RolloutHarness) -> None:
    stable = await gated_with_stable(harness, "lowered", {"evaluation": EVALUATION})
    inp = harness.input_for("lowered")
    assert inp.evaluation is not None
    lowered = inp.evaluation.model_copy(update={"min_accuracy": "0.10"})
    before = harness.status("lowered")["evaluation"]  # the stable's, from its own rollout
    outcome = await harness.rollout("lowered", evaluation=lowered)
    message = assert_refused(harness, "lowered", outcome, stable)
    assert message.startswith("evaluation refused:") and "minAccuracy 0.10" in message
    # Refused before a case was sent: no evaluation of the candidate was recorded.
    assert harness.status("lowered")["evaluation"] == before


async def test_manual_cannot_be_skipped_by_leaving_the_stable_out(
    harness: RolloutHarness,
) -> None:
    """Without a stable in its input a rollout awaits no approval (the first revision is never
    held); the live DecisionModel has one, so promote refuses."""
    stable = await gated_with_stable(harness, "skip", {"promotion": "Manual"})
    outcome = await harness.rollout("skip", stable=None)
    # The run believes there is no stable, so it ends Failed; the stable serves all the same.
    message = assert_refused(harness, "skip", outcome, stable, RolloutResult.FAILED)
    assert "requires an approval" in message and "accepted none" in message


async def awaiting(handle: WorkflowHandle[Any, RolloutOutcome]) -> RolloutProgress:
    async def check() -> RolloutProgress:
        p: RolloutProgress = await handle.query(RolloutWorkflow.progress)
        assert p.phase == Phase.AWAITING_PROMOTION, p.phase
        return p

    return await async_assert_eventually(check, 90, what="AwaitingPromotion")


async def test_a_policy_changed_while_held_is_refused_before_promoting(
    harness: RolloutHarness,
) -> None:
    """No controller here to replace the run: the user adds gates while the candidate awaits
    approval; the approval it then gets does not promote it under the old (no) gates."""
    stable = await gated_with_stable(harness, "tightened", {"promotion": "Manual"})
    handle = await harness.start(harness.input_for("tightened"))
    waiting = await awaiting(handle)
    assert waiting.expected_approval is not None
    harness.update_spec("tightened", {"rollout": {"promotion": "Manual", "evaluation": EVALUATION}})
    await handle.signal(RolloutWorkflow.promote, waiting.expected_approval)
    message = assert_refused(harness, "tightened", await handle.result(), stable)
    assert message.startswith("promotion refused:") and "no evaluation" in message

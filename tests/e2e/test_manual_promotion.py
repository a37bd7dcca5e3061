"""Manual promotion: a candidate waits in AwaitingPromotion until the approval bound to it.

The approval a user sends is the query's ``expected_approval`` (``<revision>.<policy
fingerprint>.<dataset digest>``): a stale one (the revision promoted before) is refused as a
signal sent with the real ``temporal`` CLI — recorded in the query, a Promoted=False
ApprovalRejected condition and an ApprovalRejected Event, never applied — and as an update,
whose validator fails the call (as does an early one, before the phase is AwaitingPromotion).
The right approval, sent with the CLI, promotes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import RolloutHarness, golden_jsonl, put_model
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from decisionmodel.rollout.contracts import (
    Phase,
    RolloutOutcome,
    RolloutProgress,
    RolloutResult,
    workflow_id,
)
from localenv.paths import python_tool
from localenv.temporal import TemporalDevServer
from workflows.rollout import RolloutWorkflow

EVALUATION = {
    "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
    "minAccuracy": "0.80",
}


async def temporal_signal(server: TemporalDevServer, wf_id: str, approval: str) -> str:
    """``temporal workflow signal … --name promote``, as a user types it (JSON string input)."""
    proc = await asyncio.create_subprocess_exec(
        python_tool("temporal"),
        "workflow", "signal",
        "--workflow-id", wf_id,
        "--name", "promote",
        "--input", json.dumps(approval),
        "--address", server.address,
        "--namespace", server.namespace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text
    return text


async def progress(handle: WorkflowHandle[Any, RolloutOutcome]) -> RolloutProgress:
    return await handle.query(RolloutWorkflow.progress)


def events(h: RolloutHarness, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(h.kubectl("get", "events", "-o", "json"))["items"]
    return [e for e in items if e.get("reason") == reason]


def condition(h: RolloutHarness, dm: str, type_: str) -> dict[str, Any] | None:
    for c in h.status(dm).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return None


async def test_first_revision_with_manual_promotion_is_not_held(harness: RolloutHarness) -> None:
    harness.golden_configmap("golden", golden_jsonl(10))
    harness.create_dm(
        "fresh", {"model": "laya:en", "rollout": {"promotion": "Manual", "evaluation": EVALUATION}}
    )
    inp = harness.input_for("fresh")
    assert inp.promotion == "Manual" and inp.stable is None
    outcome = await harness.rollout("fresh", timeout=60)
    assert outcome.result == RolloutResult.PROMOTED, outcome
    assert harness.status("fresh")["phase"] == "Ready"
    assert events(harness, "AwaitingPromotion") == []
    handle = harness.client.get_workflow_handle(
        workflow_id(inp.dm, inp.requested_revision), result_type=RolloutOutcome
    )
    assert (await progress(handle)).expected_approval is None


async def test_manual_promotion_refuses_stale_and_accepts_bound_approval(
    harness: RolloutHarness, temporal_server: TemporalDevServer
) -> None:
    put_model("laya", "manual", accuracy=0.95, revision="manual")
    harness.golden_configmap("golden", golden_jsonl(20))
    harness.create_dm("held", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    first = await harness.rollout("held", timeout=60)
    assert first.result == RolloutResult.PROMOTED  # the first revision is never held
    assert first.revision is not None

    harness.update_spec(
        "held",
        {"model": "laya:manual", "rollout": {"promotion": "Manual", "evaluation": EVALUATION}},
    )
    inp = harness.input_for("held")
    handle = await harness.start(inp)
    wf_id = workflow_id(inp.dm, inp.requested_revision)
    # An early approval (nothing awaits promotion yet) is refused by the update's validator.
    with pytest.raises(WorkflowUpdateFailedError) as early:
        await handle.execute_update(RolloutWorkflow.approve, first.revision)
    assert "no candidate awaits promotion" in str(early.value.cause)

    async def awaiting() -> RolloutProgress:
        p = await progress(handle)
        assert p.phase == Phase.AWAITING_PROMOTION, p.phase
        return p

    waiting = await async_assert_eventually(awaiting, 60, what="AwaitingPromotion")
    candidate = waiting.revision
    assert candidate is not None and candidate != first.revision
    expected = waiting.expected_approval
    assert expected is not None and expected.startswith(f"{candidate}.")
    assert waiting.evaluation is not None and waiting.evaluation.result == "Passed"
    await eventually(
        lambda: harness.status("held").get("phase") == "AwaitingPromotion", 30, what="DM phase"
    )
    await eventually(
        lambda: events(harness, "AwaitingPromotion"), 30, what="AwaitingPromotion Event"
    )

    # A stale approval (the revision approved last time), as a signal from the CLI: refused.
    stale = first.revision
    await temporal_signal(temporal_server, wf_id, stale)

    async def rejected() -> RolloutProgress:
        p = await progress(handle)
        assert [r.approval for r in p.rejected_approvals] == [stale], p.rejected_approvals
        return p

    refused = await async_assert_eventually(rejected, 30, what="stale approval recorded")
    assert "does not match" in refused.rejected_approvals[0].why
    assert refused.phase == Phase.AWAITING_PROMOTION

    def rejected_condition() -> dict[str, Any] | None:
        c = condition(harness, "held", "Promoted")
        return c if c and c["reason"] == "ApprovalRejected" else None

    promoted_cond = await eventually(rejected_condition, 30, what="ApprovalRejected condition")
    assert promoted_cond is not None and promoted_cond["status"] == "False"
    assert stale in promoted_cond["message"]
    rejected_events = await eventually(
        lambda: events(harness, "ApprovalRejected"), 30, what="ApprovalRejected Event"
    )
    assert rejected_events[0]["type"] == "Warning"
    assert rejected_events[0]["involvedObject"]["name"] == "held"
    assert harness.status("held")["phase"] == "AwaitingPromotion"

    # The same stale approval as an update: the validator fails the call.
    with pytest.raises(WorkflowUpdateFailedError) as refused_update:
        await handle.execute_update(RolloutWorkflow.approve, stale)
    assert "does not match" in str(refused_update.value.cause)
    # The bare revision (without the policy and dataset binding) is stale too.
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update(RolloutWorkflow.approve, candidate)
    still = await progress(handle)
    assert still.phase == Phase.AWAITING_PROMOTION
    assert len(still.rejected_approvals) == 1  # updates are refused before they enter history
    svc = harness.get("service", "held")
    assert svc is not None
    assert svc["spec"]["selector"]["decisionmodel.io/revision"] == first.revision

    # The approval bound to this candidate, from the CLI: promotes.
    await temporal_signal(temporal_server, wf_id, expected)
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.result == RolloutResult.PROMOTED, outcome
    assert outcome.revision == candidate
    status = harness.status("held")
    assert status["phase"] == "Ready"
    assert status["stableRevision"]["hash"] == candidate
    svc = harness.get("service", "held")
    assert svc is not None
    assert svc["spec"]["selector"]["decisionmodel.io/revision"] == candidate

"""The controller compares a running rollout's policy with the spec, not only its revision
(issue 12, point 4): a run of the desired revision started by hand without the gates, or one
whose spec.rollout changed under it, is replaced; the stable keeps serving throughout."""

from __future__ import annotations

import json
import uuid
from typing import Any

from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import ControllerProcess, RolloutHarness, golden_jsonl, put_model

from controller.temporal.rollouts import dm_query
from decisionmodel.api import DecisionModel
from decisionmodel.rollout.contracts import RolloutResult
from decisionmodel.rollout.dispatch import DispatchSettings, rollout_input
from workflows.rollout import RolloutWorkflow

EVALUATION = {
    "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
    "minAccuracy": "0.80",
}


def events(h: RolloutHarness, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(h.kubectl("get", "events", "-o", "json"))["items"]
    return [e for e in items if e.get("reason") == reason]


async def test_a_hand_started_run_of_the_desired_revision_without_gates_is_replaced(
    ctl: RolloutHarness, controller: ControllerProcess
) -> None:
    tag = f"poor{uuid.uuid4().hex[:6]}"
    put_model("laya", tag, accuracy=0.2, revision=tag)
    ctl.golden_configmap("golden", golden_jsonl(20))
    ctl.create_dm("forged", {"model": "laya:en", "rollout": {"evaluation": EVALUATION}})
    await eventually(lambda: ctl.status("forged").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("forged")["stableRevision"]["hash"]

    # While the controller is down (else it would start its own run first): the spec moves
    # on, and someone starts what the controller would dispatch for it minus the gates, under
    # the very workflow ID the controller looks for (as `temporal workflow start` would).
    controller.kill()
    try:
        ctl.update_spec("forged", {"model": f"laya:{tag}"})
        forged = rollout_input(DecisionModel.from_k8s(ctl.dm("forged")), DispatchSettings())
        handle = await ctl.start(forged.model_copy(update={"evaluation": None}))
    finally:
        controller.start()

    # The controller's own run evaluates the poor model and rolls it back; nothing promoted it.
    failed = await eventually(
        lambda: (ctl.status("forged").get("failedRevision") or {}).get("reason"), 180, what="fail"
    )
    assert failed in ("EvaluationFailed", "PolicyMismatch")
    outcome = await handle.result()
    assert outcome.result != RolloutResult.PROMOTED, outcome
    assert ctl.status("forged")["stableRevision"]["hash"] == stable
    assert ctl.status("forged")["phase"] == "RolledBack"
    if failed == "EvaluationFailed":  # replaced by the controller (else promote refused it)
        replaced = events(ctl, "PolicyMismatch")
        assert replaced and handle.id in replaced[0]["message"]
        assert "docs/security.md" in replaced[0]["message"]


async def test_a_policy_changed_while_held_restarts_the_rollout_under_it(
    ctl: RolloutHarness,
) -> None:
    put_model("laya", "pol2", accuracy=0.95, revision="pol2")
    ctl.golden_configmap("golden", golden_jsonl(20))
    rollout = {"promotion": "Manual", "evaluation": EVALUATION}
    ctl.create_dm("retuned", {"model": "laya:en", "rollout": rollout})
    await eventually(lambda: ctl.status("retuned").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("retuned")["stableRevision"]["hash"]
    ctl.update_spec("retuned", {"model": "laya:pol2"})

    async def held_run(not_run: str | None = None) -> tuple[str, str]:
        query = f"{dm_query(ctl.namespace, 'retuned')} AND ExecutionStatus = 'Running'"
        runs = [wf async for wf in ctl.client.list_workflows(query) if wf.run_id != not_run]
        assert runs, "no running rollout"
        handle = ctl.client.get_workflow_handle(runs[0].id, run_id=runs[0].run_id)
        progress = await handle.query(RolloutWorkflow.progress)
        assert progress.expected_approval, progress.phase
        return runs[0].run_id, progress.expected_approval

    first_run, first_token = await async_assert_eventually(held_run, 120, what="held")
    ctl.update_spec(
        "retuned", {"rollout": {**rollout, "evaluation": {**EVALUATION, "maxCases": 10}}}
    )
    # The held run is replaced by one evaluated under the new gates: another approval token.
    _, token = await async_assert_eventually(lambda: held_run(first_run), 120, what="re-held")
    candidate = first_token.split(".")[0]
    assert token.startswith(f"{candidate}.") and token != first_token
    assert ctl.status("retuned")["stableRevision"]["hash"] == stable  # served throughout
    assert events(ctl, "PolicyMismatch")
    ctl.kubectl("annotate", "dm", "retuned", f"decisionmodel.io/promote={candidate}")
    await eventually(
        lambda: ctl.status("retuned")["stableRevision"]["hash"] == candidate, 90, what="promoted"
    )

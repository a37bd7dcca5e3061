"""Issue 34, "Undo freezes the model": `dmrollout undo` (decisionmodel.io/rollback-to) puts the
previous revision back, and the next spec change rolls the spec out again; the DecisionModel
says in between that it serves the rolled-back-to revision, not the spec. Before the fix the
annotation stayed in force for good: a spec change after an undo started nothing, without a
condition or an Event."""

from __future__ import annotations

import json
from typing import Any

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness, put_model
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecution
from test_cli_verbs import run

from controller.temporal.rollouts import dm_query

ANNOTATION = "decisionmodel.io/rollback-to"


def stable(ctl: RolloutHarness, name: str) -> dict[str, Any]:
    return dict(ctl.status(name).get("stableRevision") or {})


def dm_annotations(ctl: RolloutHarness, name: str) -> dict[str, str]:
    return dict(ctl.dm(name)["metadata"].get("annotations") or {})


def serving(ctl: RolloutHarness, name: str, model: str) -> bool:
    """``model`` is the stable, the phase Ready, and no candidate is left."""
    st = ctl.status(name)
    return (
        (st.get("stableRevision") or {}).get("model") == model
        and st.get("phase") == "Ready"
        and not st.get("candidateRevision")
    )


def event_reasons(ctl: RolloutHarness, name: str) -> set[str]:
    events = json.loads(ctl.kubectl("get", "events", "-o", "json"))["items"]
    return {
        str(e.get("reason"))
        for e in events
        if (e.get("regarding") or e.get("involvedObject") or {}).get("name") == name
    }


def condition_is(ctl: RolloutHarness, name: str, reason: str) -> dict[str, Any] | None:
    said = ctl.condition(name, "RollbackTo")
    return said if (said.get("status"), said.get("reason")) == ("True", reason) else None


def ended(ctl: RolloutHarness, name: str) -> bool:
    """No rollback-to in force: no annotation, no record, no condition."""
    return (
        ANNOTATION not in dm_annotations(ctl, name)
        and not ctl.status(name).get("rollbackTo")
        and ctl.condition(name, "RollbackTo") == {}
    )


async def runs_of(ctl: RolloutHarness, name: str) -> list[WorkflowExecution]:
    return [wf async for wf in ctl.client.list_workflows(dm_query(ctl.namespace, name))]


async def test_undo_serves_the_old_revision_until_the_next_spec_change(
    ctl: RolloutHarness,
) -> None:
    put_model("laya", "undo3", accuracy=0.9, revision="undo3")
    ctl.create_dm("undone", {"model": "laya:en"})
    await eventually(lambda: serving(ctl, "undone", "laya:en"), 120, what="v1 Ready")
    v1 = stable(ctl, "undone")
    ctl.update_spec("undone", {"model": "laya:multilingual"})
    await eventually(lambda: serving(ctl, "undone", "laya:multilingual"), 120, what="v2 Ready")
    generation = ctl.dm("undone")["metadata"]["generation"]

    undone = run(ctl, "undo", "undone", "-n", ctl.namespace)
    assert undone.returncode == 0, undone.stderr
    await eventually(lambda: stable(ctl, "undone") == v1, 120, what="v1 back as the stable")
    # The annotation has done its work: the controller removes it; status says what serves.
    await eventually(lambda: ANNOTATION not in dm_annotations(ctl, "undone"), 60, what="ended")
    assert ctl.status("undone").get("rollbackTo") == {
        "revision": v1["hash"],
        "generation": generation,
    }
    said = await eventually(
        lambda: condition_is(ctl, "undone", "RollbackServing"), 30, what="RollbackServing"
    )
    assert v1["hash"] in said["message"] and "laya:multilingual" in said["message"]
    assert "next spec change" in said["message"]
    assert ctl.dm("undone")["spec"]["model"] == "laya:multilingual"  # the spec untouched
    shown = run(ctl, "status", "undone", "-n", ctl.namespace)
    assert f"rollbackTo {v1['hash']} in place of spec generation {generation}" in shown.stdout

    # GitOps applies the next commit: it rolls out and is promoted (before: nothing started).
    ctl.update_spec("undone", {"model": "laya:undo3"})
    await eventually(lambda: serving(ctl, "undone", "laya:undo3"), 120, what="v3 promoted")
    await eventually(lambda: ended(ctl, "undone"), 30, what="the rollback ended")
    assert {"RollbackRequested", "RollbackSuperseded"} <= event_reasons(ctl, "undone")


async def test_a_spec_change_supersedes_an_undo_in_progress(ctl: RolloutHarness) -> None:
    """The rollback held for an approval (Manual promotion) when the spec changes: the
    rollback's run is cancelled before the spec's starts, never started again, and the new
    spec rolls out and is promoted."""
    put_model("laya", "undo3b", accuracy=0.9, revision="undo3b")
    ctl.create_dm("overtaken", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    await eventually(lambda: serving(ctl, "overtaken", "laya:en"), 120, what="v1 Ready")
    v1 = stable(ctl, "overtaken")
    await approve(ctl, "overtaken", {"model": "laya:multilingual"})
    generation = ctl.dm("overtaken")["metadata"]["generation"]

    assert run(ctl, "undo", "overtaken", "-n", ctl.namespace).returncode == 0
    await eventually(lambda: held_candidate(ctl, "overtaken") == v1["hash"], 120, what="held")
    assert ctl.status("overtaken").get("rollbackTo") == {
        "revision": v1["hash"],
        "generation": generation,
    }
    await eventually(
        lambda: condition_is(ctl, "overtaken", "RollbackInProgress"), 30, what="in progress"
    )
    rollback_run = ctl.status("overtaken")["rollout"]  # the run of the held candidate
    assert rollback_run["workflowId"].endswith(v1["hash"])

    ctl.update_spec("overtaken", {"model": "laya:undo3b"})
    await eventually(
        lambda: (
            (ctl.status("overtaken").get("candidateRevision") or {}).get("model") == "laya:undo3b"
        ),
        120,
        what="the spec's candidate",
    )
    await eventually(lambda: ended(ctl, "overtaken"), 30, what="the rollback ended")
    await approve(ctl, "overtaken", None)
    assert serving(ctl, "overtaken", "laya:undo3b")

    # One run of the rollback, cancelled before the spec's run started, never started again.
    runs = await runs_of(ctl, "overtaken")
    rollback_id = rollback_run["workflowId"]
    assert [r.run_id for r in runs if r.id == rollback_id] == [rollback_run["runId"]]
    newest = max(runs, key=lambda r: r.start_time)
    assert newest.id != rollback_id
    history = await ctl.client.get_workflow_handle(rollback_id).fetch_history()
    cancelled = [
        e.event_time.ToNanoseconds() / 1e9
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
    ]
    assert cancelled, "the rollback's run was not cancelled"
    assert cancelled[0] <= newest.start_time.timestamp() + 1e-3


def held_candidate(ctl: RolloutHarness, name: str) -> str | None:
    st = ctl.status(name)
    if st.get("phase") != "AwaitingPromotion":
        return None
    return (st.get("candidateRevision") or {}).get("hash")


async def approve(ctl: RolloutHarness, name: str, spec: dict[str, Any] | None) -> None:
    """Apply ``spec`` (None: the change is made), approve the held candidate, see it serve."""
    if spec is not None:
        ctl.update_spec(name, spec)
    candidate = await eventually(lambda: held_candidate(ctl, name), 120, what="held")
    model = ctl.status(name)["candidateRevision"]["model"]
    ctl.kubectl("annotate", "dm", name, f"decisionmodel.io/promote={candidate}")
    await eventually(lambda: serving(ctl, name, model), 120, what=f"{model} promoted")

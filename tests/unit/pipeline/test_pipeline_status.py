"""The hub's pipeline status from a run's record, and the controller's reading of a spec."""

from __future__ import annotations

from controller.hub.pipelines import read_spec, stamped
from decisionmodel.pipeline.contracts import Freight, PipelineRecord, PipelineRef
from decisionmodel.pipeline.stages import StageProgress
from decisionmodel.pipeline.status import run_phase, run_status
from decisionmodel.vocabulary import PipelinePhase, StageState


def record(*states: StageState, message: str = "") -> PipelineRecord:
    return PipelineRecord(
        pipeline=PipelineRef(namespace="hub", name="p"),
        revision="r",
        freight=Freight(model="laya:en", digest="a" * 64),
        stages={f"s{i}": StageProgress(state=s) for i, s in enumerate(states)},
        clusters={"s0": "staging"},
        message=message,
    )


def test_phases() -> None:
    assert run_phase(record(StageState.PROMOTED, StageState.PROMOTED)) == PipelinePhase.SUCCEEDED
    assert run_phase(record(StageState.PROMOTED, StageState.AWAITING_APPROVAL)) == (
        PipelinePhase.AWAITING_APPROVAL
    )
    assert run_phase(record(StageState.FAILED, StageState.BLOCKED)) == PipelinePhase.FAILED
    aborted = record(StageState.PROMOTED, StageState.ABORTED, message="aborted: freeze")
    assert run_phase(aborted) == PipelinePhase.ABORTED


def test_status_carries_freight_stages_and_summary() -> None:
    status = run_status(record(StageState.PROMOTED, StageState.SOAKING))
    assert status["freight"] == {"model": "laya:en", "digest": "a" * 64}
    assert status["summary"] == "s0=Promoted s1=Soaking"
    assert status["stages"][0]["cluster"] == "staging"


def test_a_cycle_is_read_as_invalid_naming_the_field() -> None:
    spec, problem = read_spec(
        {
            "spec": {
                "template": {"spec": {"model": "laya:en"}},
                "stages": [
                    {"name": "a", "cluster": "c", "namespace": "n", "dependsOn": ["b"]},
                    {"name": "b", "cluster": "c", "namespace": "n", "dependsOn": ["a"]},
                ],
            }
        }
    )
    assert spec is None
    assert "spec.stages[0].dependsOn: a dependency cycle (a -> b -> a)" in problem


def test_a_resync_keeps_the_transition_time() -> None:
    stored = {
        "status": {
            "conditions": [
                {"type": "Accepted", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]
        }
    }
    again = stamped([{"type": "Accepted", "status": "True"}], stored)
    assert again[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    flipped = stamped([{"type": "Accepted", "status": "False"}], stored)
    assert flipped[0]["lastTransitionTime"] != "2026-01-01T00:00:00Z"


def test_kstatus_conditions_follow_the_runs_phase() -> None:
    """Issue 38: without Reconciling/Stalled kstatus read every pipeline as Current."""
    from controller.hub.pipelines import condition, kstatus_conditions
    from decisionmodel.vocabulary import PipelineCondition

    def shown(phase: str | None) -> list[tuple[str, str, str]]:
        return [(c["type"], c["status"], c["reason"]) for c in kstatus_conditions(phase, None)]

    assert shown(None) == [("Reconciling", "True", "Resolving")]  # not started or not written
    assert shown("Progressing") == [("Reconciling", "True", "Progressing")]
    assert shown("AwaitingApproval") == [("Reconciling", "True", "AwaitingApproval")]
    assert shown("Succeeded") == []
    for ended in ("Failed", "Aborted", "Invalid"):
        assert shown(ended) == [("Stalled", "True", ended)]
    blocked = condition(PipelineCondition.STAGE_WORKERS_POLLING, False, "NoStageWorker", "x")
    [stalled] = kstatus_conditions("Progressing", blocked)
    assert (stalled["type"], stalled["reason"], stalled["message"]) == (
        "Stalled",
        "NoStageWorker",
        "x",
    )


def test_the_phase_counts_only_for_the_run_that_recorded_it() -> None:
    """Review of issue 38's change: a new revision or a retry was judged on the previous run's
    phase until its first record (Current after a success, Stalled after a failure)."""
    from controller.hub.pipelines import phase_of

    new = "pipeline/ns/p/r2"
    assert not phase_of({"workflowId": new, "runWorkflowId": "pipeline/ns/p/r1"}, new)
    assert phase_of({"workflowId": new, "runWorkflowId": new}, new)
    # A record from before runWorkflowId existed: the controller's own workflowId decides.
    assert phase_of({"workflowId": new}, new) and not phase_of({"workflowId": "x"}, new)

"""Steady state, in-place changes, messages as annotations, metrics and leadership (issue 5)."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from harness.helpers import eventually
from harness.rollout_harness import (
    ControllerProcess,
    RolloutHarness,
    WorkerProcess,
    golden_jsonl,
    put_model,
)
from test_controller import phase, workflows_of

from localenv.env import LocalEnv
from workflows.rollout import RolloutWorkflow


def metric(text: str, series: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if not line.startswith(series + "{") and not line.startswith(series + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def deployment_replicas(h: RolloutHarness, name: str) -> int:
    dep = h.get("deployment", name)
    return int((dep or {}).get("spec", {}).get("replicas", -1))


async def test_scale_in_place_on_rwx_and_cache_not_shareable_on_rwo(ctl: RolloutHarness) -> None:
    ctl.create_dm("rwx", {"model": "laya:en", "cache": {"accessModes": ["ReadWriteMany"]}})
    ctl.create_dm("rwo", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "rwx") == "Ready" and phase(ctl, "rwo") == "Ready", 90)
    rwx = ctl.status("rwx")["stableRevision"]["hash"]
    ctl.update_spec("rwx", {"replicas": 3})
    ctl.update_spec("rwo", {"replicas": 2})
    await eventually(lambda: deployment_replicas(ctl, f"rwx-{rwx}") == 3, 60, what="scaled")
    await eventually(
        lambda: (ctl.status("rwx").get("replicas") or {}) == {"desired": 3, "modelReady": 3}, 90
    )
    assert ctl.get("pdb", f"rwx-{rwx}") is not None
    assert phase(ctl, "rwx") == "Ready"
    assert len(await workflows_of(ctl, "rwx")) == 1  # in place: no new rollout

    def cache_not_shareable() -> bool:
        conds = {c["type"]: c for c in ctl.status("rwo").get("conditions", [])}
        return conds.get("Degraded", {}).get("reason") == "CacheNotShareable"

    await eventually(cache_not_shareable, 60, what="CacheNotShareable")
    assert len(await workflows_of(ctl, "rwo")) == 1


async def test_promote_annotation_and_metrics(
    ctl: RolloutHarness, controller: ControllerProcess
) -> None:
    put_model("laya", "m2", accuracy=0.95, revision="m2")
    put_model("laya", "m3", accuracy=0.30, revision="m3")
    ctl.golden_configmap("golden", golden_jsonl(20))
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.80",
    }
    ctl.create_dm(
        "met", {"model": "laya:en", "rollout": {"promotion": "Manual", "evaluation": evaluation}}
    )
    await eventually(lambda: phase(ctl, "met") == "Ready", 90, what="first revision never held")
    ctl.update_spec("met", {"model": "laya:m2"})
    await eventually(lambda: phase(ctl, "met") == "AwaitingPromotion", 90)
    # A stale approval is consumed and refused; the correct one promotes.
    ctl.kubectl("annotate", "dm", "met", "decisionmodel.io/promote=stale00000000000")
    await eventually(
        lambda: (
            "decisionmodel.io/promote" not in (ctl.dm("met")["metadata"].get("annotations") or {})
        ),
        30,
    )
    assert phase(ctl, "met") == "AwaitingPromotion"
    progress = None
    for wid in await workflows_of(ctl, "met"):
        p = await ctl.client.get_workflow_handle(wid).query(RolloutWorkflow.progress)
        if p.expected_approval:
            progress = p
    assert progress is not None and progress.expected_approval is not None
    # Refused by the update's validator (never applied, nothing in history) and reported as a
    # Warning Event on the DecisionModel.
    assert progress.phase.value == "AwaitingPromotion"
    events = ctl.kubectl(
        "get", "events", "--field-selector", "reason=ApprovalRejected", "-o", "json"
    )
    assert "stale00000000000" in events
    ctl.kubectl("annotate", "dm", "met", f"decisionmodel.io/promote={progress.expected_approval}")
    await eventually(
        lambda: (ctl.status("met").get("stableRevision") or {}).get("model") == "laya:m2", 90
    )
    # A rolled-back one.
    ctl.update_spec("met", {"model": "laya:m3"})
    await eventually(lambda: phase(ctl, "met") == "RolledBack", 90)
    labels = {"namespace": ctl.namespace, "name": "met"}
    # The series follow the status write the controller's watch delivers a moment later.
    text = await eventually(
        lambda: (
            t
            if metric(
                t := controller.metrics(), "decisionmodel_phase", phase="RolledBack", **labels
            )
            == 1
            else None
        ),
        30,
        what="the RolledBack phase in the metrics",
    )
    assert metric(text, "decisionmodel_phase", phase="Ready", **labels) == 0
    assert metric(text, "decisionmodel_rollouts_total", result="promoted", **labels) == 2
    assert metric(text, "decisionmodel_rollouts_total", result="rolled_back", **labels) == 1
    assert metric(text, "decisionmodel_desired_replicas", **labels) == 1
    assert metric(text, "decisionmodel_model_ready_replicas", **labels) == 1
    accuracy = float(ctl.status("met")["evaluation"]["accuracy"])
    assert metric(text, "decisionmodel_evaluation_accuracy", **labels) == pytest.approx(accuracy)
    assert metric(text, "decisionmodel_evaluation_ece", **labels) is not None
    assert metric(text, "decisionmodel_probe_results_total", result="ready", **labels) is not None
    assert metric(text, "decisionmodel_phase_duration_seconds_count", phase="Ready", **labels)
    # controller-runtime's reconcile series (the operator alerts query them): reconciles ran,
    # each re-checks later (requeue_after), and their durations are observed.
    ctl_label = {"controller": "decisionmodel"}
    assert (
        metric(text, "controller_runtime_reconcile_total", result="requeue_after", **ctl_label) or 0
    ) > 0
    assert metric(text, "controller_runtime_reconcile_time_seconds_count", **ctl_label)
    assert metric(text, "workqueue_depth", name="decisionmodel") is not None
    ctl.kubectl("delete", "dm", "met")
    await eventually(
        lambda: (
            f'name="met",namespace="{ctl.namespace}"' not in controller.metrics()
            and f'namespace="{ctl.namespace}",name="met"' not in controller.metrics()
        ),
        30,
        what="series removed",
    )
    assert not re.search(rf'namespace="{ctl.namespace}"[^}}]*name="met"', controller.metrics())


async def test_second_controller_waits_then_takes_over(
    ctl: RolloutHarness, controller: ControllerProcess, local_env: LocalEnv
) -> None:
    standby = ControllerProcess(
        ctl.cluster,
        local_env.temporal.address,
        ctl.task_queue,
        controller.log_dir,
        health_port=18081,
        identity="ctl-b",
        extra_args=controller.args[controller.args.index("--watch-namespaces") :],
    )
    standby.env["DMROLLOUT_CONTROLLER_REINSPECT_SECONDS"] = "10"
    standby.start()
    try:

        def ready(port: int) -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(lambda: standby.metrics() != "", 30, what="standby up")
        await asyncio.sleep(2)
        assert ready(18080) and not ready(18081)
        controller.kill()
        await eventually(lambda: ready(18081), 30, what="standby took over")
        ctl.create_dm("handover", {"model": "laya:en"})
        await eventually(lambda: phase(ctl, "handover") == "Ready", 90, what="dispatched by ctl-b")
        assert len(await workflows_of(ctl, "handover")) == 1
    finally:
        standby.stop()
        if controller.proc is None or controller.proc.poll() is not None:
            controller.start()


def worker_series(worker: WorkerProcess, namespace: str, name: str) -> list[str]:
    labels = (f'name="{name}"', f'namespace="{namespace}"')
    return [
        line
        for line in worker.metrics().splitlines()
        if line.startswith("decisionmodel_probe_results_total{") and all(x in line for x in labels)
    ]


async def test_a_deleted_decision_models_series_leave_the_worker_too(
    ctl: RolloutHarness, ctl_worker: WorkerProcess
) -> None:
    """Seed 004: every series of a deleted DecisionModel is removed; the worker counts its
    candidates' gate transitions and sees no deletes, so it asks (issue 22, point 10)."""
    ctl.create_dm("series", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "series") == "Ready", 90, what="Ready")
    await eventually(
        lambda: bool(worker_series(ctl_worker, ctl.namespace, "series")), 30, what="series"
    )
    ctl.kubectl("delete", "dm", "series", "--wait=false")
    await eventually(
        lambda: not worker_series(ctl_worker, ctl.namespace, "series"), 60, what="series gone"
    )

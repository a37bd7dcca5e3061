"""The controller turns `kubectl apply` into rollouts and keeps the stable healthy (issue 5)."""

from __future__ import annotations

from harness.helpers import eventually
from harness.rollout_harness import SIM_PREFIX, ControllerProcess, RolloutHarness, put_model

from controller.temporal.rollouts import dm_query


def phase(h: RolloutHarness, name: str) -> str | None:
    obj = h.get("dm", name)
    return ((obj or {}).get("status") or {}).get("phase")


async def workflows_of(h: RolloutHarness, name: str) -> list[str]:
    ids = []
    async for wf in h.client.list_workflows(dm_query(h.namespace, name)):
        ids.append(wf.id)
    return ids


async def test_apply_reaches_ready_and_model_change_starts_one_workflow(
    ctl: RolloutHarness,
) -> None:
    ctl.create_dm("app", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "app") == "Ready", 90, what="Ready")
    out = ctl.kubectl("get", "dm", "app")
    header = out.splitlines()[0].split()
    assert header[:5] == ["NAME", "MODEL", "DEVICE", "PHASE", "READY"]
    assert "laya:en" in out and "Ready" in out
    assert len(await workflows_of(ctl, "app")) == 1
    ctl.update_spec("app", {"model": "laya:multilingual"})
    await eventually(
        lambda: (ctl.status("app").get("stableRevision") or {}).get("model") == "laya:multilingual",
        90,
        what="second revision promoted",
    )
    assert len(await workflows_of(ctl, "app")) == 2


async def test_two_quick_changes_supersede_the_first(
    ctl: RolloutHarness, annotate_pods: dict[str, str]
) -> None:
    ctl.create_dm("quick", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "quick") == "Ready", 90, what="Ready")
    put_model("laya", "q1", accuracy=0.9, revision="q1")
    annotate_pods[SIM_PREFIX + "load-delay-seconds"] = "3"
    ctl.update_spec("quick", {"model": "laya:q1"})
    await eventually(lambda: ctl.status("quick").get("candidateRevision"), 30, what="candidate")
    ctl.update_spec("quick", {"model": "laya:multilingual"})
    await eventually(
        lambda: (
            (ctl.status("quick").get("stableRevision") or {}).get("model") == "laya:multilingual"
        ),
        120,
        what="second change promoted",
    )
    stable = ctl.status("quick")["stableRevision"]["hash"]

    def only_stable() -> bool:
        names = ctl.names("deployment")
        assert names == [f"quick-{stable}"], names
        return True

    await eventually(only_stable, 60, what="only the stable left")


async def test_restart_starts_no_duplicate(
    ctl: RolloutHarness, controller: ControllerProcess
) -> None:
    ctl.create_dm("restart", {"model": "laya:en"})
    await eventually(
        lambda: ctl.status("restart").get("candidateRevision"), 60, what="rollout started"
    )
    controller.kill()
    controller.start()
    await eventually(lambda: phase(ctl, "restart") == "Ready", 90, what="Ready")
    controller.kill()
    controller.start()
    await eventually(
        lambda: "decisionmodel_phase" in controller.metrics(), 30, what="controller back"
    )
    assert len(await workflows_of(ctl, "restart")) == 1


async def test_retry_annotation_runs_failed_revision_once(ctl: RolloutHarness) -> None:
    # A registry the operator does not allow: permanent, never retried by itself (a missing
    # tag would be: ModelNotFound is re-resolved with a backoff).
    ctl.create_dm("retry", {"model": "registry.example/library/laya:en"})
    await eventually(lambda: phase(ctl, "retry") == "Failed", 60, what="Failed")
    assert ctl.status("retry")["failedRevision"]["reason"] == "RegistryNotAllowed"
    assert len(await workflows_of(ctl, "retry")) == 1
    ctl.kubectl("annotate", "dm", "retry", "decisionmodel.io/retry=one")
    await eventually(
        lambda: ctl.status("retry").get("lastRetryToken") == "one", 60, what="token consumed"
    )
    await eventually(lambda: len(ctl.status("retry").get("failedRevision") or {}) > 0, 60)

    async def two() -> bool:
        return len(await workflows_of(ctl, "retry")) == 2

    import asyncio

    for _ in range(100):
        if await two():
            break
        await asyncio.sleep(0.3)
    assert len(await workflows_of(ctl, "retry")) == 2
    # The same token again does nothing.
    ctl.kubectl(
        "annotate", "dm", "retry", "--overwrite", "decisionmodel.io/retry=one", "example.com/poke=1"
    )
    await asyncio.sleep(3)
    assert len(await workflows_of(ctl, "retry")) == 2


async def test_lost_model_degrades_then_recovers(ctl: RolloutHarness) -> None:
    ctl.create_dm("lost", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "lost") == "Ready", 90, what="Ready")
    stable = ctl.status("lost")["stableRevision"]["hash"]
    pod = ctl.pods("lost", stable)[0]["metadata"]["name"]
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}lose-model=true")
    await eventually(lambda: phase(ctl, "lost") == "Degraded", 60, what="Degraded")
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}lose-model-")
    await eventually(lambda: phase(ctl, "lost") == "Ready", 90, what="Ready again")


async def test_spec_back_to_stable_clears_failed_revision(ctl: RolloutHarness) -> None:
    ctl.create_dm("back", {"model": "laya:en"})
    await eventually(lambda: phase(ctl, "back") == "Ready", 90, what="Ready")
    ctl.update_spec("back", {"model": "laya:gone"})
    await eventually(lambda: phase(ctl, "back") == "RolledBack", 90, what="RolledBack")
    assert ctl.status("back")["failedRevision"]["reason"] == "ModelNotFound"
    ctl.update_spec("back", {"model": "laya:en"})
    await eventually(lambda: "failedRevision" not in ctl.status("back"), 60, what="failed cleared")
    await eventually(lambda: phase(ctl, "back") == "Ready", 60, what="Ready again")


def cli(ctl: RolloutHarness, *args: str) -> str:
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "DMROLLOUT_KUBECONFIG": str(ctl.cluster.kubeconfig),
        "DMROLLOUT_TEMPORAL_TASK_QUEUE": ctl.task_queue,
    }
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return out.stdout


async def test_cli_status_promote_history(ctl: RolloutHarness) -> None:
    put_model("laya", "cli2", accuracy=0.9, revision="cli2")
    ctl.create_dm("cli", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    await eventually(lambda: phase(ctl, "cli") == "Ready", 90, what="Ready")
    ctl.update_spec("cli", {"model": "laya:cli2"})
    await eventually(lambda: phase(ctl, "cli") == "AwaitingPromotion", 90)
    status = cli(ctl, "status", "cli", "-n", ctl.namespace)
    assert "AwaitingPromotion" in status and "laya:en" in status
    assert f"rollout/{ctl.namespace}/cli/" in status
    assert "http://127.0.0.1:8233/namespaces/default/workflows/rollout%2F" in status
    assert f"dmrollout promote cli -n {ctl.namespace}" in status
    promoted = cli(ctl, "promote", "cli", "-n", ctl.namespace)
    assert promoted.startswith("approved ")
    await eventually(
        lambda: (ctl.status("cli").get("stableRevision") or {}).get("model") == "laya:cli2", 90
    )
    # The second rollout closes after its grace timer and the delete of the previous revision.
    await eventually(
        lambda: cli(ctl, "history", "cli", "-n", ctl.namespace).count("Promoted") == 2, 60
    )
    history = cli(ctl, "history", "cli", "-n", ctl.namespace).splitlines()
    assert history[0].split() == [
        "STARTED", "DM", "REVISION", "MODEL", "RESULT", "DURATION", "WORKFLOW"
    ]  # fmt: skip
    rows = history[1:]
    assert len(rows) == 2 and all("Promoted" in r for r in rows)
    assert any("laya:cli2" in r for r in rows) and any("laya:en" in r for r in rows)

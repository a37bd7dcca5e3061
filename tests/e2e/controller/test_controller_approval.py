"""A kubectl-only user can approve a held candidate: status shows the exact approval, and the
reference's form (the candidate's hash) is accepted. Issue 11, point 5."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from harness.helpers import eventually
from harness.rollout_harness import SIM_PREFIX, RolloutHarness, golden_jsonl, put_model

from controller.cli.errors import ExitCode
from localenv.env import RUNTIME_PORT


def models_loaded(pod_ip: str) -> list[object]:
    """What the runtime on the Pod lists in GET /api/ps (RUNTIME_API.md)."""
    answer = httpx.get(f"http://{pod_ip}:{RUNTIME_PORT}/api/ps", timeout=5)
    models: list[object] = answer.json().get("models") or []
    return models


def promoted_condition(h: RolloutHarness, name: str) -> dict[str, str]:
    for c in h.status(name).get("conditions") or []:
        if c["type"] == "Promoted":
            return dict(c)
    return {}


async def test_the_candidate_hash_approves_and_status_shows_the_token(ctl: RolloutHarness) -> None:
    put_model("laya", "ok2", accuracy=0.95, revision="ok2")
    ctl.golden_configmap("golden", golden_jsonl(20))
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.80",
    }
    spec = {"model": "laya:en", "rollout": {"promotion": "Manual", "evaluation": evaluation}}
    ctl.create_dm("kubectl-only", spec)
    await eventually(lambda: ctl.status("kubectl-only").get("phase") == "Ready", 120)
    ctl.update_spec("kubectl-only", {"model": "laya:ok2"})
    await eventually(
        lambda: ctl.status("kubectl-only").get("phase") == "AwaitingPromotion", 120, what="held"
    )
    candidate = ctl.status("kubectl-only")["candidateRevision"]["hash"]
    held = promoted_condition(ctl, "kubectl-only")
    assert held["reason"] == "AwaitingPromotion"
    # With evaluation the full token binds the gates and the dataset: status names it.
    assert f"decisionmodel.io/promote={candidate}." in held["message"]
    ctl.kubectl("annotate", "dm", "kubectl-only", f"decisionmodel.io/promote={candidate}")
    await eventually(
        lambda: (ctl.status("kubectl-only").get("stableRevision") or {}).get("hash") == candidate,
        90,
        what="promoted by the candidate hash",
    )


async def test_a_held_candidate_not_model_ready_refuses_the_approval_until_it_is(
    ctl: RolloutHarness,
) -> None:
    """Issue 11, point 4 and issue 34: a held candidate that lost its model is seen by the
    controller's re-inspection (shown on Reconciling); an approval is then refused, saying why,
    instead of rolling the candidate back; once the model is back the same approval promotes."""
    ctl.create_dm("held", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    await eventually(lambda: ctl.status("held").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("held")["stableRevision"]["hash"]
    ctl.update_spec("held", {"model": "laya:multilingual"})
    await eventually(
        lambda: ctl.status("held").get("phase") == "AwaitingPromotion", 120, what="held"
    )
    candidate = ctl.status("held")["candidateRevision"]["hash"]
    [first] = ctl.pods("held", candidate)[:1]
    pod = first["metadata"]["name"]
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}lose-model=true")
    await eventually(
        lambda: not models_loaded(first["status"]["podIP"]), 30, what="model lost in the runtime"
    )
    shown = await eventually(
        lambda: candidate_not_ready(ctl, "held"), 90, what="held candidate shown not model-ready"
    )
    assert f"{candidate}" in shown["message"] and "0/1" in shown["message"], shown
    refused = cli(ctl, "promote", "held", "-n", ctl.namespace)
    assert refused.returncode == ExitCode.FAILED, refused
    assert "model-ready" in refused.stderr and "0/1" in refused.stderr, refused.stderr
    status = ctl.status("held")
    assert status["phase"] == "AwaitingPromotion" and not status.get("failedRevision"), status
    assert status["stableRevision"]["hash"] == stable
    # The fix: the model is back; the re-inspection warms it and sets the gate again.
    ctl.kubectl("annotate", "pod", pod, f"{SIM_PREFIX}lose-model-")
    await eventually(
        lambda: gates_true(ctl, "held", candidate) == 1, 90, what="candidate model-ready again"
    )
    await eventually(lambda: candidate_not_ready(ctl, "held") is None, 60, what="shown ready")
    ctl.kubectl("annotate", "dm", "held", f"decisionmodel.io/promote={candidate}")
    await eventually(
        lambda: (ctl.status("held").get("stableRevision") or {}).get("hash") == candidate,
        90,
        what="promoted once model-ready",
    )
    assert not ctl.status("held").get("failedRevision")


async def test_a_replaced_pod_of_a_held_candidate_is_warmed_and_the_approval_promotes(
    ctl: RolloutHarness,
) -> None:
    """Issue 34: a candidate Pod deleted while the candidate awaits approval is replaced, and
    the replacement is warmed, inspected and gated by the controller; the approval then
    promotes (before, the replacement never got its gate and the approval rolled back)."""
    spec = {"model": "laya:en", "replicas": 2, "rollout": {"promotion": "Manual"}}
    ctl.create_dm("replaced", spec)
    await eventually(lambda: ctl.status("replaced").get("phase") == "Ready", 150, what="Ready")
    ctl.update_spec("replaced", {"model": "laya:multilingual"})
    await eventually(
        lambda: ctl.status("replaced").get("phase") == "AwaitingPromotion", 150, what="held"
    )
    candidate = ctl.status("replaced")["candidateRevision"]["hash"]
    gone = ctl.pods("replaced", candidate)[0]["metadata"]["name"]
    ctl.kubectl("delete", "pod", gone, "--wait=false")

    def replacement_gated() -> bool:
        pods = [p for p in ctl.pods("replaced", candidate) if p["metadata"]["name"] != gone]
        return len(pods) == 2 and all(gate_is_true(p) for p in pods)

    await eventually(replacement_gated, 90, what="the replacement Pod warmed and gated")
    await eventually(
        lambda: candidate_not_ready(ctl, "replaced") is None, 60, what="shown model-ready"
    )

    def approve() -> bool:
        # A Pod whose inspection takes its gate back between the controller's look and the
        # approval's check makes the approval refused, saying so, never rolled back: approve
        # again. (The runtime simulator once answered a replacement that reused the deleted
        # Pod's IP as that Pod for up to 2 s; it follows Pod events now: simulators/pod_watch.)
        answer = cli(ctl, "promote", "replaced", "-n", ctl.namespace)
        if answer.returncode != 0:
            assert "is not model-ready" in answer.stderr, answer.stderr
            assert not ctl.status("replaced").get("failedRevision")
        return answer.returncode == 0

    await eventually(approve, 90, interval=5, what="approved")
    await eventually(
        lambda: (ctl.status("replaced").get("stableRevision") or {}).get("hash") == candidate,
        90,
        what="promoted",
    )
    assert not ctl.status("replaced").get("failedRevision")


GATE = "decisionmodel.io/model-ready"


def gate_is_true(pod: dict[str, Any]) -> bool:
    found = [c for c in pod.get("status", {}).get("conditions") or [] if c["type"] == GATE]
    return bool(found) and found[0].get("status") == "True"


def gates_true(h: RolloutHarness, name: str, revision: str) -> int:
    return sum(1 for p in h.pods(name, revision) if gate_is_true(p))


def candidate_not_ready(h: RolloutHarness, name: str) -> dict[str, Any] | None:
    """Reconciling with ReplicasNotModelReady: the held candidate is not fully model-ready."""
    found = h.condition(name, "Reconciling")
    return found if found.get("reason") == "ReplicasNotModelReady" else None


def cli(h: RolloutHarness, *args: str) -> subprocess.CompletedProcess[str]:
    """``dmrollout <args>`` as a user types it (tests/e2e/controller/test_cli_verbs.py)."""
    env = {
        **os.environ,
        "DMROLLOUT_KUBECONFIG": str(h.cluster.kubeconfig),
        "DMROLLOUT_TEMPORAL_TASK_QUEUE": h.task_queue,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

"""Issue 34: the real ``kubectl wait --for=condition=Ready`` tells "the spec I applied serves"
from a rollout in flight or rolled back.

kubectl (k8s.io/kubectl/pkg/cmd/wait, condition.go) takes a condition whose observedGeneration
(the condition's, else status.observedGeneration) is below metadata.generation as not met yet.
Ready keeps seed 001's meaning (the stable revision serves), and its observedGeneration says
which generation's spec that is: the current one only once it serves. Before, Ready was stamped
with the current generation at the first reconcile after a spec change, and the wait returned 0
0.7 s into a rollout that then rolled back.
"""

from __future__ import annotations

import subprocess
from typing import Any

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness, golden_jsonl, put_model

from localenv.paths import python_tool


def kubectl_wait(ctl: RolloutHarness, name: str, timeout: str) -> list[str]:
    return [
        python_tool("kubectl"), "--kubeconfig", str(ctl.cluster.kubeconfig), "-n", ctl.namespace,
        "wait", "--for=condition=Ready", f"dm/{name}", f"--timeout={timeout}",
    ]  # fmt: skip


def wait_ready(ctl: RolloutHarness, name: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        kubectl_wait(ctl, name, f"{timeout:.0f}s"),
        capture_output=True, text=True, timeout=timeout + 30, check=False,
    )  # fmt: skip


def condition(ctl: RolloutHarness, name: str, type_: str) -> tuple[Any, Any]:
    found = ctl.condition(name, type_)
    return found.get("status"), found.get("reason")


def gated(ctl: RolloutHarness, configmap: str) -> dict[str, Any]:
    """A golden set and a gate laya:waitweak (accuracy 0.30) fails."""
    put_model("laya", "waitweak", accuracy=0.30, revision="waitweak")
    ctl.golden_configmap(configmap, golden_jsonl(20))
    return {
        "datasetRef": {"configMapRef": {"name": configmap, "key": "cases.jsonl"}},
        "minAccuracy": "0.80",
    }


async def test_kubectl_wait_for_ready_does_not_succeed_on_a_rolled_back_rollout(
    ctl: RolloutHarness,
) -> None:
    evaluation = gated(ctl, "golden-wait")
    ctl.create_dm("rejected", {"model": "laya:en", "rollout": {"evaluation": evaluation}})
    first = wait_ready(ctl, "rejected", 180)
    assert first.returncode == 0, first.stderr
    assert ctl.status("rejected")["stableRevision"]["model"] == "laya:en"

    generation = ctl.update_spec("rejected", {"model": "laya:waitweak"})["metadata"]["generation"]
    # Started with the rollout, as a pipeline would: it must still be waiting once the
    # candidate was rejected and the stable serves on.
    waiting = subprocess.Popen(
        kubectl_wait(ctl, "rejected", "600s"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        await eventually(
            lambda: condition(ctl, "rejected", "Stalled") == ("True", "EvaluationFailed"),
            180,
            what="rolled back, Stalled",
        )
        assert ctl.status("rejected")["phase"] == "RolledBack"
        assert waiting.poll() is None, waiting.communicate()
        bounded = wait_ready(ctl, "rejected", 5)
        assert bounded.returncode != 0 and "timed out" in bounded.stderr, bounded
        ready = ctl.condition("rejected", "Ready")
        # Seed 001's Ready: the stable serves; of the generation it serves, not the new one.
        assert (ready["status"], ready["reason"]) == ("True", "CandidateRejected"), ready
        assert ready["observedGeneration"] < generation, ready
        assert ctl.status("rejected")["observedGeneration"] == generation  # kstatus: seen
    finally:
        waiting.kill()
        waiting.communicate()


async def test_kubectl_wait_for_ready_returns_once_the_new_spec_serves(
    ctl: RolloutHarness,
) -> None:
    ctl.create_dm("promoted", {"model": "laya:en"})
    first = wait_ready(ctl, "promoted", 180)
    assert first.returncode == 0, first.stderr
    generation = ctl.update_spec("promoted", {"model": "laya:multilingual"})["metadata"][
        "generation"
    ]
    second = wait_ready(ctl, "promoted", 180)
    assert second.returncode == 0, second.stderr
    # When the wait returns, the spec it waited for serves (not the old stable, 0.7 s in).
    status = ctl.status("promoted")
    assert status["stableRevision"]["model"] == "laya:multilingual", status
    assert ctl.condition("promoted", "Ready")["observedGeneration"] == generation
    assert "Reconciling" not in {c["type"] for c in status["conditions"]}
    # An in-place change (replicas) has nothing to roll out: the wait returns at once.
    scaled = ctl.update_spec("promoted", {"replicas": 2})["metadata"]["generation"]
    third = wait_ready(ctl, "promoted", 60)
    assert third.returncode == 0, third.stderr
    assert ctl.condition("promoted", "Ready")["observedGeneration"] == scaled

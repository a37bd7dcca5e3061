"""Full rollouts through RolloutWorkflow and the real activities (issue 4's done-when list)."""

from __future__ import annotations

import asyncio

from harness.helpers import eventually
from harness.rollout_harness import (
    SIM_PREFIX,
    RolloutHarness,
    golden_jsonl,
    put_model,
    registry_digest,
)

from decisionmodel.rollout.contracts import PhaseTimeouts, RolloutResult
from simulators.answers import expected_accuracy, make_golden_set


def model_ready_gates(h: RolloutHarness, dm: str, revision: str) -> list[str]:
    gates = []
    for pod in h.pods(dm, revision):
        for c in pod["status"].get("conditions", []):
            if c["type"] == "decisionmodel.io/model-ready":
                gates.append(c["status"])
    return gates


async def test_first_rollout_reaches_ready(harness: RolloutHarness) -> None:
    harness.create_dm("first", {"model": "laya:en", "replicas": 2})
    outcome = await harness.rollout("first")
    assert outcome.result == RolloutResult.PROMOTED, outcome
    status = harness.status("first")
    stable = status["stableRevision"]
    assert stable["digest"] == registry_digest("laya", "en")
    assert stable["hash"] == outcome.revision
    assert status["phase"] == "Ready"
    svc = harness.get("service", "first")
    assert svc is not None
    assert svc["spec"]["selector"]["decisionmodel.io/revision"] == stable["hash"]
    assert model_ready_gates(harness, "first", stable["hash"]) == ["True", "True"]
    assert harness.get("pdb", f"first-{stable['hash']}") is not None  # replicas > 1
    assert "candidateRevision" not in status


async def test_second_promoted_third_rolled_back(harness: RolloutHarness) -> None:
    put_model("laya", "good", accuracy=0.95, revision="good")
    put_model("laya", "bad", accuracy=0.40, revision="bad")
    jsonl = golden_jsonl(30)
    harness.golden_configmap("golden", jsonl)
    harness.create_dm("chain", {"model": "laya:en", "replicas": 2})
    first = await harness.rollout("chain")
    assert first.result == RolloutResult.PROMOTED
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.80",
    }
    harness.update_spec("chain", {"model": "laya:good", "rollout": {"evaluation": evaluation}})
    second = await harness.rollout("chain")
    assert second.result == RolloutResult.PROMOTED, second
    status = harness.status("chain")
    cases = make_golden_set(30, seed=7)
    assert status["evaluation"]["accuracy"] == f"{expected_accuracy(cases, 0.95):.4f}"
    assert status["evaluation"]["result"] == "Passed"
    old = first.revision
    assert old is not None
    for kind, name in (
        ("deployment", f"chain-{old}"),
        ("pvc", f"chain-store-{old}"),
        ("pdb", f"chain-{old}"),
    ):
        await eventually(
            lambda k=kind, n=name: harness.get(k, n) is None, 30, what=f"{kind} {name} gone"
        )

    harness.update_spec("chain", {"model": "laya:bad"})
    third = await harness.rollout("chain")
    assert third.result == RolloutResult.ROLLED_BACK
    status = harness.status("chain")
    assert status["phase"] == "RolledBack"
    assert status["failedRevision"]["reason"] == "EvaluationFailed"
    assert status["failedRevision"]["hash"] == third.revision
    assert status["stableRevision"]["hash"] == second.revision
    svc = harness.get("service", "chain")
    assert (
        svc is not None and svc["spec"]["selector"]["decisionmodel.io/revision"] == second.revision
    )
    assert harness.get("deployment", f"chain-{second.revision}") is not None
    await eventually(lambda: harness.get("deployment", f"chain-{third.revision}") is None, 30)


async def test_tag_not_in_registry_fails_first_rollout(harness: RolloutHarness) -> None:
    harness.create_dm("missing", {"model": "laya:does-not-exist"})
    outcome = await harness.rollout("missing")
    assert outcome.result == RolloutResult.FAILED and outcome.reason == "ModelNotFound"
    status = harness.status("missing")
    assert status["phase"] == "Failed"
    assert status["failedRevision"]["reason"] == "ModelNotFound"
    assert harness.names("deployment") == []


async def test_registry_not_allowed(harness: RolloutHarness) -> None:
    harness.create_dm("elsewhere", {"model": "registry.example.com/acme/triage:v3"})
    outcome = await harness.rollout("elsewhere")
    assert outcome.result == RolloutResult.FAILED and outcome.reason == "RegistryNotAllowed"


async def test_digest_mismatch_at_prefetch_keeps_stable(harness: RolloutHarness) -> None:
    harness.create_dm("pinned", {"model": "laya:en"})
    first = await harness.rollout("pinned")
    assert first.result == RolloutResult.PROMOTED
    harness.update_spec("pinned", {"model": "laya:multilingual", "digest": "0" * 64})
    outcome = await harness.rollout("pinned")
    assert outcome.result == RolloutResult.ROLLED_BACK and outcome.reason == "DigestMismatch"
    status = harness.status("pinned")
    assert status["stableRevision"]["hash"] == first.revision
    assert harness.get("deployment", f"pinned-{first.revision}") is not None


async def test_silent_cpu_fallback_is_device_mismatch(
    harness: RolloutHarness, annotate_pods: dict[str, str]
) -> None:
    harness.create_dm("gpu", {"model": "laya:en"})
    first = await harness.rollout("gpu")
    assert first.result == RolloutResult.PROMOTED
    annotate_pods[SIM_PREFIX + "device"] = "cpu"
    harness.update_spec("gpu", {"device": "cuda"})
    outcome = await harness.rollout(
        "gpu", timeouts=PhaseTimeouts(caching=60, starting=600, evaluating=60), timeout=120
    )
    # Known within a few probe rounds; waiting cannot fix it, so the rollback does not wait for
    # the starting deadline (issue 22; a long deadline shows it: 10 minutes).
    assert outcome.result == RolloutResult.ROLLED_BACK and outcome.reason == "DeviceMismatch"
    assert "every candidate Pod (1) reported DeviceMismatch" in (outcome.message or "")
    assert harness.status("gpu")["stableRevision"]["hash"] == first.revision


async def test_a_runtime_that_refuses_every_load_rolls_back_without_the_deadline(
    harness: RolloutHarness, annotate_pods: dict[str, str]
) -> None:
    """Issue 34: every Pod answering 500 MODEL_LOAD_FAILED held the candidate's Pods (GPUs on a
    GPU model) for the whole starting deadline; it is known within a few rounds, as a wrong
    device is, and the rollback names the runtime's answer and the fix."""
    harness.create_dm("noload", {"model": "laya:en"})
    first = await harness.rollout("noload")
    assert first.result == RolloutResult.PROMOTED
    put_model("laya", "heavy", accuracy=0.9, revision="heavy")
    annotate_pods[SIM_PREFIX + "load-fails"] = "true"  # the stable's model is loaded already
    harness.update_spec("noload", {"model": "laya:heavy"})
    outcome = await harness.rollout(
        "noload", timeouts=PhaseTimeouts(caching=60, starting=600, evaluating=60), timeout=120
    )
    assert outcome.result == RolloutResult.ROLLED_BACK and outcome.reason == "ModelLoadFailed"
    assert "every candidate Pod (1) reported ModelLoadFailed" in (outcome.message or "")
    assert "MODEL_LOAD_FAILED" in (outcome.message or "")
    assert harness.status("noload")["stableRevision"]["hash"] == first.revision


async def test_unpinned_model_never_ready(
    harness: RolloutHarness, annotate_pods: dict[str, str]
) -> None:
    annotate_pods[SIM_PREFIX + "never-pin"] = "true"
    harness.create_dm("unpinned", {"model": "laya:en"})
    outcome = await harness.rollout(
        "unpinned", timeouts=PhaseTimeouts(caching=60, starting=10, evaluating=60)
    )
    assert outcome.result == RolloutResult.FAILED and outcome.reason == "StartTimeout"
    assert "NotPinned" in (outcome.message or "")


async def test_queue_full_during_evaluation_is_retried(
    harness: RolloutHarness, annotate_pods: dict[str, str]
) -> None:
    put_model("laya", "qf", accuracy=0.9, revision="qf")
    harness.golden_configmap("golden", golden_jsonl(12))
    annotate_pods[SIM_PREFIX + "queue-full-burst"] = "3"
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.50",
    }
    harness.create_dm("busy", {"model": "laya:qf", "rollout": {"evaluation": evaluation}})
    outcome = await harness.rollout("busy")
    assert outcome.result == RolloutResult.PROMOTED, outcome
    assert harness.status("busy")["evaluation"]["cases"] == 12


async def test_malformed_dataset_line(harness: RolloutHarness) -> None:
    harness.create_dm("ds", {"model": "laya:en"})
    first = await harness.rollout("ds")
    good = golden_jsonl(3).splitlines()
    harness.golden_configmap("golden", "\n".join([good[0], good[1], "{not json", good[2]]) + "\n")
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.50",
    }
    harness.update_spec("ds", {"model": "laya:multilingual", "rollout": {"evaluation": evaluation}})
    outcome = await harness.rollout("ds")
    assert outcome.result == RolloutResult.ROLLED_BACK and outcome.reason == "DatasetInvalid"
    assert "line 3" in (outcome.message or "")
    assert harness.status("ds")["stableRevision"]["hash"] == first.revision


async def test_cancel_supersedes_and_cleans_up(
    harness: RolloutHarness, annotate_pods: dict[str, str]
) -> None:
    harness.create_dm("sup", {"model": "laya:en"})
    first = await harness.rollout("sup")
    put_model("laya", "slow", accuracy=0.9, revision="slow")
    annotate_pods[SIM_PREFIX + "load-delay-seconds"] = "60"  # the candidate's warmup hangs
    harness.update_spec("sup", {"model": "laya:slow"})
    handle = await harness.start(harness.input_for("sup"))
    # Cancel once the candidate's Deployment exists: its objects must go, the stable's stay.
    await eventually(lambda: len(harness.names("deployment")) == 2, 60, what="candidate started")
    await handle.cancel()
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.result == RolloutResult.SUPERSEDED
    await eventually(lambda: harness.names("deployment") == [f"sup-{first.revision}"], 30)
    await eventually(lambda: harness.names("pvc") == [f"sup-store-{first.revision}"], 30)

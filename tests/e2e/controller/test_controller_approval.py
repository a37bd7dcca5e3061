"""A kubectl-only user can approve a held candidate: status shows the exact approval, and the
reference's form (the candidate's hash) is accepted. Issue 11, point 5."""

from __future__ import annotations

import httpx
from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness, golden_jsonl, put_model

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


async def test_a_candidate_that_lost_its_model_while_held_is_not_promoted(
    ctl: RolloutHarness,
) -> None:
    """Issue 11, point 4: the candidate is inspected again right before the promotion is
    recorded; one that lost its model while it waited is rolled back, the stable serves."""
    from harness.rollout_harness import SIM_PREFIX

    ctl.create_dm("held", {"model": "laya:en", "rollout": {"promotion": "Manual"}})
    await eventually(lambda: ctl.status("held").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("held")["stableRevision"]["hash"]
    ctl.update_spec("held", {"model": "laya:multilingual"})
    await eventually(
        lambda: ctl.status("held").get("phase") == "AwaitingPromotion", 120, what="held"
    )
    candidate = ctl.status("held")["candidateRevision"]["hash"]
    [first] = ctl.pods("held", candidate)[:1]
    ctl.kubectl("annotate", "pod", first["metadata"]["name"], f"{SIM_PREFIX}lose-model=true")
    # The simulator reads Pod annotations through a short cache: approve once the model is gone.
    await eventually(
        lambda: not models_loaded(first["status"]["podIP"]), 30, what="model lost in the runtime"
    )
    ctl.kubectl("annotate", "dm", "held", f"decisionmodel.io/promote={candidate}")
    failed = await eventually(
        lambda: ctl.status("held").get("failedRevision"), 90, what="rolled back"
    )
    assert failed["hash"] == candidate and "no longer model-ready" in failed["message"]
    assert ctl.status("held")["phase"] == "RolledBack"
    assert ctl.status("held")["stableRevision"]["hash"] == stable

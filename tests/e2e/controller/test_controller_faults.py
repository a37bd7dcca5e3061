"""Faults the controller must outlast: rollouts that end without a verdict (restarted with
backoff at most N times, then a recorded failure naming the fix), and objects no rollout owns
(reaped after a grace; the stable and the candidate never). Issue 10."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from harness.helpers import eventually
from harness.rollout_harness import REGISTRY_URL, RolloutHarness, put_model

from controller.temporal.rollouts import dm_query

# The controller fixture runs with DMROLLOUT_CONTROLLER_MAX_ROLLOUT_RESTARTS=2, a 1 s restart
# backoff and a 15 s reap grace (tests/e2e/controller/conftest.py).
MAX_RESTARTS = 2


async def running_ids(h: RolloutHarness, name: str) -> list[str]:
    query = f"{dm_query(h.namespace, name)} AND ExecutionStatus = 'Running'"
    return [wf.id async for wf in h.client.list_workflows(query)]


async def runs_of(h: RolloutHarness, name: str) -> list[str]:
    return [wf.run_id async for wf in h.client.list_workflows(dm_query(h.namespace, name))]


async def test_a_terminated_rollout_is_restarted_then_given_up_with_the_fix_named(
    ctl: RolloutHarness,
) -> None:
    repo = f"rs-{uuid.uuid4().hex[:8]}"
    put_model(repo, "v1", revision=repo)
    fault = f"{REGISTRY_URL}/_sim/faults/library/{repo}/v1"
    with httpx.Client(trust_env=False) as c:
        # Resolve keeps retrying a 503: the rollout stays in flight until it is terminated.
        c.put(fault, json={"status": 503}).raise_for_status()
    try:
        ctl.create_dm("restarts", {"model": f"{repo}:v1"})
        for run in range(1, MAX_RESTARTS + 2):
            ids = await _eventually_running(ctl, "restarts", runs=run)
            await ctl.client.get_workflow_handle(ids[0]).terminate("chaos: terminated by hand")
        failed = await eventually(
            lambda: ctl.status("restarts").get("failedRevision"), 60, what="given up"
        )
        assert failed["reason"] == "RolloutRestartsExhausted"
        assert ids[0] in failed["message"] and "decisionmodel.io/retry" in failed["message"]
        assert ctl.status("restarts")["phase"] == "Failed"
        assert len(await runs_of(ctl, "restarts")) == MAX_RESTARTS + 1
        events = json.loads(ctl.kubectl("get", "events", "-o", "json"))["items"]
        reasons = [e.get("reason") for e in events]
        assert reasons.count("RolloutRestarted") == MAX_RESTARTS
        assert "RolloutRestartsExhausted" in reasons
    finally:
        with httpx.Client(trust_env=False) as c:
            c.delete(fault)
    # The documented fix: a new retry value starts a fresh count, and the rollout goes on.
    ctl.kubectl("annotate", "dm", "restarts", "decisionmodel.io/retry=after-fix")
    await eventually(lambda: ctl.status("restarts").get("phase") == "Ready", 120, what="Ready")


async def _eventually_running(h: RolloutHarness, name: str, runs: int) -> list[str]:
    async def check() -> list[str]:
        ids = await running_ids(h, name)
        assert ids and len(await runs_of(h, name)) == runs, (ids, runs)
        return ids

    for _ in range(600):
        try:
            return await check()
        except AssertionError:
            import asyncio

            await asyncio.sleep(0.1)
    return await check()


def leaked_copy(h: RolloutHarness, kind: str, name: str, revision: str) -> str:
    """A copy of a DecisionModel-owned object under another revision: what a rollout that
    died without compensating leaves behind."""
    obj: dict[str, Any] = json.loads(h.kubectl("get", kind, name, "-o", "json"))
    meta = obj["metadata"]
    leaked = f"{meta['name']}-leak"
    labels = {**meta["labels"], "decisionmodel.io/revision": revision}
    copy: dict[str, Any] = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {
            "name": leaked,
            "labels": labels,
            "ownerReferences": meta["ownerReferences"],
        },
        "spec": obj["spec"],
    }
    if kind == "deployment":
        copy["spec"]["selector"] = {"matchLabels": {"decisionmodel.io/revision": revision}}
        copy["spec"]["template"]["metadata"]["labels"] = labels
        copy["spec"]["replicas"] = 0
    else:
        copy["spec"].pop("volumeName", None)
    h.kubectl("apply", "-f", "-", input=json.dumps(copy))
    return leaked


async def test_a_leaked_revision_is_reaped_and_the_stable_and_candidate_never_are(
    ctl: RolloutHarness,
) -> None:
    ctl.create_dm("reap", {"model": "laya:en"})
    await eventually(lambda: ctl.status("reap").get("phase") == "Ready", 90, what="Ready")
    stable = ctl.status("reap")["stableRevision"]["hash"]
    # A candidate held for a manual approval: in flight as long as it takes.
    ctl.update_spec("reap", {"model": "laya:multilingual", "rollout": {"promotion": "Manual"}})
    await eventually(
        lambda: ctl.status("reap").get("phase") == "AwaitingPromotion", 90, what="held"
    )
    candidate = ctl.status("reap")["candidateRevision"]["hash"]
    leaked_deployment = leaked_copy(ctl, "deployment", f"reap-{stable}", "0123456789abcdef")
    leaked_pvc = leaked_copy(ctl, "pvc", f"reap-store-{stable}", "0123456789abcdef")

    def reaped() -> bool:
        names = ctl.names("deployment") + ctl.names("pvc")
        return leaked_deployment not in names and leaked_pvc not in names

    await eventually(reaped, 90, what="leaked objects reaped")
    events = json.loads(ctl.kubectl("get", "events", "-o", "json"))["items"]
    notes = [e.get("note") or e.get("message") or "" for e in events if e["reason"] == "Reaped"]
    assert any(leaked_deployment in n for n in notes), notes
    assert f"reap-{stable}" in ctl.names("deployment")
    assert f"reap-{candidate}" in ctl.names("deployment")
    assert {f"reap-store-{stable}", f"reap-store-{candidate}"} <= set(ctl.names("pvc"))
    assert ctl.status("reap")["phase"] == "AwaitingPromotion"

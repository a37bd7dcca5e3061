"""A plain worker upgrade with rollouts in flight (issue 34, docs/operations.md "Upgrades and
workflow versioning").

As a rolling ``helm upgrade`` of the worker Deployment does it: build v1's worker is stopped,
build v2's started, and nothing keeps v1 running (no ``worker.versioning.draining``). One
DecisionModel's candidate waits for an approval, another's is mid-evaluation.

- By default (AutoUpgrade) both rollouts move to v2 at their next workflow task and end with
  their verdicts: the held one promoted by ``dmrollout promote``, the evaluated one promoted
  by its gates; no workflow task fails on the way.
- ``helm rollback`` after that (v1's Pods back, v2's stopped): v1 becomes current again by
  itself once v2 has no worker left, and the rollout v2 held moves back to v1 and promotes.
- Pinned without keeping v1 running strands the held rollout: within one reconcile after
  Temporal stops seeing v1's pollers, the DecisionModel says so (Stalled=True, RolloutStranded,
  naming the build and the fix), ``dmrollout status`` shows the run's build and ``dmrollout
  promote`` says why it cannot approve. Starting v1 again as a draining build (the fix) clears
  the condition and the approval promotes.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import temporalio.api.workflowservice.v1 as wsv1
from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import (
    ControllerProcess,
    RolloutHarness,
    WorkerProcess,
    golden_jsonl,
    put_model,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

from decisionmodel.vocabulary import ConditionType, Reason
from localenv.cluster import LocalCluster
from localenv.env import Simulators
from localenv.temporal import TemporalDevServer

ROOT = Path(__file__).resolve().parents[2]
EVALUATION = {
    "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
    "minAccuracy": "0.80",
}
# Every decision slowed: the evaluation is still running when v1 stops; lifted after.
SLOW = "sim.dmrollout.dev/latency-ms"
# A live worker's pollers refresh every long poll (~60 s, measured on the dev server); the
# controller calls a build unserved once Temporal has not seen it poll for this long.
POLL_STALE_SECONDS = 70


class Env:
    """One Worker Deployment (its own task queue), builds v1 and v2, and a controller."""

    def __init__(
        self, crd: LocalCluster, server: TemporalDevServer, client: Client, tmp: Path, behavior: str
    ) -> None:
        self.deployment = f"plain-{uuid.uuid4().hex[:8]}"
        self.client = client
        self.h = RolloutHarness(crd, client, self.deployment, f"up-{uuid.uuid4().hex[:6]}")
        env = {
            "DMROLLOUT_WORKER_DEPLOYMENT_NAME": self.deployment,
            "DMROLLOUT_WORKER_DRAIN_CHECK_SECONDS": "2",
        }
        if behavior:
            env["DMROLLOUT_WORKER_VERSIONING_BEHAVIOR"] = behavior
        self.builds: dict[str, WorkerProcess] = {}
        for build in ("v1", "v2"):
            (tmp / build).mkdir()
            self.builds[build] = WorkerProcess(
                crd, server.address, self.deployment, tmp / build,
                extra_env={**env, "DMROLLOUT_WORKER_BUILD_ID": build},
            )  # fmt: skip
        self.controller = ControllerProcess(
            crd,
            server.address,
            self.deployment,
            tmp,
            health_port=18097,
            identity="upgrade-ctl",
            extra_args=("--watch-namespaces", self.h.namespace),
            extra_env={
                "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-upgrade",
                "DMROLLOUT_CONTROLLER_REINSPECT_SECONDS": "5",
                "DMROLLOUT_CONTROLLER_WORKER_POLL_STALE_SECONDS": str(POLL_STALE_SECONDS),
            },
        )

    def stop(self) -> None:
        self.controller.stop()
        for w in self.builds.values():
            w.stop()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **self.builds["v1"].env,
            "DMROLLOUT_KUBECONFIG": str(self.h.cluster.kubeconfig),
            "PYTHONPATH": str(ROOT),
        }
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", *args, "-n", self.h.namespace],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    async def current_build(self) -> str:
        try:
            described = await self.client.workflow_service.describe_worker_deployment(
                wsv1.DescribeWorkerDeploymentRequest(
                    namespace=self.client.namespace, deployment_name=self.deployment
                )
            )
        except RPCError as e:
            raise AssertionError(f"describe {self.deployment}: {e.message}") from e
        return described.worker_deployment_info.routing_config.current_deployment_version.build_id

    async def wait_current(self, build: str) -> None:
        await self.wait_current_within(build, 120)

    async def wait_current_within(self, build: str, timeout: float) -> None:
        async def check() -> bool:
            got = await self.current_build()
            assert got == build, got
            return True

        await async_assert_eventually(check, timeout, interval=1, what=f"{build} current")

    def phase(self, name: str) -> str | None:
        phase: str | None = self.h.status(name).get("phase")
        return phase

    def stable_hash(self, name: str) -> str:
        return str((self.h.status(name).get("stableRevision") or {}).get("hash"))


def _env(
    crd: LocalCluster,
    temporal_server: TemporalDevServer,
    temporal_client: Client,
    tmp_path: Path,
    behavior: str,
) -> Iterator[Env]:
    env = Env(crd, temporal_server, temporal_client, tmp_path, behavior)
    try:
        yield env
    finally:
        env.stop()


@pytest.fixture
def auto_upgrade(
    crd: LocalCluster,
    simulators: Simulators,
    temporal_server: TemporalDevServer,
    temporal_client: Client,
    tmp_path: Path,
) -> Iterator[Env]:
    """The workers as installed by default (no versioning behavior set)."""
    yield from _env(crd, temporal_server, temporal_client, tmp_path, "")


@pytest.fixture
def pinned(
    crd: LocalCluster,
    simulators: Simulators,
    temporal_server: TemporalDevServer,
    temporal_client: Client,
    tmp_path: Path,
) -> Iterator[Env]:
    yield from _env(crd, temporal_server, temporal_client, tmp_path, "Pinned")


async def _held_candidate(env: Env, name: str, tag: str) -> str:
    """A promoted stable and a candidate waiting for an approval; returns the run's ID."""
    h = env.h
    h.create_dm(name, {"model": "laya:en", "replicas": 1, "rollout": {"promotion": "Manual"}})
    await eventually(lambda: env.phase(name) == "Ready", 180, what=f"{name} Ready")
    first = env.stable_hash(name)
    h.update_spec(name, {"model": f"laya:{tag}"})
    await eventually(
        lambda: env.phase(name) == "AwaitingPromotion", 180, what=f"{name} awaiting approval"
    )
    assert env.stable_hash(name) == first
    return str(h.status(name)["rollout"]["workflowId"])


async def _run_build(client: Client, wid: str) -> str:
    info = (await client.get_workflow_handle(wid).describe()).raw_description
    return info.workflow_execution_info.versioning_info.deployment_version.build_id


async def _failed_tasks(client: Client, wid: str) -> int:
    history = await client.get_workflow_handle(wid).fetch_history()
    failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    return sum(1 for e in history.events if e.event_type == failed)


def _approved(env: Env, name: str) -> str:
    out = env.cli("promote", name)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


async def test_plain_upgrade_moves_rollouts_in_flight_to_the_new_build(
    auto_upgrade: Env,
) -> None:
    env, h = auto_upgrade, auto_upgrade.h
    env.builds["v1"].start()
    await env.wait_current("v1")
    env.controller.start()
    tag = f"up{uuid.uuid4().hex[:8]}"
    put_model("laya", tag, accuracy=0.95, revision=tag)
    held = await _held_candidate(env, "held", tag)

    h.golden_configmap("golden", golden_jsonl(40))
    h.create_dm("judged", {"model": "laya:en", "replicas": 1})
    await eventually(lambda: env.phase("judged") == "Ready", 180, what="judged Ready")
    h.kubectl("annotate", "namespace", h.namespace, "--overwrite", f"{SLOW}=1000")
    h.update_spec("judged", {"model": f"laya:{tag}", "rollout": {"evaluation": EVALUATION}})
    await eventually(lambda: env.phase("judged") == "Evaluating", 180, what="evaluating")
    judged = str(h.status("judged")["rollout"]["workflowId"])

    # The plain upgrade: v1 stopped, v2 started; nothing keeps v1 running.
    env.builds["v1"].stop()
    env.builds["v2"].start()
    await env.wait_current("v2")
    h.kubectl("annotate", "namespace", h.namespace, f"{SLOW}-")

    await eventually(lambda: _approved(env, "held"), 180, interval=5, what="approved")
    for name in ("held", "judged"):
        await eventually(
            lambda name=name: (
                env.phase(name) == "Ready"
                and (h.status(name).get("stableRevision") or {}).get("model") == f"laya:{tag}"
            ),
            240,
            what=f"{name} promoted",
        )
        stalled = h.condition(name, ConditionType.STALLED)
        assert stalled.get("status") != "True", stalled
    for wid in (held, judged):
        assert await _run_build(env.client, wid) == "v2", wid
        assert await _failed_tasks(env.client, wid) == 0, wid


def _stranded(env: Env, name: str) -> dict[str, Any]:
    stalled = env.h.condition(name, ConditionType.STALLED)
    assert (stalled.get("status"), stalled.get("reason")) == ("True", Reason.ROLLOUT_STRANDED)
    return stalled


async def test_a_rollout_pinned_to_a_build_no_worker_serves_says_so(pinned: Env) -> None:
    env, h = pinned, pinned.h
    env.builds["v1"].start()
    await env.wait_current("v1")
    env.controller.start()
    tag = f"pin{uuid.uuid4().hex[:8]}"
    put_model("laya", tag, accuracy=0.95, revision=tag)
    held = await _held_candidate(env, "held", tag)
    assert await _run_build(env.client, held) == "v1"

    env.builds["v1"].stop()
    env.builds["v2"].start()
    await env.wait_current("v2")
    # Within one reconcile (5 s here) of Temporal's last sight of v1 growing stale.
    stalled = await eventually(
        lambda: _stranded(env, "held"), POLL_STALE_SECONDS + 60, interval=1, what="stranded"
    )
    message = stalled["message"]
    assert "build v1" in message and "worker.versioning.draining" in message, message
    assert h.condition("held", ConditionType.RECONCILING).get("status") != "True"
    status = env.cli("status", "held")
    assert status.returncode == 0, status.stderr
    assert f"build      v1 of {env.deployment}" in status.stdout, status.stdout
    assert "no worker" in status.stdout, status.stdout
    refused = env.cli("promote", "held")
    assert refused.returncode != 0
    assert "build v1" in refused.stderr and "no worker" in refused.stderr, refused.stderr

    # The fix: v1 runs again as a draining build (it never takes new rollouts).
    env.builds["v1"].env["DMROLLOUT_WORKER_PROMOTE_ON_START"] = "false"
    env.builds["v1"].start()
    await eventually(
        lambda: h.condition("held", ConditionType.STALLED).get("status") != "True",
        60,
        what="stranded cleared",
    )
    await eventually(lambda: _approved(env, "held"), 60, interval=2, what="approved")
    await eventually(
        lambda: (h.status("held").get("stableRevision") or {}).get("model") == f"laya:{tag}",
        120,
        what="promoted",
    )
    assert await env.current_build() == "v2"
    assert await _run_build(env.client, held) == "v1"


async def test_helm_rollback_hands_new_and_running_rollouts_back_to_the_older_build(
    auto_upgrade: Env,
) -> None:
    """``helm rollback`` after an upgrade: v1's Pods start while v2's still run (v1 does not
    take over from a served build), then v2's stop. v1 makes itself current again once
    Temporal has not seen v2 poll for two long polls, and the rollout v2 held moves to it and
    takes its approval."""
    env, h = auto_upgrade, auto_upgrade.h
    env.builds["v1"].start()
    await env.wait_current("v1")
    env.builds["v2"].start()
    await env.wait_current("v2")
    env.controller.start()
    tag = f"back{uuid.uuid4().hex[:8]}"
    put_model("laya", tag, accuracy=0.95, revision=tag)
    held = await _held_candidate(env, "held", tag)
    assert await _run_build(env.client, held) == "v2"

    # The rollback: the older build's Pod starts beside the newer one, which then stops.
    env.builds["v1"].stop()
    env.builds["v1"].start()
    v1_log = env.builds["v1"].log_dir / "worker-2.log"
    await eventually(
        lambda: "is older than the current build v2" in v1_log.read_text(), 60, what="v1 back"
    )
    assert await env.current_build() == "v2"
    env.builds["v2"].stop()
    await env.wait_current_within("v1", 240)
    await eventually(lambda: _approved(env, "held"), 120, interval=5, what="approved")
    await eventually(
        lambda: (h.status("held").get("stableRevision") or {}).get("model") == f"laya:{tag}",
        120,
        what="promoted",
    )
    assert await _run_build(env.client, held) == "v1"
    assert await _failed_tasks(env.client, held) == 0

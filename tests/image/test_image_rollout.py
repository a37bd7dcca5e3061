"""The image, run: `dmrollout worker` and `dmrollout controller` from the image built by
`make image` (buildah, user 65532, read-only mounts of the local cluster's kubeconfig and
certificates) roll out one DecisionModel on the local environment until it is Ready.

Opt-in (DMROLLOUT_FULL=image, `make image-test`), inside hack/in-netns.sh.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.helpers import eventually
from harness.rollout_harness import (
    ControllerProcess,
    RolloutHarness,
    connect,
    install_crd,
    worker_env,
)
from image_process import ImageProcess, image_ref, image_size_bytes, mountable_kubeconfig
from temporalio.client import WorkflowExecutionStatus

from controller.temporal.rollouts import dm_query
from localenv.cluster import LocalCluster
from localenv.env import Simulators
from localenv.temporal import TemporalDevServer


@pytest.fixture(scope="module")
def image() -> str:
    ref = image_ref()
    found = subprocess.run(["buildah", "inspect", "--type", "image", ref], capture_output=True)
    if found.returncode != 0:
        pytest.fail(f"no image {ref} in buildah's storage: run `make image` first")
    return ref


@pytest.fixture
def from_image(
    image: str,
    local_cluster: LocalCluster,
    temporal_server: TemporalDevServer,
    simulators: Simulators,
    tmp_path: Path,
) -> Iterator[tuple[ImageProcess, ImageProcess, str]]:
    """A worker and a controller from the image on their own task queue (no other worker polls
    it), the controller watching one namespace."""
    cluster = local_cluster
    install_crd(cluster)
    queue = f"image-{uuid.uuid4().hex[:8]}"
    namespace = f"img-{uuid.uuid4().hex[:8]}"
    address = temporal_server.address
    kubeconfig = mountable_kubeconfig(cluster.kubeconfig, tmp_path / "kube")
    env = {**worker_env(cluster, address, queue), "DMROLLOUT_KUBECONFIG": str(kubeconfig)}
    mounts = [kubeconfig.parent]
    ctl = ControllerProcess(
        cluster, address, queue, tmp_path, health_port=18090,
        extra_args=("--watch-namespaces", namespace),
    )  # fmt: skip
    controller_args = ctl.args[ctl.args.index("controller") :]
    worker = ImageProcess(image, ["worker"], env, mounts, tmp_path / "worker.log")
    controller = ImageProcess(
        image, controller_args, {**ctl.env, **env}, mounts, tmp_path / "ctl.log"
    )
    worker.start()
    controller.start()
    yield worker, controller, namespace
    controller.stop()
    worker.stop()
    for p in (worker, controller):
        print(f"--- {p.log.name}\n{p.log.read_text()[-3000:]}", file=sys.stderr)


async def test_worker_and_controller_from_the_image_roll_out_one_model(
    from_image: tuple[ImageProcess, ImageProcess, str],
    local_cluster: LocalCluster,
    temporal_server: TemporalDevServer,
    image: str,
) -> None:
    worker, controller, namespace = from_image
    client = await connect(temporal_server.address)
    # The harness only reads and writes the cluster here: the image's processes do the rest.
    h = RolloutHarness(local_cluster, client, "unused", namespace)
    started = time.monotonic()
    h.create_dm("img", {"model": "laya:en"})

    def ready() -> bool:
        assert worker.running(), worker.log.read_text()[-3000:]
        assert controller.running(), controller.log.read_text()[-3000:]
        return (h.get("dm", "img") or {}).get("status", {}).get("phase") == "Ready"

    await eventually(ready, 240, what="DecisionModel Ready, rolled out from the image")
    elapsed = time.monotonic() - started
    status = h.status("img")
    assert (status.get("stableRevision") or {}).get("model") == "laya:en", status
    # The controller (from the image) started the workflow, and it completed on a task queue
    # that only the image's worker polls.
    runs = [wf async for wf in client.list_workflows(dm_query(namespace, "img"))]
    assert len(runs) == 1, runs
    assert runs[0].task_queue == worker.env["DMROLLOUT_TEMPORAL_TASK_QUEUE"]
    # Promote records phase Ready before it switches the Service (a crash in between is then
    # safe), so the run may still be finishing its last activity when Ready shows: wait for
    # its end, bounded, rather than read its status at once.
    handle = client.get_workflow_handle(runs[0].id, run_id=runs[0].run_id)
    await asyncio.wait_for(handle.result(), 60)
    described = await handle.describe()
    assert described.status == WorkflowExecutionStatus.COMPLETED, described.status
    print(
        f"\nimage {image}: {image_size_bytes(image) / 1e6:.0f} MB; "
        f"apply -> Ready in {elapsed:.1f} s",
        file=sys.stderr,
    )

"""Fixtures of the full-rollout tests: the CRD, a Temporal client, an in-process worker."""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from harness.codec_env import (
    CODEC_KEY_ID,
    CODEC_SERVER_PORT,
    CODEC_TEMPORAL_PORT,
    CODEC_UI_PORT,
    CodecEnv,
    listening,
)
from harness.rollout_harness import (
    RolloutHarness,
    WorkerProcess,
    connect,
    in_process_worker,
    install_crd,
)
from temporalio.client import Client

from controller.temporal.client import connect as connect_as_controller
from localenv.cluster import LocalCluster
from localenv.env import LocalEnv, Simulators
from localenv.processes import ManagedProcess, wait_until
from localenv.temporal import TemporalDevServer


@pytest.fixture(scope="session")
def crd(local_cluster: LocalCluster) -> LocalCluster:
    install_crd(local_cluster)
    return local_cluster


@pytest.fixture(scope="session")
async def temporal_client(temporal_server: TemporalDevServer) -> Client:
    return await connect(temporal_server.address)


@pytest.fixture(scope="session")
async def rollout_queue(
    crd: LocalCluster, simulators: Simulators, temporal_client: Client
) -> AsyncIterator[str]:
    queue = f"e2e-{uuid.uuid4().hex[:8]}"
    async with in_process_worker(temporal_client, crd, queue):
        yield queue


@pytest.fixture
def harness(crd: LocalCluster, temporal_client: Client, rollout_queue: str) -> RolloutHarness:
    return RolloutHarness(crd, temporal_client, rollout_queue)


class NamespaceFaults(dict[str, str]):
    """Setting a key annotates the test's Namespace at once (the runtime simulator applies
    Namespace fault annotations to every Pod in it), so a fault is in place before the next
    rollout's Pods make their first request."""

    def __init__(self, harness: RolloutHarness) -> None:
        super().__init__()
        self.harness = harness

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        self.harness.cluster.kubectl(
            "annotate", "namespace", self.harness.namespace, "--overwrite", f"{key}={value}"
        )


@pytest.fixture
def annotate_pods(harness: RolloutHarness) -> Iterator[dict[str, str]]:
    """Fault annotations for the namespace's Pods: on the Namespace (from the moment they are
    set) and, as before, on every Pod as soon as it appears."""
    wanted: dict[str, str] = NamespaceFaults(harness)
    stop = threading.Event()

    def loop() -> None:
        done: set[str] = set()
        while not stop.is_set():
            if wanted:
                r = harness.cluster.kubectl(
                    "-n", harness.namespace, "get", "pods", "-o", "json", check=False
                )
                if r.returncode == 0:
                    for pod in json.loads(r.stdout)["items"]:
                        name = pod["metadata"]["name"]
                        if name in done or "decisionmodel.io/revision" not in pod["metadata"].get(
                            "labels", {}
                        ):
                            continue
                        harness.cluster.kubectl(
                            "-n", harness.namespace, "annotate", "pod", name, "--overwrite",
                            *[f"{k}={v}" for k, v in wanted.items()], check=False,
                        )  # fmt: skip
                        done.add(name)
            stop.wait(0.05)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield wanted
    stop.set()
    t.join()


@pytest.fixture(scope="session")
def codec_env(local_env: LocalEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodecEnv]:
    """A Temporal dev server whose UI decodes through `dmrollout codec-server` (a process)."""
    root = tmp_path_factory.mktemp("codec")
    keys = root / "payload-keys"
    keys.mkdir()
    (keys / CODEC_KEY_ID).write_bytes(base64.b64encode(os.urandom(32)))
    temporal = TemporalDevServer(
        root / "temporal",
        port=CODEC_TEMPORAL_PORT,
        ui_port=CODEC_UI_PORT,
        ui_codec_endpoint=f"http://127.0.0.1:{CODEC_SERVER_PORT}",
    )
    env = {
        "DMROLLOUT_TEMPORAL_ADDRESS": temporal.address,
        "DMROLLOUT_TEMPORAL_UI_URL": temporal.ui_url,
        "DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR": str(keys),
        "DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID": CODEC_KEY_ID,
    }
    server = ManagedProcess(
        "codec-server",
        [sys.executable, "-m", "controller.cli", "codec-server", "--port", str(CODEC_SERVER_PORT)],
        root / "logs",
        env=env,
    )
    temporal.start()
    try:
        server.start()
        wait_until(lambda: listening(CODEC_SERVER_PORT), 30, "codec server", 0.1, [server])
        yield CodecEnv(temporal, server, env)
    finally:
        server.stop()
        temporal.stop()


@pytest.fixture(scope="session")
async def codec_client(codec_env: CodecEnv) -> Client:
    """A client as the controller makes it (controller.temporal.client.connect)."""
    return await connect_as_controller(codec_env.settings)


@pytest.fixture(scope="session")
def codec_queue(
    crd: LocalCluster,
    simulators: Simulators,
    codec_env: CodecEnv,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """A real `dmrollout worker` process with the codec turned on by its environment."""
    queue = f"codec-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        crd, codec_env.temporal.address, queue, tmp_path_factory.mktemp("codec-worker")
    )
    worker.env.update(codec_env.env)
    worker.start()
    yield queue
    worker.stop()


@pytest.fixture
def codec_harness(crd: LocalCluster, codec_client: Client, codec_queue: str) -> RolloutHarness:
    return RolloutHarness(crd, codec_client, codec_queue)

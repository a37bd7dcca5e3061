"""Fixtures of the full-rollout tests: the CRD, a Temporal client, an in-process worker."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from rollout_harness import RolloutHarness, connect, in_process_worker, install_crd
from temporalio.client import Client

from localenv.cluster import LocalCluster
from localenv.env import Simulators
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


@pytest.fixture
def annotate_pods(harness: RolloutHarness) -> Iterator[dict[str, str]]:
    """Fault annotations put on every Pod of the namespace as soon as it appears."""
    wanted: dict[str, str] = {}
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

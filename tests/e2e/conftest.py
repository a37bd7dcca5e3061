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

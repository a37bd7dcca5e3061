"""A `dmrollout worker` and a `dmrollout controller` process on their own task queue."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from rollout_harness import ControllerProcess, RolloutHarness, WorkerProcess
from temporalio.client import Client

from localenv.cluster import LocalCluster
from localenv.env import LocalEnv, Simulators


@pytest.fixture(scope="session")
def ctl_queue() -> str:
    return f"ctl-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def ctl_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("controller-logs")


@pytest.fixture(scope="session")
def ctl_worker(
    crd: LocalCluster, simulators: Simulators, local_env: LocalEnv, ctl_queue: str, ctl_logs: Path
) -> Iterator[WorkerProcess]:
    local_env.start_temporal() if "temporal" not in local_env.timings else None
    w = WorkerProcess(crd, local_env.temporal.address, ctl_queue, ctl_logs)
    w.start()
    yield w
    w.stop()


@pytest.fixture(scope="session")
def controller(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
) -> Iterator[ControllerProcess]:
    c = ControllerProcess(crd, local_env.temporal.address, ctl_queue, ctl_logs, health_port=18080)
    c.start()
    yield c
    c.stop()


@pytest.fixture
def ctl(
    crd: LocalCluster, temporal_client: Client, ctl_queue: str, controller: ControllerProcess
) -> RolloutHarness:
    return RolloutHarness(crd, temporal_client, ctl_queue)

"""A `dmrollout worker` and a `dmrollout controller` process on their own task queue.

The controller watches only the namespaces ``ctl-0`` … (``--watch-namespaces``): the other e2e
tests drive rollouts directly in their own namespaces, and a controller watching everything
would dispatch rollouts of their DecisionModels too.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.rollout_harness import (
    ControllerProcess,
    RolloutHarness,
    WorkerProcess,
    grant_namespaces,
)
from temporalio.client import Client

from localenv.cluster import LocalCluster
from localenv.env import LocalEnv, Simulators

CTL_NAMESPACES = [f"ctl-{i}" for i in range(64)]
_next_namespace = itertools.count()


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
    w = WorkerProcess(crd, local_env.temporal.address, ctl_queue, ctl_logs, metrics_port=18191)
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
    # The namespaces and their Roles exist before the controller starts, as a namespaced install
    # requires: without a Role its list/watch in a namespace is refused.
    grant_namespaces(crd, CTL_NAMESPACES)
    c = ControllerProcess(
        crd,
        local_env.temporal.address,
        ctl_queue,
        ctl_logs,
        health_port=18080,
        extra_args=("--watch-namespaces", ",".join(CTL_NAMESPACES)),
        # Re-inspection every 10 s instead of 60 s: the steady-state tests wait for it.
        # Restart discipline and reaper quick enough to test (tests/e2e/controller/
        # test_controller_faults.py).
        extra_env={
            "DMROLLOUT_CONTROLLER_REINSPECT_SECONDS": "10",
            "DMROLLOUT_CONTROLLER_MAX_ROLLOUT_RESTARTS": "2",
            "DMROLLOUT_CONTROLLER_RESTART_BACKOFF_SECONDS": "1",
            "DMROLLOUT_CONTROLLER_REAP_GRACE_SECONDS": "15",
            # A post-promotion watch checks every second (test_controller_watch.py).
            "DMROLLOUT_CONTROLLER_POST_PROMOTION_WATCH_PERIOD_SECONDS": "1",
            # A cleanup refused for 10 s shows CleanupPending (test_controller_cleanup_pending.py).
            "DMROLLOUT_CONTROLLER_CLEANUP_ROUND_SECONDS": "10",
            "DMROLLOUT_CONTROLLER_CLEANUP_PAUSE_SECONDS": "2",
        },
    )
    c.start()
    yield c
    c.stop()


@pytest.fixture
def ctl(
    crd: LocalCluster, temporal_client: Client, ctl_queue: str, controller: ControllerProcess
) -> RolloutHarness:
    return RolloutHarness(crd, temporal_client, ctl_queue, CTL_NAMESPACES[next(_next_namespace)])

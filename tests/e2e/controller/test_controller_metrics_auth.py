"""`dmrollout controller` as shipped (secure metrics, the default): /metrics over HTTPS on the
metrics port for a token allowed to get /metrics, 401/403 otherwise, and no metrics on the
plain health port, whose probes keep answering. A controller of its own (own Lease, a watched
namespace nobody uses), so the session's controller keeps its plain opt-in."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.helpers import eventually
from harness.metrics_identities import Tokens, metrics_tokens
from harness.rollout_harness import ControllerProcess, WorkerProcess, grant_namespaces

from localenv.cluster import LocalCluster
from localenv.env import LocalEnv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tokens(crd: LocalCluster) -> Iterator[Tokens]:
    with metrics_tokens(crd) as t:
        yield t


@pytest.fixture(scope="module")
def secure_controller(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
) -> Iterator[ControllerProcess]:
    # It watches a namespace of its own, with the shipped Roles there as in any install (the
    # RBAC evidence test reads every request of the session's audit log).
    grant_namespaces(crd, ["secure-metrics-nobody"])
    c = ControllerProcess(
        crd,
        local_env.temporal.address,
        ctl_queue,
        ctl_logs,
        health_port=_free_port(),
        identity="ctl-secure-metrics",
        extra_args=("--watch-namespaces", "secure-metrics-nobody"),
        extra_env={
            "DMROLLOUT_METRICS_SECURE": "true",  # the shipped default, over the harness' opt-out
            "DMROLLOUT_METRICS_BIND": "127.0.0.1",
            "DMROLLOUT_METRICS_PORT": str(_free_port()),
            "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-secure-metrics",
        },
    )
    c.start()
    yield c
    c.stop()


def scrape(c: ControllerProcess, token: str | None) -> httpx.Response | None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"https://127.0.0.1:{c.env['DMROLLOUT_METRICS_PORT']}/metrics"
    try:
        # verify=False: the controller made itself a self-signed certificate at start.
        with httpx.Client(trust_env=False, verify=False, timeout=10) as client:
            return client.get(url, headers=headers)
    except httpx.TransportError:
        return None  # not listening yet


async def test_the_controller_serves_metrics_over_https_to_readers_only(
    secure_controller: ControllerProcess, tokens: Tokens
) -> None:
    def served() -> httpx.Response:
        r = scrape(secure_controller, tokens.reader)
        assert r is not None, "not listening yet"
        return r

    r = await eventually(served, 60, what="HTTPS metrics up")
    assert r.status_code == 200, r.text
    assert "controller_runtime_reconcile_total" in r.text
    denied = scrape(secure_controller, tokens.stranger)
    assert denied is not None and denied.status_code == 403
    anonymous = scrape(secure_controller, None)
    assert anonymous is not None and anonymous.status_code == 401
    health = f"http://127.0.0.1:{secure_controller.health_port}"
    with httpx.Client(trust_env=False, timeout=10) as client:
        assert client.get(f"{health}/metrics").status_code == 404
        assert client.get(f"{health}/healthz").status_code == 200


@pytest.fixture(scope="module")
def secure_worker(
    crd: LocalCluster, local_env: LocalEnv, ctl_worker: WorkerProcess, tmp_path_factory: Any
) -> Iterator[WorkerProcess]:
    """`dmrollout worker` as the chart runs it: the SDK's exporter on loopback, probes on the
    health port, every series over HTTPS (its own task queue: it takes no rollout work)."""
    w = WorkerProcess(
        crd, local_env.temporal.address, "secure-metrics-idle", tmp_path_factory.mktemp("w")
    )
    w.env.update(
        {
            "DMROLLOUT_METRICS_SECURE": "true",
            "DMROLLOUT_METRICS_BIND": "127.0.0.1",
            "DMROLLOUT_METRICS_PORT": str(_free_port()),
            "DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS": f"127.0.0.1:{_free_port()}",
            "DMROLLOUT_WORKER_METRICS_PORT": str(_free_port()),
        }
    )
    w.start()
    yield w
    w.stop()


async def test_the_worker_serves_its_series_and_the_sdks_over_https(
    secure_worker: WorkerProcess, tokens: Tokens
) -> None:
    url = f"https://127.0.0.1:{secure_worker.env['DMROLLOUT_METRICS_PORT']}/metrics"

    def get(token: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with httpx.Client(trust_env=False, verify=False, timeout=10) as client:
                return client.get(url, headers=headers)
        except httpx.TransportError as e:
            raise AssertionError(f"not listening yet: {e}") from e

    r = await eventually(lambda: get(tokens.reader), 60, what="worker HTTPS metrics up")
    assert r.status_code == 200, r.text
    assert "decisionmodel_registry_resolve_duration_seconds" in r.text
    assert "temporal_" in r.text  # the SDK's series, read from its loopback exporter
    assert get(tokens.stranger).status_code == 403
    assert get(None).status_code == 401
    health = f"http://127.0.0.1:{secure_worker.env['DMROLLOUT_WORKER_METRICS_PORT']}"
    with httpx.Client(trust_env=False, timeout=10) as client:
        assert client.get(f"{health}/metrics").status_code == 404
        assert client.get(f"{health}/healthz").status_code == 200
        assert client.get(f"{health}/readyz").status_code == 200

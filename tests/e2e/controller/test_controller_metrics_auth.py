"""`dmrollout controller` as shipped (secure metrics, the default): /metrics over HTTPS on the
metrics port for a token allowed to get /metrics, 401/403 otherwise, and no metrics on the
plain health port, whose probes keep answering. A controller of its own (own Lease, a watched
namespace nobody uses), so the session's controller keeps its plain opt-in."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import eventually
from metrics_identities import Tokens, metrics_tokens
from rollout_harness import ControllerProcess, WorkerProcess

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

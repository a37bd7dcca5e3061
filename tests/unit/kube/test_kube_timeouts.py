"""Every Kubernetes call is bounded: the bounds chosen per request, and a silent API server
(a peer that accepts and never answers) failing the call instead of hanging it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube
from kube.errors import Unavailable
from kube.timeouts import DEFAULT_WATCH_SECONDS, KubeTimeouts, bound_requests

API = "https://127.0.0.1:6443"


@pytest.mark.parametrize(
    ("url", "bounds"),
    [
        (f"{API}/api/v1/namespaces/ns/pods/p", (5.0, 30.0)),
        (f"{API}/api/v1/pods?labelSelector=x&watch=true&timeoutSeconds=240", (5.0, 270.0)),
        (f"{API}/api/v1/pods?watch=True", (5.0, DEFAULT_WATCH_SECONDS + 30.0)),
        (f"{API}/api/v1/pods?watch=false&timeoutSeconds=240", (5.0, 30.0)),
    ],
)
def test_bounds_per_request(url: str, bounds: tuple[float, float]) -> None:
    assert KubeTimeouts().for_url(url) == bounds


def test_a_watch_outlives_its_server_side_timeout() -> None:
    # The server ends a healthy watch first; the client only gives up on a silent one.
    _, read = KubeTimeouts(read=10).for_url(f"{API}/api/v1/pods?watch=1&timeoutSeconds=60")
    assert read > 60


class RecordingRest:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def request(self, method: str, url: str, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        return "response"


class FakeApiClient:
    def __init__(self) -> None:
        self.rest_client = RecordingRest()


def test_requests_without_a_timeout_get_one_and_explicit_ones_are_kept() -> None:
    api = FakeApiClient()
    rest = api.rest_client
    bound_requests(api, KubeTimeouts(connect=1, read=2))  # type: ignore[arg-type]
    assert api.rest_client.request("GET", f"{API}/api/v1/pods") == "response"
    api.rest_client.request("GET", f"{API}/apis/coordination.k8s.io/v1/leases", _request_timeout=7)
    assert [c["_request_timeout"] for c in rest.calls] == [(1, 2), 7]


@pytest.fixture
def silent_api_server(tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig pointing at a listener that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    server = f"http://127.0.0.1:{listener.getsockname()[1]}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "silent", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "silent", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    try:
        yield kubeconfig
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


@pytest.mark.timeout(60)
async def test_a_silent_api_server_fails_the_call_instead_of_hanging_it(
    silent_api_server: Path,
) -> None:
    kube = Kube.from_config(str(silent_api_server), KubeTimeouts(connect=1, read=1, watch_margin=1))
    with pytest.raises(Unavailable, match=r"timed out .*ReadTimeoutError.*retrying"):
        await Kube.run(kube.get, "Deployment", "ns", "anything")
    # A list is bounded the same way.
    with pytest.raises(Unavailable):
        kube.core.list_namespaced_pod("ns", watch=True, timeout_seconds=1)


def test_the_connection_pool_holds_one_connection_per_calling_thread(tmp_path: Path) -> None:
    """A pool smaller than the worker's threads discards a connection per call over it (and
    the next call opens a new TLS connection)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "k", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    settings = RolloutSettings(kubeconfig=str(kubeconfig), worker_max_concurrent_activities=80)
    kube = Kube.from_settings(settings)
    assert kube.api_client.configuration.connection_pool_maxsize == 80
    assert kube.api_client.rest_client.pool_manager.connection_pool_kw["maxsize"] == 80

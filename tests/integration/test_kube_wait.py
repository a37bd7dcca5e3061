"""kube.wait.wait_until: the watch wakes the wait, not a poll period.

Against the real kube-apiserver: a change (or an object created after the list) wakes a wait
whose idle and re-list periods are 60 s, longer than the bound the test gives it. Against a
fake API server on a local socket: 410 Gone, as an ERROR event or as the status, re-lists at
once and the re-list sees the change; a watch that never answers is ended by its client-side
bound and the re-list that follows sees the change; a server that answers nothing at all
fails the wait (APIServerUnavailable) instead of hanging it; a cancelled wait closes its watch
connection at once.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import eventually
from kubernetes import client

from kube.client import APIServerUnavailable, Kube
from kube.timeouts import KubeTimeouts
from kube.wait import source, wait_until
from localenv.cluster import LocalCluster

# Longer than any bound below: only an event (or the client-side watch bound) can end a wait.
SLOW = 60.0
BOUND = 30.0


def _service(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"port": 80}]},
    }


async def _annotated(objects: list[dict[str, Any]]) -> str | None:
    for obj in objects:
        if ((obj["metadata"].get("annotations") or {}).get("go")) == "yes":
            return str(obj["metadata"]["name"])
    return None


@pytest.fixture(scope="module")
def kube(local_cluster: LocalCluster) -> Iterator[Kube]:
    k = Kube.from_config(str(local_cluster.kubeconfig))
    yield k
    k.api_client.close()


@pytest.fixture
def ns(local_cluster: LocalCluster) -> str:
    name = f"w-{uuid.uuid4().hex[:8]}"
    local_cluster.kubectl("create", "namespace", name)
    return name


class Checks:
    """Counts how often the wait looked, so the test changes the object only once it waits."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, objects: list[dict[str, Any]]) -> str | None:
        self.calls += 1
        return await _annotated(objects)


@pytest.mark.cluster
async def test_an_event_wakes_the_wait_before_any_poll(kube: Kube, ns: str) -> None:
    kube.core.create_namespaced_service(ns, _service("svc", ns))
    checks = Checks()
    src = source(kube, "Service", ns, name="svc")
    task = asyncio.create_task(
        wait_until(kube, src, checks, idle=SLOW, relist_every=SLOW, watch_seconds=50)
    )
    await eventually(lambda: checks.calls >= 1, what="first list")
    assert not task.done()
    await asyncio.to_thread(
        kube.core.patch_namespaced_service, "svc", ns, {"metadata": {"annotations": {"go": "yes"}}}
    )
    assert await asyncio.wait_for(task, BOUND) == "svc"


@pytest.mark.cluster
async def test_an_object_created_after_the_list_is_seen(kube: Kube, ns: str) -> None:
    checks = Checks()
    src = source(kube, "Service", ns, labels={"app": "late"})
    task = asyncio.create_task(wait_until(kube, src, checks, idle=SLOW, relist_every=SLOW))
    await eventually(lambda: checks.calls >= 1, what="first list")
    late = _service("late", ns)
    late["metadata"]["labels"] = {"app": "late"}
    late["metadata"]["annotations"] = {"go": "yes"}
    await asyncio.to_thread(kube.core.create_namespaced_service, ns, late)
    assert await asyncio.wait_for(task, BOUND) == "late"


# --- a fake API server ----------------------------------------------------------------------


class FakeAPIServer:
    """Answers lists of Services (annotated ``go`` once ``go`` is set, or from the second list
    on with ``expire``), and holds every watch open without a byte of body, except that with
    ``expire`` the first watch is answered 410 Gone: as an ERROR event ("event"), as the status
    ("status"). ``silent`` answers nothing at all."""

    def __init__(self, silent: bool = False, expire: str | None = None) -> None:
        self.silent = silent
        self.expire = expire
        self.go = False
        self.lists = 0
        self.watches = 0
        self.watches_closed = 0
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> FakeAPIServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if self.silent:
                    await reader.read()  # until the client gives up
                    return
                if b"watch=true" in head.split(b"\r\n", 1)[0]:
                    await self._hold_watch(reader, writer)
                    return
                self.lists += 1
                self.go = self.go or (self.expire is not None and self.lists > 1)
                annotations = {"go": "yes"} if self.go else {}
                item = {"metadata": {"name": "svc", "namespace": "x", "annotations": annotations}}
                body = json.dumps({"items": [item], "metadata": {"resourceVersion": "7"}}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    async def _hold_watch(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.watches += 1
        if self.expire == "status" and self.watches == 1:
            body = b'{"kind":"Status","code":410,"reason":"Expired"}'
            writer.write(
                b"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        if self.expire == "event" and self.watches == 1:
            line = b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}\n'
            writer.write(f"{len(line):x}\r\n".encode() + line + b"\r\n0\r\n\r\n")
            await writer.drain()
            return
        await writer.drain()
        await reader.read()  # EOF: the client closed the watch
        self.watches_closed += 1


def _fake_kube(url: str) -> Kube:
    configuration = client.Configuration()
    configuration.host = url
    return Kube(
        client.ApiClient(configuration),
        timeouts=KubeTimeouts(connect=1.0, read=2.0, watch_margin=1.0, connect_retries=0),
    )


async def test_a_silent_watch_is_bounded_and_the_relist_sees_the_change() -> None:
    async with FakeAPIServer() as fake:
        kube = _fake_kube(fake.url)
        src = source(kube, "Service", "x", name="svc")
        task = asyncio.create_task(
            wait_until(kube, src, Checks(), idle=SLOW, relist_every=SLOW, watch_seconds=1)
        )
        await eventually(lambda: fake.watches >= 1, what="a watch")
        fake.go = True
        # Nothing ever arrives on the watch: its read bound (1 s + 1 s margin) ends it and the
        # wait lists again, long before the 60 s re-list.
        assert await asyncio.wait_for(task, BOUND) == "svc"
        assert fake.lists >= 2


@pytest.mark.parametrize("expire", ["event", "status"])
async def test_an_expired_resource_version_relists(expire: str) -> None:
    """410 Gone (the resourceVersion was compacted away) re-lists at once; the re-list sees
    the change. The real API server's watch cache answers a compacted resourceVersion with the
    current state (measured), so the 410 comes from the fake."""
    async with FakeAPIServer(expire=expire) as fake:
        kube = _fake_kube(fake.url)
        src = source(kube, "Service", "x", name="svc")
        found = wait_until(kube, src, Checks(), idle=SLOW, relist_every=SLOW, watch_seconds=50)
        assert await asyncio.wait_for(found, BOUND) == "svc"
        assert (fake.lists, fake.watches) == (2, 1)


async def test_a_silent_api_server_fails_the_wait() -> None:
    async with FakeAPIServer(silent=True) as fake:
        kube = _fake_kube(fake.url)
        src = source(kube, "Service", "x", name="svc")
        with pytest.raises(APIServerUnavailable):
            await asyncio.wait_for(wait_until(kube, src, Checks(), idle=SLOW), BOUND)


async def test_a_cancelled_wait_closes_its_watch() -> None:
    async with FakeAPIServer() as fake:
        kube = _fake_kube(fake.url)
        src = source(kube, "Service", "x", name="svc")
        task = asyncio.create_task(
            wait_until(kube, src, Checks(), idle=SLOW, relist_every=SLOW, watch_seconds=50)
        )
        await eventually(lambda: fake.watches >= 1, what="a watch")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(lambda: fake.watches_closed >= 1, what="closed")

"""kube.wait.wait_until: the watch wakes the wait, not a poll period.

Against the real kube-apiserver: a change (or an object created after the list) wakes a wait
whose idle and re-list periods are 60 s, longer than the bound the test gives it. The failure
paths (410 Gone, a silent watch or server, cancellation) are unit tests against a fake API
server: tests/unit/kube/test_list_watch.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from harness.helpers import eventually

from kube.client import Kube
from kube.wait import wait_until
from kube.watch import source
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


async def test_an_event_wakes_the_wait_before_any_poll(kube: Kube, ns: str) -> None:
    kube.core.create_namespaced_service(ns, _service("svc", ns))
    checks = Checks()
    src = source("Service", ns, name="svc")
    task = asyncio.create_task(
        wait_until(kube, src, checks, idle=SLOW, relist_every=SLOW, watch_seconds=50)
    )
    await eventually(lambda: checks.calls >= 1, what="first list")
    assert not task.done()
    await asyncio.to_thread(
        kube.core.patch_namespaced_service, "svc", ns, {"metadata": {"annotations": {"go": "yes"}}}
    )
    assert await asyncio.wait_for(task, BOUND) == "svc"


async def test_an_object_created_after_the_list_is_seen(kube: Kube, ns: str) -> None:
    checks = Checks()
    src = source("Service", ns, labels={"app": "late"})
    task = asyncio.create_task(wait_until(kube, src, checks, idle=SLOW, relist_every=SLOW))
    await eventually(lambda: checks.calls >= 1, what="first list")
    late = _service("late", ns)
    late["metadata"]["labels"] = {"app": "late"}
    late["metadata"]["annotations"] = {"go": "yes"}
    await asyncio.to_thread(kube.core.create_namespaced_service, ns, late)
    assert await asyncio.wait_for(task, BOUND) == "late"

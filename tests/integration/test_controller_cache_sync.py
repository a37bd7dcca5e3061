"""The controller's watch-fed cache against the real kube-apiserver (controller/machinery/cache.py,
controller/machinery/watch.py): nothing is read before the first list, the list holds exactly the
labelled
objects of the namespace, and watch events keep it current and enqueue the DecisionModel. The
410 Gone relist is tests/unit/controller/test_cache.py (this API server replays a resume point
even after an etcd compaction, so it cannot be made to answer 410 here)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harness.helpers import eventually, scratch_namespace
from harness.rollout_harness import install_crd

from controller.machinery.cache import CacheNotSynced, ObjectCache
from controller.machinery.watch import Watcher
from decisionmodel.engine.render.labels import LABEL_NAME
from kube.client import Kube
from localenv.cluster import LocalCluster


@pytest.fixture
def kube(local_cluster: LocalCluster) -> Kube:
    install_crd(local_cluster)  # DecisionModels are watched too
    return Kube.from_config(str(local_cluster.kubeconfig))


@pytest.fixture
def namespace(local_cluster: LocalCluster) -> Iterator[str]:
    yield from scratch_namespace(local_cluster, "cache")


def service(namespace: str, name: str, dm: str | None) -> dict[str, Any]:
    labels = {LABEL_NAME: dm} if dm else {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"ports": [{"port": 80}], "selector": {"app": name}},
    }


class Keys:
    """The keys the watcher enqueued, as the work queue would receive them."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def add(self, key: str) -> None:
        self.seen.append(key)


async def test_nothing_is_read_before_the_first_list_then_the_watch_keeps_it_current(
    kube: Kube, namespace: str
) -> None:
    kube.core.create_namespaced_service(namespace, service(namespace, "a", "m1"))
    kube.core.create_namespaced_service(namespace, service(namespace, "plain", None))
    cache = ObjectCache()
    # Not listed yet: a read refuses rather than answer "gone" (which would recreate it).
    with pytest.raises(CacheNotSynced):
        cache.get("Service", namespace, "a")
    keys = Keys()
    watcher = Watcher(kube, keys.add, [namespace], cache)
    watcher.start()
    try:
        await eventually(lambda: watcher.synced, 30, what="every kind listed")
        assert cache.get("Service", namespace, "a") is not None
        assert cache.get("Service", namespace, "plain") is None  # not labelled: not ours
        assert [o["metadata"]["name"] for o in cache.list_labelled(
            "Service", namespace, {LABEL_NAME: "m1"}
        )] == ["a"]  # fmt: skip
        await eventually(lambda: f"{namespace}/m1" in keys.seen, 10, what="m1 enqueued")

        kube.core.create_namespaced_service(namespace, service(namespace, "b", "m2"))
        await eventually(
            lambda: (
                cache.get("Service", namespace, "b") is not None and f"{namespace}/m2" in keys.seen
            ),
            30,
            what="a created object cached and its DecisionModel enqueued",
        )
        keys.seen.clear()
        kube.core.delete_namespaced_service("a", namespace)
        await eventually(
            lambda: cache.get("Service", namespace, "a") is None and f"{namespace}/m1" in keys.seen,
            30,
            what="a deleted object dropped and its DecisionModel enqueued",
        )
        # A copy is handed out: changing it changes nothing cached.
        copy = cache.get("Service", namespace, "b")
        assert copy is not None
        copy["metadata"]["labels"][LABEL_NAME] = "other"
        assert cache.list_labelled("Service", namespace, {LABEL_NAME: "m2"})
    finally:
        watcher.stop()

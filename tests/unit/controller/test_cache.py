"""The controller's cache (controller/machinery/cache.py) and the watch loop that feeds it
(controller/machinery/watch.py), against a scripted API: never read before the first list, a
relist after
410 Gone replaces the scope and reports what vanished, a dropped connection resumes from the
last resourceVersion without a relist, and readers get copies. The real API server:
tests/integration/test_controller_cache.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harness.fake_api_server import FakeAPIServer
from harness.helpers import eventually

from controller.machinery.cache import CacheNotSynced, ObjectCache
from controller.machinery.watch import Watcher, WatchSpec, _labelled_key
from decisionmodel.engine.render.labels import LABEL_NAME


def obj(name: str, dm: str, rv: str = "1", ns: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv,
                         "labels": {LABEL_NAME: dm}}}  # fmt: skip


def test_a_kind_is_refused_until_listed_in_that_namespace() -> None:
    cache = ObjectCache()
    with pytest.raises(CacheNotSynced):
        cache.get("Service", "ns", "a")
    with pytest.raises(CacheNotSynced):
        cache.list_labelled("Service", "ns", {LABEL_NAME: "m"})
    cache.replace("Service", "ns", [obj("a", "m")])
    assert cache.get("Service", "ns", "a") is not None
    with pytest.raises(CacheNotSynced):  # another namespace is not listed
        cache.get("Service", "other", "a")
    cache.replace("Pod", None, [])  # a list across all namespaces covers every one
    assert cache.list_labelled("Pod", "other", {LABEL_NAME: "m"}) == []


def test_a_relist_replaces_its_scope_and_reports_what_vanished() -> None:
    cache = ObjectCache()
    cache.replace("Deployment", "ns", [obj("a", "m1"), obj("b", "m2")])
    cache.replace("Deployment", "elsewhere", [obj("c", "m1", ns="elsewhere")])
    dropped = cache.replace("Deployment", "ns", [obj("b", "m2", rv="2")])
    assert [d["metadata"]["name"] for d in dropped] == ["a"]
    assert cache.get("Deployment", "ns", "a") is None
    assert cache.list_labelled("Deployment", "ns", {LABEL_NAME: "m1"}) == []
    assert cache.get("Deployment", "elsewhere", "c") is not None  # other scope untouched


def test_events_index_by_decision_model_and_readers_get_copies() -> None:
    cache = ObjectCache()
    cache.replace("Pod", "ns", [])
    cache.upsert("Pod", obj("p1", "m1"))
    cache.upsert("Pod", obj("p2", "m1"))
    cache.upsert("Pod", obj("p1", "m2", rv="2"))  # relabelled: moves to m2
    names = [p["metadata"]["name"] for p in cache.list_labelled("Pod", "ns", {LABEL_NAME: "m1"})]
    assert names == ["p2"]
    got = cache.get("Pod", "ns", "p2")
    assert got is not None and got["kind"] == "Pod"
    got["metadata"]["labels"][LABEL_NAME] = "changed"
    assert cache.list_labelled("Pod", "ns", {LABEL_NAME: "m1"})
    cache.delete("Pod", obj("p2", "m1"))
    assert cache.list_labelled("Pod", "ns", {LABEL_NAME: "m1"}) == []


def test_what_no_reader_uses_is_not_kept_and_the_rest_is_kept_whole() -> None:
    """managedFields and kubectl's last-applied copy are about half of every object: dropped.
    Everything else (spec, status, other annotations) comes back as it went in."""
    cache = ObjectCache()
    cache.replace("DecisionModel", "ns", [])
    dm = obj("m1", "m1")
    dm["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    dm["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {"model": "laya:en"}}',
        "decisionmodel.io/promote": "abc",
    }
    dm["spec"] = {"model": "laya:en", "replicas": 2}
    dm["status"] = {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}
    cache.upsert("DecisionModel", dm)
    got = cache.get("DecisionModel", "ns", "m1")
    assert got is not None
    assert "managedFields" not in got["metadata"]
    assert got["metadata"]["annotations"] == {"decisionmodel.io/promote": "abc"}
    assert got["spec"] == {"model": "laya:en", "replicas": 2}
    assert got["status"] == dm["status"]
    assert got["metadata"]["labels"] == {LABEL_NAME: "m1"}


def key_log() -> tuple[list[str], Any]:
    keys: list[str] = []
    return keys, keys.append


async def test_410_gone_relists_drops_what_was_deleted_and_reconciles_its_decision_model() -> None:
    cache = ObjectCache()
    cache.replace("Service", "ns", [obj("ghost", "m3"), obj("kept", "m1")])  # before a disconnect
    added = [{"type": "ADDED", "object": obj("after", "m4", rv="101")}]
    async with FakeAPIServer(items=[obj("kept", "m1", rv="5")], script=["410", added]) as fake:
        keys, enqueue = key_log()
        watcher = Watcher(fake.kube(), enqueue, ["ns"], cache)
        spec = WatchSpec("Service", _labelled_key, LABEL_NAME)
        task = asyncio.create_task(watcher.watch_kind(spec, "ns", resume="7"))
        try:
            await eventually(lambda: cache.get("Service", "ns", "after") is not None, 10)
        finally:
            task.cancel()
        assert fake.lists == 1  # one relist, after the 410
        assert fake.watched_from[:2] == ["7", "100"]  # the resume point, then the list's version
        assert cache.get("Service", "ns", "ghost") is None
        assert "ns/m3" in keys  # the vanished object's DecisionModel is reconciled again
        assert {"ns/m1", "ns/m4"} <= set(keys)


async def test_a_dropped_connection_resumes_from_the_last_version_without_a_relist() -> None:
    cache = ObjectCache()
    modified = [{"type": "MODIFIED", "object": obj("a", "m1", rv="120")}]
    deleted = [{"type": "DELETED", "object": obj("a", "m1", rv="130")}]
    async with FakeAPIServer(items=[obj("a", "m1")], script=[modified, "reset", deleted]) as fake:
        keys, enqueue = key_log()
        watcher = Watcher(fake.kube(), enqueue, ["ns"], cache)
        spec = WatchSpec("Service", _labelled_key, LABEL_NAME)
        task = asyncio.create_task(watcher.watch_kind(spec, "ns"))
        try:
            await eventually(
                lambda: fake.watches >= 3 and cache.get("Service", "ns", "a") is None, 10
            )
        finally:
            task.cancel()
        assert fake.lists == 1
        assert fake.watched_from[:3] == ["100", "120", "120"]
        assert keys.count("ns/m1") == 3  # listed, modified, deleted


async def test_synced_once_every_kind_is_listed_in_every_namespace() -> None:
    async with FakeAPIServer(items=[]) as fake:
        watcher = Watcher(fake.kube(), lambda key: None, ["a", "b"], ObjectCache())
        watcher.start()
        try:
            assert not watcher.synced
            await eventually(lambda: watcher.synced, 10, what="every first list")
            assert fake.lists == 2 * 7  # 7 kinds in each of 2 namespaces
        finally:
            watcher.stop()

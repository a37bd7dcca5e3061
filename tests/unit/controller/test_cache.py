"""The controller's cache (controller/reconciler/cache.py) and the watch loop that feeds it
(controller/reconciler/watch.py), against a scripted API: never read before the first list, a
relist after
410 Gone replaces the scope and reports what vanished, a dropped connection resumes from the
last resourceVersion without a relist, and readers get copies. The real API server:
tests/integration/test_controller_cache.py."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from controller.reconciler.cache import CacheNotSynced, ObjectCache
from controller.reconciler.watch import Watcher, WatchSpec, _labelled_key
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


class Stream:
    """A watch response: JSON lines, then the end of the stream."""

    status = 200

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.lines = [json.dumps(e).encode() + b"\n" for e in events]

    def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
        yield from self.lines

    def close(self) -> None: ...

    def release_conn(self) -> None: ...


class Listed:
    def __init__(self, items: list[dict[str, Any]], rv: str) -> None:
        self.data = json.dumps({"items": items, "metadata": {"resourceVersion": rv}}).encode()


class ScriptedAPI:
    """Answers lists with ``items`` and watches with the scripted steps, in order; once the
    script is done, a watch waits for the watcher to stop."""

    def __init__(self, items: list[dict[str, Any]], script: list[Any], stop: threading.Event):
        self.items = items
        self.script = script
        self.stop = stop
        self.lists = 0
        self.watched_from: list[str | None] = []

    def lister(self, namespace: str, **kw: Any) -> Any:
        """:return: V1ServiceList"""
        if not kw.get("watch"):
            self.lists += 1
            return Listed(self.items, "100")
        self.watched_from.append(kw.get("resource_version"))
        if not self.script:
            self.stop.wait(10)
            return Stream([])
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return Stream(step)


def run_watcher(
    api_items: list[dict[str, Any]], script: list[Any], cache: ObjectCache, resume: str | None
) -> tuple[Watcher, ScriptedAPI, list[str], threading.Thread]:
    loop = asyncio.new_event_loop()
    keys: list[str] = []
    watcher = Watcher(None, loop, keys.append, ["ns"], cache)  # type: ignore[arg-type]
    watcher._emit = lambda key: keys.append(key) if key else None  # type: ignore[method-assign]
    api = ScriptedAPI(api_items, script, watcher.stop_event)
    spec = WatchSpec("services", "Service", api.lister, api.lister, _labelled_key, {})
    thread = threading.Thread(target=watcher.watch_kind, args=(spec, "ns", resume), daemon=True)
    thread.start()
    return watcher, api, keys, thread


def wait_for(check: Any) -> None:
    from helpers import assert_eventually

    assert_eventually(check, 10)


def test_410_gone_relists_drops_what_was_deleted_and_reconciles_its_decision_model() -> None:
    cache = ObjectCache()
    cache.replace("Service", "ns", [obj("ghost", "m3"), obj("kept", "m1")])  # before a disconnect
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                        "message": "too old resource version"}}  # fmt: skip
    added = {"type": "ADDED", "object": obj("after", "m4", rv="101")}
    watcher, api, keys, thread = run_watcher([obj("kept", "m1", rv="5")], [[gone], [added]],
                                             cache, resume="7")  # fmt: skip
    try:
        wait_for(lambda: cache.get("Service", "ns", "after") is not None)
        assert api.lists == 1  # one relist, after the 410
        assert api.watched_from[:2] == ["7", "100"]  # the resume point, then the list's version
        assert cache.get("Service", "ns", "ghost") is None
        assert "ns/m3" in keys  # the vanished object's DecisionModel is reconciled again
        assert {"ns/m1", "ns/m4"} <= set(keys)
    finally:
        watcher.stop()
        thread.join(15)


def test_a_dropped_connection_resumes_from_the_last_version_without_a_relist() -> None:
    cache = ObjectCache()
    modified = {"type": "MODIFIED", "object": obj("a", "m1", rv="120")}
    deleted = {"type": "DELETED", "object": obj("a", "m1", rv="130")}
    reset = urllib3.exceptions.ProtocolError("Connection reset by peer")
    watcher, api, keys, thread = run_watcher([obj("a", "m1")], [[modified], reset, [deleted]],
                                             cache, resume=None)  # fmt: skip
    try:
        wait_for(lambda: len(api.watched_from) >= 3 and cache.get("Service", "ns", "a") is None)
        assert api.lists == 1
        assert api.watched_from[:3] == ["100", "120", "120"]
        assert keys.count("ns/m1") == 3  # listed, modified, deleted
    finally:
        watcher.stop()
        thread.join(15)

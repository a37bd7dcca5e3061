"""Watches that keep the controller's cache (controller/reconciler/cache.py) and turn API changes
into
DecisionModel keys on the work queue.

Each watch lists once (into the cache), then watches from the list's resourceVersion, resumes
from the last resourceVersion it saw after a timeout or a dropped connection, and relists on 410
Gone (the version was compacted away). It runs in a thread (the kubernetes client is synchronous)
and hands keys to the event loop thread-safely, after the cache holds the change (a reconcile of
the key reads it). The server ends each watch after ``WATCH_TIMEOUT_SECONDS`` and the client
gives up a silent one soon after (kube/timeouts.py). Work is keyed per DecisionModel, so events
of many Pods of one model collapse into one reconcile.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import watch
from kubernetes.client.rest import ApiException

from controller.reconciler.cache import DECISION_MODEL, ObjectCache
from decisionmodel.api import GROUP, PLURAL, VERSION
from decisionmodel.engine.render.labels import LABEL_NAME
from kube.client import Kube

log = logging.getLogger("dmrollout.controller.watch")

WATCH_TIMEOUT_SECONDS = 240


@dataclass(frozen=True)
class WatchSpec:
    what: str
    kind: str  # the cache's name for it
    list_all: Callable[..., Any]
    list_namespaced: Callable[..., Any] | None
    key_of: Callable[[dict[str, Any]], str | None]
    extra: dict[str, Any]


def _dm_key(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _labelled_key(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(LABEL_NAME)
    return f"{meta.get('namespace')}/{name}" if name else None


def watch_specs(kube: Kube) -> list[WatchSpec]:
    labelled = {"label_selector": LABEL_NAME}
    custom = kube.custom

    def dms_all(**kw: Any) -> Any:
        return custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kw)

    def dms_ns(namespace: str, **kw: Any) -> Any:
        return custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, **kw)

    return [
        WatchSpec("decisionmodels", DECISION_MODEL, dms_all, dms_ns, _dm_key, {}),
        WatchSpec(
            "pods",
            "Pod",
            kube.core.list_pod_for_all_namespaces,
            kube.core.list_namespaced_pod,
            _labelled_key,
            labelled,
        ),
        WatchSpec(
            "deployments",
            "Deployment",
            kube.apps.list_deployment_for_all_namespaces,
            kube.apps.list_namespaced_deployment,
            _labelled_key,
            labelled,
        ),
        WatchSpec(
            "services",
            "Service",
            kube.core.list_service_for_all_namespaces,
            kube.core.list_namespaced_service,
            _labelled_key,
            labelled,
        ),
        WatchSpec(
            "pdbs",
            "PodDisruptionBudget",
            kube.policy.list_pod_disruption_budget_for_all_namespaces,
            kube.policy.list_namespaced_pod_disruption_budget,
            _labelled_key,
            labelled,
        ),
        WatchSpec(
            "pvcs",
            "PersistentVolumeClaim",
            kube.core.list_persistent_volume_claim_for_all_namespaces,
            kube.core.list_namespaced_persistent_volume_claim,
            _labelled_key,
            labelled,
        ),
        # The reaper reads a DecisionModel's Jobs (a finished prefetch Job can be left behind).
        WatchSpec(
            "jobs",
            "Job",
            kube.batch.list_job_for_all_namespaces,
            kube.batch.list_namespaced_job,
            _labelled_key,
            labelled,
        ),
    ]


def _untyped(lister: Callable[..., Any]) -> Callable[..., Any]:
    """``lister`` without the return type the client reads from its docstring: given one, the
    client's watch turns every event into model objects (a JSON round trip and thousands of
    attribute sets per Pod event), which the cache never reads; it keeps ``raw_object``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return lister(*args, **kwargs)

    return call


class Watcher:
    """One thread per (resource, namespace) watch; ``synced`` once every first list is done."""

    def __init__(
        self,
        kube: Kube,
        loop: asyncio.AbstractEventLoop,
        enqueue: Callable[[str], None],
        namespaces: list[str],
        cache: ObjectCache | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache or ObjectCache()
        self.loop = loop
        self.enqueue = enqueue
        self.namespaces = namespaces
        self.stop_event = threading.Event()
        self._pending_sync: set[str] = set()
        self._lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    @property
    def synced(self) -> bool:
        with self._lock:
            return not self._pending_sync

    def start(self) -> None:
        for spec in watch_specs(self.kube):
            scopes: list[str | None] = list(self.namespaces) if self.namespaces else [None]
            for ns in scopes:
                name = f"watch-{spec.what}-{ns or 'all'}"
                with self._lock:
                    self._pending_sync.add(name)
                t = threading.Thread(
                    target=self.watch_kind, args=(spec, ns), name=name, daemon=True
                )
                self.threads.append(t)
                t.start()

    def stop(self) -> None:
        self.stop_event.set()

    def _emit(self, key: str | None) -> None:
        if key:
            self.loop.call_soon_threadsafe(self.enqueue, key)

    def watch_kind(self, spec: WatchSpec, namespace: str | None, resume: str | None = None) -> None:
        """List then watch one kind in one namespace (None: all) until stopped; ``resume``: a
        resourceVersion to watch from first, as after a reconnect (it may be compacted away:
        410 Gone, then a relist)."""
        name = f"watch-{spec.what}-{namespace or 'all'}"
        if namespace is None:
            lister: Callable[..., Any] = spec.list_all
            args: tuple[Any, ...] = ()
        else:
            assert spec.list_namespaced is not None
            lister, args = spec.list_namespaced, (namespace,)
        rv: str | None = resume
        while not self.stop_event.is_set():
            try:
                if rv is None:
                    response = lister(*args, _preload_content=False, **spec.extra)
                    body = json.loads(response.data)
                    items = body.get("items", [])
                    # Objects deleted while no watch ran (a relist after 410) drop out here,
                    # and their DecisionModels are reconciled again.
                    for gone in self.cache.replace(spec.kind, namespace, items):
                        self._emit(spec.key_of(gone))
                    for item in items:
                        self._emit(spec.key_of(item))
                    rv = body["metadata"]["resourceVersion"]
                    with self._lock:
                        self._pending_sync.discard(name)
                w = watch.Watch()
                for event in w.stream(
                    _untyped(lister),
                    *args,
                    resource_version=rv,
                    timeout_seconds=WATCH_TIMEOUT_SECONDS,
                    allow_watch_bookmarks=True,
                    _preload_content=False,
                    **spec.extra,
                ):
                    if self.stop_event.is_set():
                        w.stop()
                        break
                    obj = event["raw_object"]
                    new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if new_rv:
                        rv = new_rv  # resume point after a dropped connection
                    if event["type"] == "BOOKMARK":
                        continue
                    if event["type"] == "ERROR":
                        if obj.get("code") == 410:
                            rv = None  # compacted: relist
                        break
                    if event["type"] == "DELETED":
                        self.cache.delete(spec.kind, obj)
                    else:
                        self.cache.upsert(spec.kind, obj)
                    self._emit(spec.key_of(obj))
            except ApiException as e:
                if e.status == 410:
                    rv = None
                else:
                    log.warning("%s: %s; retrying", name, e.status)
                    self.stop_event.wait(1)
            except Exception as e:  # connection reset, API server restart
                log.warning("%s: %s; retrying", name, e)
                self.stop_event.wait(1)

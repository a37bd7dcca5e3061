"""Watches that keep the controller's cache (controller/machinery/cache.py) and turn API changes
into DecisionModel keys on the work queue.

One list-then-watch per kind and watched namespace (``kube.watch``, the same loop the
activities' waits use), each an asyncio task: it lists once into the cache, then watches from
the list's resourceVersion, resumes from the last resourceVersion it saw after a timeout or a
dropped connection, and lists again on 410 Gone (the version was compacted away). A key is
handed to the work queue after the cache holds the change (a reconcile of the key reads it).
The server ends each watch after ``WATCH_TIMEOUT_SECONDS`` and the client gives up a silent one
soon after (kube/timeouts.py). Work is keyed per DecisionModel, so events of many Pods of one
model collapse into one reconcile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Final

from controller.machinery.cache import DECISION_MODEL, LABELLED_KINDS, ObjectCache
from decisionmodel.engine.render.labels import LABEL_NAME
from kube.client import Kube
from kube.errors import KubeError
from kube.watch import Changes, Listed, ListWatch, source

log = logging.getLogger("dmrollout.controller.watch")

WATCH_TIMEOUT_SECONDS: Final = 240
# After a list or watch request failed (the API server restarting, a refused request).
RETRY_PAUSE_SECONDS: Final = 1.0


@dataclass(frozen=True)
class WatchSpec:
    kind: str  # the cache's name for it, and kube.watch's
    key_of: Callable[[dict[str, Any]], str | None]
    has_label: str | None = None


def _dm_key(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _labelled_key(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(LABEL_NAME)
    return f"{meta.get('namespace')}/{name}" if name else None


# The DecisionModels, and every kind the controller reads that carries decisionmodel.io/name
# (the reaper reads a DecisionModel's Jobs too: a finished prefetch Job can be left behind).
WATCHES: Final = (
    WatchSpec(DECISION_MODEL, _dm_key),
    *(WatchSpec(kind, _labelled_key, LABEL_NAME) for kind in LABELLED_KINDS),
)


class Watcher:
    """One task per (kind, namespace) watch; ``synced`` once every first list is done."""

    def __init__(
        self,
        kube: Kube,
        enqueue: Callable[[str], None],
        namespaces: list[str],
        cache: ObjectCache | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache or ObjectCache()
        self.enqueue = enqueue
        self.namespaces = namespaces
        # /readyz reads ``synced`` from the health server's thread.
        self._pending_sync: set[str] = set()
        self._lock = threading.Lock()
        self.tasks: list[asyncio.Task[None]] = []

    @property
    def synced(self) -> bool:
        with self._lock:
            return not self._pending_sync

    def start(self) -> None:
        scopes: list[str | None] = list(self.namespaces) if self.namespaces else [None]
        for spec in WATCHES:
            for ns in scopes:
                name = f"watch-{spec.kind}-{ns or 'all'}"
                with self._lock:
                    self._pending_sync.add(name)
                self.tasks.append(asyncio.create_task(self.watch_kind(spec, ns), name=name))

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()

    def _emit(self, key: str | None) -> None:
        if key:
            self.enqueue(key)

    async def watch_kind(
        self, spec: WatchSpec, namespace: str | None, resume: str | None = None
    ) -> None:
        """List then watch one kind in one namespace (None: all) until cancelled; ``resume``: a
        resourceVersion to watch from first, as after a reconnect (it may be compacted away:
        410 Gone, then a list)."""
        name = f"watch-{spec.kind}-{namespace or 'all'}"
        src = source(spec.kind, namespace, has_label=spec.has_label)
        watch = ListWatch(self.kube, src, watch_seconds=WATCH_TIMEOUT_SECONDS, rv=resume)
        while True:
            try:
                async with aclosing(watch.events()) as events:
                    async for event in events:
                        if isinstance(event, Listed):
                            self._listed(spec, namespace, event.items)
                            with self._lock:
                                self._pending_sync.discard(name)
                        elif isinstance(event, Changes):
                            self._changed(spec, event)
            except KubeError as e:  # a list that failed, a refused watch: again, after a pause
                log.warning("%s: %s; retrying", name, e)
            except Exception as e:  # a bug in a handler must not end the watch for good
                log.exception("%s: %s; retrying", name, e)
            await asyncio.sleep(RETRY_PAUSE_SECONDS)

    def _listed(self, spec: WatchSpec, namespace: str | None, items: list[dict[str, Any]]) -> None:
        # Objects deleted while no watch ran (a list after 410) drop out here, and their
        # DecisionModels are reconciled again.
        for gone in self.cache.replace(spec.kind, namespace, items):
            self._emit(spec.key_of(gone))
        for item in items:
            self._emit(spec.key_of(item))

    def _changed(self, spec: WatchSpec, event: Changes) -> None:
        for change in event.changes:
            if change.type == "DELETED":
                self.cache.delete(spec.kind, change.object)
            else:
                self.cache.upsert(spec.kind, change.object)
            self._emit(spec.key_of(change.object))

"""The controller's watch-fed cache: what reconciles and the steady state read instead of the API.

Issue 14: re-reading each DecisionModel's objects from the API every re-inspection cost ~0.18
requests/s per DecisionModel (134 req/s at 1,000). Here one list + watch per kind and watched
namespace (``controller/machinery/watch.py``) keeps a copy of every object the controller reads:
the
DecisionModels, and the Pods, Deployments, Services, PDBs, PVCs and Jobs labelled
``decisionmodel.io/name``. Reads are then free and the idle cost no longer grows with the count.

Rules that keep it safe:

- a kind is read only once its first list in that namespace is done: before that a read raises
  ``CacheNotSynced`` (the reconcile is requeued), never "not found" — an empty cache read as
  "the objects are gone" would recreate or delete them;
- a relist (after 410 Gone) replaces the scope's objects, and the objects it no longer holds
  are reported, so their DecisionModels are reconciled again;
- readers get copies (the store is shared between the watch threads and the event loop): each
  object is kept as its deflated JSON without managedFields, decoded on read (the memory point
  of issue 14);
- writes still go to the API; the cache shows them with the watch event that follows, which
  enqueues the DecisionModel again (read-your-write: a create answered 409 is simply left to
  that event, ``create_or_wait``).
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from decisionmodel.engine.render.labels import LABEL_NAME, deployment_name, selector_labels
from kube.client import Kube, revision_replica_set
from kube.errors import Conflict

DECISION_MODEL: Final = "DecisionModel"
# The kinds the controller reads, besides DecisionModels (all labelled decisionmodel.io/name).
LABELLED_KINDS: Final = (
    "Pod",
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "PersistentVolumeClaim",
    "Job",
)

Key = tuple[str, str]  # (namespace, name)


class CacheNotSynced(RuntimeError):
    """The kind's first list in that namespace is not done yet: requeue, do not act."""


class ObjectReader(Protocol):
    """What reconciles read: the cache in the controller, the API directly elsewhere."""

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list_labelled(
        self, kind: str, namespace: str, selector: dict[str, str]
    ) -> list[dict[str, Any]]: ...

    def list_revision_pods(
        self, namespace: str, dm: str, revision: str
    ) -> list[dict[str, Any]]: ...


class DirectReader:
    """Reads straight from the API (tests, tools; the controller before its cache existed)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind != DECISION_MODEL:
            return self.kube.get(kind, namespace, name)
        return self.kube.read_dm(namespace, name)

    def list_labelled(
        self, kind: str, namespace: str, selector: dict[str, str]
    ) -> list[dict[str, Any]]:
        return self.kube.list_labelled(kind, namespace, selector)

    def list_revision_pods(self, namespace: str, dm: str, revision: str) -> list[dict[str, Any]]:
        return self.kube.list_revision_pods(namespace, dm, revision)


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# What no reader uses and the API server repeats in every object: about half of each object's
# size is its managedFields, and kubectl's last-applied annotation is a second copy of the spec.
_LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"


def _trimmed(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and _LAST_APPLIED in annotations:
            del annotations[_LAST_APPLIED]
    return obj


@dataclass(frozen=True)
class _Entry:
    """One cached object: its labels (what selectors match) and its JSON, deflated.

    Why not the dict: at 1,000 DecisionModels the dicts were ~180 MiB of the controller's RSS
    (issue 14: controller + worker < 400 MB). The compact JSON of an object is ~2.1 KB, deflated
    ~0.95 KB (level 1: ~20 us to deflate, ~10 us to inflate). Decoding gives every reader its
    own copy, which a dict needed a deepcopy for (slower than inflate + decode)."""

    labels: dict[str, str]
    deflated: bytes

    @classmethod
    def of(cls, obj: dict[str, Any]) -> _Entry:
        text = json.dumps(_trimmed(obj), separators=(",", ":")).encode()
        return cls(_labels(obj), zlib.compress(text, 1))

    def decode(self) -> dict[str, Any]:
        obj: dict[str, Any] = json.loads(zlib.decompress(self.deflated))
        return obj


class ObjectCache:
    """Per kind, the objects by (namespace, name), and by (namespace, DecisionModel name)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[Key, _Entry]] = {}
        # (kind, namespace, decisionmodel.io/name) -> names: a DecisionModel's objects without
        # scanning the kind (the reaper and the steady state read per DecisionModel).
        self._by_dm: dict[tuple[str, str, str], set[str]] = {}
        # (kind, scope) whose first list is done; scope None = all namespaces.
        self._synced: set[tuple[str, str | None]] = set()

    # -- written by the watch threads ------------------------------------------------------
    def replace(
        self, kind: str, scope: str | None, items: Iterable[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """A (re)list of ``kind`` in ``scope``: its objects become ``items``; the objects that
        were dropped (deleted while no watch ran)."""
        fresh = {_key(o): o for o in items}
        with self._lock:
            store = self._objects.setdefault(kind, {})
            stale = [k for k in store if (scope is None or k[0] == scope) and k not in fresh]
            dropped = [store[k].decode() for k in stale]
            for k in stale:
                self._remove(kind, k)
            for obj in fresh.values():
                self._put(kind, obj)
            self._synced.add((kind, scope))
        return dropped

    def upsert(self, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            self._put(kind, obj)

    def delete(self, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            self._remove(kind, _key(obj))

    def _put(self, kind: str, obj: dict[str, Any]) -> None:
        key = _key(obj)
        store = self._objects.setdefault(kind, {})
        if key in store:
            self._remove(kind, key)
        obj["kind"] = kind  # list items carry no kind; callers (reaper, messages) use it
        entry = store[key] = _Entry.of(obj)
        dm = entry.labels.get(LABEL_NAME)
        if dm:
            self._by_dm.setdefault((kind, key[0], dm), set()).add(key[1])

    def _remove(self, kind: str, key: Key) -> None:
        entry = self._objects.get(kind, {}).pop(key, None)
        if entry is None:
            return
        dm = entry.labels.get(LABEL_NAME) or ""
        names = self._by_dm.get((kind, key[0], dm))
        if names is not None:
            names.discard(key[1])
            if not names:
                del self._by_dm[(kind, key[0], dm)]

    # -- read by reconciles ----------------------------------------------------------------
    def keys(self, kind: str) -> list[Key]:
        """Every (namespace, name) of ``kind`` the cache holds."""
        with self._lock:
            return list(self._objects.get(kind, {}))

    def synced(self, kind: str, namespace: str) -> bool:
        with self._lock:
            return (kind, None) in self._synced or (kind, namespace) in self._synced

    def _check(self, kind: str, namespace: str) -> None:
        if (kind, None) not in self._synced and (kind, namespace) not in self._synced:
            raise CacheNotSynced(f"{kind}s in {namespace} are not listed yet")

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            self._check(kind, namespace)
            entry = self._objects.get(kind, {}).get((namespace, name))
        return entry.decode() if entry is not None else None

    def list_labelled(
        self, kind: str, namespace: str, selector: dict[str, str]
    ) -> list[dict[str, Any]]:
        with self._lock:
            self._check(kind, namespace)
            store = self._objects.get(kind, {})
            dm = selector.get(LABEL_NAME)
            if dm is not None:
                names: Iterable[str] = sorted(self._by_dm.get((kind, namespace, dm), ()))
                candidates = [store[(namespace, n)] for n in names]
            else:
                candidates = [e for k, e in sorted(store.items()) if k[0] == namespace]
        return [e.decode() for e in candidates if _matches(e.labels, selector)]

    def list_revision_pods(self, namespace: str, dm: str, revision: str) -> list[dict[str, Any]]:
        """As ``Kube.list_revision_pods``: labelled for the revision and controlled by a
        ReplicaSet of its Deployment (a Pod that only carries the labels is never probed)."""
        pods = self.list_labelled("Pod", namespace, selector_labels(dm, revision))
        return [p for p in pods if revision_replica_set(p) == deployment_name(dm, revision)]


def create_or_wait(kube: Kube, obj: dict[str, Any]) -> dict[str, Any] | None:
    """Create ``obj``; None when one of that name exists already (409).

    The controller reads through its cache, which can lag its own writes by a moment: a create
    answered 409 means the object is there and its watch event is on the way (and enqueues the
    DecisionModel again), where ownership is checked from the cache. No read here, so the
    controller needs no ``get`` on what it only restores.
    """
    ops = kube.kinds[obj["kind"]]
    try:
        created: dict[str, Any] = kube.raw(ops.create, obj["metadata"]["namespace"], obj)
        return created
    except Conflict:
        return None


__all__ = [
    "DECISION_MODEL",
    "LABELLED_KINDS",
    "CacheNotSynced",
    "DirectReader",
    "ObjectCache",
    "ObjectReader",
    "create_or_wait",
]

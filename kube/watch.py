"""The one list-then-watch: list a collection, then watch it from the list's resourceVersion.

Used by the controller's watches (which keep its cache, ``controller.machinery.watch``) and by
the activities' waits (``kube.wait``). :meth:`ListWatch.events` yields what changed:

- :class:`Listed`: a fresh list (the first, after 410 Gone, or the periodic safety net);
- :class:`Changes`: the ADDED/MODIFIED/DELETED events of a burst, in order (bookmarks only move
  the resume point);
- :class:`Idle`: ``idle`` seconds passed without a change (the caller heartbeats or probes).

The rules, the same for both users:

- each watch request is bounded twice: server side by ``timeoutSeconds`` (the watch then
  resumes from the last resourceVersion seen, bookmarks included) and client side by a read
  timeout of that plus ``KubeTimeouts.watch_margin``, so a silent API server ends the request;
- 410 Gone (the resourceVersion was compacted away), as a status or as an ERROR event, lists
  again; a dropped or timed-out watch connection resumes from the last resourceVersion after
  a short pause;
- a list whose transport fails raises :class:`kube.errors.Unavailable`, any refused request its
  typed error (``kube.errors``): the caller decides whether to retry;
- cancellation-safe: the watch is an async HTTP stream (httpx) on the event loop, not a
  blocking call in a thread, so a cancelled caller stops at once and its connection is closed.
  Iterate with ``contextlib.aclosing`` so that leaving the loop early closes it too.

The requests go to the same API server with the same credentials as the kubernetes client (its
Configuration: host, CA, client certificate, bearer token with its refresh hook, proxy).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import httpx

from decisionmodel.api import GROUP, PLURAL, VERSION
from decisionmodel.api.pipeline import PIPELINE_PLURAL
from kube.client import Kube
from kube.errors import Unavailable, from_status, status_reason

Obj = dict[str, Any]

# The server-side lifetime of one watch request; it then resumes from where it was.
WATCH_SECONDS: Final = 60
# After a watch connection failed (reset, timed out), before it resumes.
RECONNECT_PAUSE_SECONDS: Final = 1.0

# kind → (URL prefix of its API group version, plural)
_PATHS: Final = {
    "Pod": ("/api/v1", "pods"),
    "Job": ("/apis/batch/v1", "jobs"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims"),
    "Service": ("/api/v1", "services"),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets"),
    "DecisionModel": (f"/apis/{GROUP}/{VERSION}", PLURAL),
    "DecisionModelPipeline": (f"/apis/{GROUP}/{VERSION}", PIPELINE_PLURAL),
}


@dataclass(frozen=True)
class Source:
    """What to list and watch: one kind in one namespace (or all), narrowed by selectors."""

    path: str
    label_selector: str | None = None
    field_selector: str | None = None

    def selectors(self) -> dict[str, str]:
        found = {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}
        return {k: v for k, v in found.items() if v}


def source(
    kind: str,
    namespace: str | None,
    labels: dict[str, str] | None = None,
    name: str | None = None,
    has_label: str | None = None,
) -> Source:
    """Objects of ``kind`` in ``namespace`` (None: every namespace) with these labels (or just
    carrying ``has_label``), or the one named ``name``."""
    prefix, plural = _PATHS[kind]
    scope = f"/namespaces/{namespace}" if namespace else ""
    selector = ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or has_label
    return Source(
        path=f"{prefix}{scope}/{plural}",
        label_selector=selector or None,
        field_selector=f"metadata.name={name}" if name else None,
    )


@dataclass(frozen=True)
class Listed:
    items: list[Obj]


@dataclass(frozen=True)
class Change:
    type: Literal["ADDED", "MODIFIED", "DELETED"]
    object: Obj


@dataclass(frozen=True)
class Changes:
    changes: list[Change]


@dataclass(frozen=True)
class Idle:
    pass


Event = Listed | Changes | Idle


class _Expired(Exception):
    """410 Gone: the resourceVersion the watch resumes from was compacted away."""


class _Ended:
    """The watch request ended (its timeoutSeconds): resume from the last resourceVersion."""


_Item = Obj | _Ended | BaseException


@dataclass
class ListWatch:
    """One collection, listed then watched. ``rv``: where the next watch resumes (None: list
    first); set it to resume an earlier watch. ``relist_every``: a full list this often
    whatever the watch says (None: only after 410), a safety net against a lost event."""

    kube: Kube
    src: Source
    watch_seconds: int = WATCH_SECONDS
    relist_every: float | None = None
    reconnect_pause: float = RECONNECT_PAUSE_SECONDS
    rv: str | None = None
    lists: int = field(default=0, init=False)

    async def events(self, idle: float | None = None) -> AsyncGenerator[Event, None]:
        async with _http(self.kube) as http:
            relist_at = math.inf
            while True:
                if self.rv is None:
                    items, self.rv = await self._list(http)
                    if self.relist_every is not None:
                        relist_at = time.monotonic() + self.relist_every
                    yield Listed(items)
                    continue
                async with aclosing(self._watch(http, idle, relist_at)) as watch:
                    async for event in watch:
                        yield event

    async def _watch(
        self, http: httpx.AsyncClient, idle: float | None, relist_at: float
    ) -> AsyncGenerator[Event, None]:
        """One watch request, from ``rv``; ends with ``rv`` None when a list is due."""
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        assert self.rv is not None
        reader = asyncio.create_task(self._stream(http, self.rv, queue))
        try:
            while True:
                remaining = relist_at - time.monotonic()
                if remaining <= 0:
                    self.rv = None
                    return
                try:
                    # Not asyncio.wait_for: on 3.11 it drops a cancel that lands with an event
                    # (bpo-42130), and a cancelled caller would go on waiting.
                    bound = min(idle if idle is not None else math.inf, remaining)
                    async with asyncio.timeout(None if math.isinf(bound) else bound):
                        item = await queue.get()
                except TimeoutError:
                    if idle is not None and time.monotonic() < relist_at:
                        yield Idle()
                    continue
                batch = [item]
                while not queue.empty():  # a burst of events is one Changes
                    batch.append(queue.get_nowait())
                changes, done = await self._fold(batch)
                if changes:
                    yield Changes(changes)
                if done:
                    return
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def _fold(self, batch: list[_Item]) -> tuple[list[Change], bool]:
        """The batch's changes, moving ``rv`` along; True when this watch request is over."""
        changes: list[Change] = []
        for one in batch:
            if isinstance(one, _Expired):
                self.rv = None
                return changes, True
            if isinstance(one, Unavailable):
                await asyncio.sleep(self.reconnect_pause)
                return changes, True
            if isinstance(one, BaseException):
                raise one
            if isinstance(one, _Ended):
                return changes, True
            kind, obj = one.get("type"), one.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    self.rv = None
                    return changes, True
                raise from_status(int(obj.get("code") or 500), str(obj.get("reason") or ""))
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.rv = str(rv)
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                changes.append(Change(kind, obj))
        return changes, False

    async def _list(self, http: httpx.AsyncClient) -> tuple[list[Obj], str | None]:
        bounds = self.kube.timeouts
        timeout = httpx.Timeout(bounds.read, connect=bounds.connect)
        try:
            response = await http.get(
                self.src.path, params=self.src.selectors(), headers=_auth(self.kube),
                timeout=timeout, extensions=_sni(self.kube),
            )  # fmt: skip
        except httpx.TransportError as e:
            raise _unavailable(f"the list of {self.src.path}", e) from e
        if response.status_code >= 400:
            raise from_status(response.status_code, status_reason(response.content), self.src.path)
        self.lists += 1
        body = await asyncio.to_thread(json.loads, response.content)  # large lists: off the loop
        rv = (body.get("metadata") or {}).get("resourceVersion")
        return list(body.get("items") or []), str(rv) if rv else None

    async def _stream(self, http: httpx.AsyncClient, rv: str, queue: asyncio.Queue[_Item]) -> None:
        """One watch request; every event, then _Ended, or the failure, goes onto ``queue``."""
        params = {
            **self.src.selectors(),
            "watch": "true",
            "resourceVersion": rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_seconds),
        }
        bounds = self.kube.timeouts
        timeout = httpx.Timeout(
            connect=bounds.connect,
            read=self.watch_seconds + bounds.watch_margin,
            write=bounds.read,
            pool=bounds.read,
        )
        try:
            request = http.stream(
                "GET", self.src.path, params=params, headers=_auth(self.kube), timeout=timeout,
                extensions=_sni(self.kube),
            )  # fmt: skip
            async with request as response:
                if response.status_code == 410:
                    raise _Expired()
                if response.status_code >= 400:
                    body = await response.aread()
                    raise from_status(response.status_code, status_reason(body), self.src.path)
                async for line in response.aiter_lines():
                    if line.strip():
                        queue.put_nowait(json.loads(line))
            queue.put_nowait(_Ended())
        except httpx.TransportError as e:
            queue.put_nowait(_unavailable(f"the watch of {self.src.path}", e))
        except Exception as e:  # handed to the waiting side, which raises it
            queue.put_nowait(e)


def _unavailable(what: str, error: httpx.TransportError) -> Unavailable:
    how = "timed out" if isinstance(error, httpx.TimeoutException) else "failed"
    return Unavailable(
        f"the Kubernetes API server did not answer: {what} {how} ({type(error).__name__}); "
        "retrying. Check that the API server is up and reachable from dmrollout"
    )


def _sni(kube: Kube) -> dict[str, Any] | None:
    sni = kube.api_client.configuration.tls_server_name
    return {"sni_hostname": sni} if sni else None


def _auth(kube: Kube) -> dict[str, str]:
    """The headers the kubernetes client would send (a bearer token is refreshed by the
    Configuration's hook, as an in-cluster ServiceAccount token rotates)."""
    headers: dict[str, str] = {}
    for setting in kube.api_client.configuration.auth_settings().values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[str(setting["key"])] = str(setting["value"])
    return headers


@asynccontextmanager
async def _http(kube: Kube) -> AsyncIterator[httpx.AsyncClient]:
    cfg = kube.api_client.configuration
    async with httpx.AsyncClient(
        base_url=cfg.host, verify=_tls(cfg), proxy=cfg.proxy or None, trust_env=False
    ) as http:
        yield http


def _tls(cfg: Any) -> ssl.SSLContext:
    """The client's TLS settings (kubernetes.client.rest builds the same for urllib3)."""
    return _tls_context(
        cfg.ssl_ca_cert or None,
        bool(cfg.verify_ssl),
        cfg.assert_hostname is False,
        cfg.cert_file or None,
        cfg.key_file or None,
    )


@functools.lru_cache(maxsize=8)
def _tls_context(
    cafile: str | None, verify: bool, no_hostname: bool, cert: str | None, key: str | None
) -> ssl.SSLContext:
    """One context per TLS setting, shared by every list and watch: building one loads the CA
    file (~50 ms and ~0.8 MiB each; three waits per rollout, fifty rollouts at once in a
    fleet), and a context is safe to share between connections. Like the kubernetes client's
    own urllib3 pool, it is kept for the life of the process."""
    ctx = ssl.create_default_context(cafile=cafile)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif no_hostname:
        ctx.check_hostname = False
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx

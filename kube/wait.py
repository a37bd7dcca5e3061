"""Waits that wake on watch events: list, then watch from the list's resourceVersion.

Waiting activities (the prefetch Job, the candidate's Pods, their readiness gates) used to
re-read the API every poll interval: a second of latency per step and a request per second per
wait. :func:`wait_until` lists the objects once, then watches them and calls the caller's
``check`` on the objects it holds as soon as a change arrives (a burst of events is one call),
and again after ``idle`` seconds without one (where the caller heartbeats or probes again):

- each watch request is bounded twice: server side by ``timeoutSeconds`` (the watch then
  resumes from the last resourceVersion seen, bookmarks included) and client side by a read
  timeout of that plus ``KubeTimeouts.watch_margin``, so a silent API server ends the request;
- 410 Gone (the resourceVersion was compacted away), as a status or as an ERROR event,
  re-lists; so does a dropped or timed-out watch connection (after a short pause), and a
  list whose transport fails raises APIServerUnavailable as every other call does;
- a safety net: the objects are re-listed every ``relist_every`` seconds (slow) whatever the
  watch says, so a lost event costs at most that long;
- cancellation-safe: the watch is an async HTTP stream (httpx) on the event loop, not a
  blocking call in a thread, so a cancelled activity stops waiting at once and its
  connection is closed; no thread of the bounded pool is held while waiting.

The watch speaks to the same API server with the same credentials as the kubernetes client
(its Configuration: host, CA, client certificate, bearer token with its refresh hook, proxy).
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import httpx
from kubernetes.client.rest import ApiException

from kube.client import APIServerUnavailable, Kube

T = TypeVar("T")
Obj = dict[str, Any]

# The safety net: a full re-list this often, whatever the watch says.
RELIST_SECONDS: Final = 30.0
# The server-side lifetime of one watch request; it then resumes from where it was.
WATCH_SECONDS: Final = 60
# After a watch connection failed (reset, timed out), before the re-list that follows.
RECONNECT_PAUSE_SECONDS: Final = 1.0

# kind → (URL prefix of its API group version, plural)
_PATHS: Final = {
    "Pod": ("/api/v1", "pods"),
    "Job": ("/apis/batch/v1", "jobs"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims"),
    "Service": ("/api/v1", "services"),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets"),
}


@dataclass(frozen=True)
class Source:
    """What to list and watch: one kind in one namespace, narrowed by selectors."""

    path: str
    lister: Callable[..., Any]
    namespace: str
    label_selector: str | None = None
    field_selector: str | None = None

    def selectors(self) -> dict[str, str]:
        found = {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}
        return {k: v for k, v in found.items() if v}


def source(
    kube: Kube,
    kind: str,
    namespace: str,
    labels: dict[str, str] | None = None,
    name: str | None = None,
) -> Source:
    """Objects of ``kind`` in ``namespace`` with these labels, or the one named ``name``."""
    prefix, plural = _PATHS[kind]
    lister = kube.core.list_namespaced_pod if kind == "Pod" else kube.kinds[kind].lister
    return Source(
        path=f"{prefix}/namespaces/{namespace}/{plural}",
        lister=lister,
        namespace=namespace,
        label_selector=",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or None,
        field_selector=f"metadata.name={name}" if name else None,
    )


class _Expired(Exception):
    """410 Gone: the resourceVersion the watch resumes from was compacted away."""


class _Ended:
    """The watch request ended (its timeoutSeconds): resume from the last resourceVersion."""


Item = Obj | _Ended | BaseException


async def wait_until(
    kube: Kube,
    src: Source,
    check: Callable[[list[Obj]], Awaitable[T | None]],
    *,
    idle: float,
    relist_every: float = RELIST_SECONDS,
    watch_seconds: int = WATCH_SECONDS,
) -> T:
    """Call ``check`` with the current objects after the first list, after every change, and
    after ``idle`` seconds without one; return its first answer that is not None. What
    ``check`` raises ends the wait (the guards and typed errors of the caller)."""
    async with _http(kube) as http:
        while True:
            objects, rv = await _list(src)
            relist_at = time.monotonic() + relist_every
            found = await check(list(objects.values()))
            if found is not None:
                return found
            while time.monotonic() < relist_at and rv is not None:
                queue: asyncio.Queue[Item] = asyncio.Queue()
                reader = asyncio.create_task(_stream(kube, http, src, rv, watch_seconds, queue))
                try:
                    rv, found = await _follow(queue, objects, rv, check, idle, relist_at)
                finally:
                    reader.cancel()
                    await asyncio.gather(reader, return_exceptions=True)
                if found is not None:
                    return found


async def _follow(
    queue: asyncio.Queue[Item],
    objects: dict[str, Obj],
    rv: str,
    check: Callable[[list[Obj]], Awaitable[T | None]],
    idle: float,
    relist_at: float,
) -> tuple[str | None, T | None]:
    """Apply one watch request's events to ``objects`` and check them; returns the
    resourceVersion to resume from (None: re-list) and ``check``'s answer when it had one."""
    while True:
        remaining = relist_at - time.monotonic()
        if remaining <= 0:
            return None, None
        try:
            # Not asyncio.wait_for: on 3.11 it drops a cancel that lands with an event
            # (bpo-42130), and the cancelled activity would go on waiting.
            async with asyncio.timeout(min(idle, remaining)):
                item = await queue.get()
        except TimeoutError:
            found = await check(list(objects.values()))  # idle: heartbeat, probe again
            if found is not None:
                return rv, found
            continue
        batch = [item]
        while not queue.empty():  # a burst of events is one check
            batch.append(queue.get_nowait())
        changed, ended = False, False
        for one in batch:
            if isinstance(one, _Expired):
                return None, None
            if isinstance(one, APIServerUnavailable):
                await asyncio.sleep(RECONNECT_PAUSE_SECONDS)
                return None, None
            if isinstance(one, BaseException):
                raise one
            if isinstance(one, _Ended):
                ended = True
                continue
            try:
                rv = _apply(objects, one) or rv
            except _Expired:
                return None, None
            changed = changed or one.get("type") != "BOOKMARK"
        if changed:
            found = await check(list(objects.values()))
            if found is not None:
                return rv, found
        if ended:
            return rv, None


def _apply(objects: dict[str, Obj], event: Obj) -> str | None:
    """Fold one watch event into ``objects``; its resourceVersion. An ERROR event raises."""
    kind, obj = event.get("type"), event.get("object") or {}
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise _Expired()
        raise ApiException(status=obj.get("code") or 500, reason=str(obj.get("message") or ""))
    meta = obj.get("metadata") or {}
    if kind in ("ADDED", "MODIFIED"):
        objects[meta["name"]] = obj
    elif kind == "DELETED":
        objects.pop(meta.get("name", ""), None)
    rv = meta.get("resourceVersion")
    return str(rv) if rv else None


async def _list(src: Source) -> tuple[dict[str, Obj], str | None]:
    body = await Kube.run(
        _raw_list, src.lister, src.namespace, src.label_selector, src.field_selector
    )
    items: list[Obj] = body.get("items") or []
    rv = (body.get("metadata") or {}).get("resourceVersion")
    return {i["metadata"]["name"]: i for i in items}, str(rv) if rv else None


def _raw_list(
    lister: Callable[..., Any], namespace: str, labels: str | None, fields: str | None
) -> Any:
    selectors = {"label_selector": labels, "field_selector": fields}
    response = lister(
        namespace, _preload_content=False, **{k: v for k, v in selectors.items() if v}
    )
    return json.loads(response.data)


async def _stream(
    kube: Kube,
    http: httpx.AsyncClient,
    src: Source,
    rv: str,
    watch_seconds: int,
    queue: asyncio.Queue[Item],
) -> None:
    """One watch request; every event, then _Ended, or the failure, goes onto ``queue``."""
    params = {
        **src.selectors(),
        "watch": "true",
        "resourceVersion": rv,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(watch_seconds),
    }
    bounds = kube.timeouts
    timeout = httpx.Timeout(
        connect=bounds.connect,
        read=watch_seconds + bounds.watch_margin,
        write=bounds.read,
        pool=bounds.read,
    )
    sni = kube.api_client.configuration.tls_server_name
    try:
        request = http.stream(
            "GET",
            src.path,
            params=params,
            headers=_auth(kube),
            timeout=timeout,
            extensions={"sni_hostname": sni} if sni else None,
        )
        async with request as response:
            if response.status_code == 410:
                raise _Expired()
            if response.status_code >= 400:
                text = (await response.aread()).decode(errors="replace")[:300]
                raise ApiException(status=response.status_code, reason=text)
            async for line in response.aiter_lines():
                if line.strip():
                    queue.put_nowait(json.loads(line))
        queue.put_nowait(_Ended())
    except httpx.TransportError as e:
        what = "timed out" if isinstance(e, httpx.TimeoutException) else "failed"
        queue.put_nowait(APIServerUnavailable(f"watch of {src.path} {what}: {type(e).__name__}"))
    except Exception as e:  # handed to the waiting side, which raises it
        queue.put_nowait(e)


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
    """One context per TLS setting, shared by every wait: building one loads the CA file
    (~50 ms and ~0.8 MiB each; three waits per rollout, fifty rollouts at once in a fleet),
    and a context is safe to share between connections. Like the kubernetes client's own
    urllib3 pool, it is kept for the life of the process."""
    ctx = ssl.create_default_context(cafile=cafile)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif no_hostname:
        ctx.check_hostname = False
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx

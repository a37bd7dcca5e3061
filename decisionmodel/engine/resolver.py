"""Tag → digest: the registry resolver.

The model digest is the sha256 of the exact bytes of
``GET <scheme>://<host>/v2/<ns>/<model>/manifests/<tag>`` (RUNTIME_API.md "Registry"; seed 000,
spike 001: it equals the ``/api/ps`` digest), so resolving needs no daemon, only plain HTTP.

Behaviour, each point because of a failure seen or a guard the reference has:

- the allowed-registries guard runs before any request (SSRF guard, RegistryNotAllowed);
- 404 → ModelNotFound (permanent); other non-2xx, non-JSON or ``schemaVersion != 2`` →
  RegistryError (transient at the activity level);
- transport errors, 429 and 5xx are retried with exponential backoff and jitter, honouring
  ``Retry-After`` (seconds or HTTP-date), within a bounded number of attempts and total time;
  past that budget they are RegistryUnavailable (a RegistryError), whose message names the
  registry and what to check: reachability, and the scheme (a host without one is https);
- the body is streamed and capped, so a hostile registry cannot exhaust memory;
- redirects are followed by hand and refused when they change scheme, host or port, so a
  registry cannot bounce the resolver to a host the allow-list never approved;
- this client honours ``HTTP(S)_PROXY``/``NO_PROXY`` (seed 000: "only the registry client honours
  HTTP(S)_PROXY"); the runtime client does not.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import TracebackType

import httpx
from pydantic import BaseModel, ConfigDict

from decisionmodel.engine.http_tls import shared_tls_context
from decisionmodel.engine.names import ModelRef, check_registry_allowed
from decisionmodel.errors import ModelNotFound, RegistryError, RegistryUnavailable

MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
# A schema-2 manifest of an Ollaya model is a few KiB (config + a handful of layers); 4 MiB
# leaves three orders of magnitude of room while bounding what a hostile registry can make us hold.
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}

Sleep = Callable[[float], Awaitable[None]]


class ResolvedModel(BaseModel):
    """A resolved tag. ``digest`` is bare hex (no ``sha256:``), like ``/api/ps`` reports it."""

    model_config = ConfigDict(frozen=True)

    digest: str
    manifest_bytes_len: int
    canonical: str
    url: str


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long the resolver retries a transient failure.

    Attempt ``n`` (1-based) failing waits ``min(max_backoff, initial_backoff · multiplier^(n-1))``
    scaled by a jitter factor in [0.5, 1) (half fixed, half random, so retries of many
    DecisionModels do not line up), or the server's ``Retry-After`` capped at
    ``max_retry_after``. The resolve gives up when ``max_attempts`` requests failed or when the
    next wait would end past ``total_timeout`` seconds after the start.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.5
    multiplier: float = 2.0
    max_backoff: float = 8.0
    max_retry_after: float = 30.0
    total_timeout: float = 60.0

    def backoff(self, failed_attempts: int, jitter: float) -> float:
        """Wait after ``failed_attempts`` failures; ``jitter`` is a uniform draw in [0, 1)."""
        base = min(
            self.max_backoff, self.initial_backoff * self.multiplier ** (failed_attempts - 1)
        )
        return base * (0.5 + jitter / 2)


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Parse ``Retry-After``: delta-seconds or an HTTP-date (RFC 9110 §10.2.3). A date in the
    past means 0; an unparsable value means None (fall back to the backoff)."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    port = url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme)
    return url.scheme, url.host, port


def unavailable_fix(ref: ModelRef, allow_insecure: bool) -> str:
    """What to check when ``ref``'s registry cannot be reached. An https registry may really be
    a plain-http one named without a scheme (RUNTIME_API.md: a host without a scheme is https),
    which fails as a TLS error that reads like an outage; say how to name it instead."""
    check = (
        f"check that {ref.registry_base} is up and reachable from the worker (proxy, NO_PROXY, "
        "egress policy)"
    )
    if ref.scheme == "http":
        return check
    insecure = "" if allow_insecure else ", which needs --allow-insecure-registries (dev only)"
    return (
        f"{check}; a registry host without a scheme means https: if {ref.host} serves plain "
        f"http, name it http://{ref.host}/{ref.namespace}/{ref.model}:{ref.tag} in spec.model "
        f"(or http://{ref.host} in --ollaya-registry for names without a host){insecure}"
    )


class _Retryable(Exception):
    """One attempt failed in a way worth another attempt."""

    def __init__(self, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class RegistryResolver:
    """Resolves ``ModelRef`` tags to digests. One instance per process; close with ``aclose()``
    (or use ``async with``). Clock, sleep, jitter and transport are injectable for tests."""

    def __init__(
        self,
        *,
        allowed_registries: Sequence[str] = ("ollaya.dev",),
        allow_insecure: bool = False,
        retry: RetryPolicy | None = None,
        timeout: httpx.Timeout | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_redirects: int = 5,
        on_duration: Callable[[float], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._allowed = tuple(allowed_registries)
        self._allow_insecure = allow_insecure
        self._retry = retry or RetryPolicy()
        self._max_body_bytes = max_body_bytes
        self._max_redirects = max_redirects
        self._on_duration = on_duration
        self._sleep = sleep
        self._rng = rng
        self._clock = clock
        self._now = now
        # Redirects are followed by hand (origin check); trust_env so HTTP(S)_PROXY/NO_PROXY
        # apply to registry traffic. An injected transport bypasses env proxies (httpx rule).
        self._client = httpx.AsyncClient(
            transport=transport,
            trust_env=True,
            follow_redirects=False,
            timeout=timeout or httpx.Timeout(10.0, connect=5.0),
            headers={"Accept": MANIFEST_MEDIA_TYPE, "User-Agent": "dmrollout-resolver"},
            verify=shared_tls_context(),
        )

    async def __aenter__(self) -> RegistryResolver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def resolve(self, ref: ModelRef) -> ResolvedModel:
        """Resolve ``ref``'s tag. Raises RegistryNotAllowed (before any request), ModelNotFound,
        RegistryError."""
        check_registry_allowed(ref, self._allowed, self._allow_insecure)
        started = self._clock()
        try:
            return await self._resolve_with_retries(ref, started)
        finally:
            if self._on_duration is not None:
                self._on_duration(self._clock() - started)

    async def _resolve_with_retries(self, ref: ModelRef, started: float) -> ResolvedModel:
        policy = self._retry
        deadline = started + policy.total_timeout
        failures = 0
        while True:
            remaining = deadline - self._clock()
            try:
                # The per-attempt bound makes total_timeout hold even while a request hangs.
                async with asyncio.timeout(max(remaining, 0.0)):
                    body = await self._fetch(ref)
            except _Retryable as err:
                failures += 1
                problem = err.message
                retry_after = retry_after_seconds(err.retry_after, self._now())
            except TimeoutError:
                raise self._unavailable(
                    ref,
                    f"no answer from {ref.registry_base} within the "
                    f"{policy.total_timeout:g} s resolve budget",
                ) from None
            else:
                return self._accept(ref, body)

            if failures >= policy.max_attempts:
                raise self._unavailable(ref, f"gave up after {failures} attempts, last: {problem}")
            if retry_after is not None:
                wait = min(retry_after, policy.max_retry_after)
            else:
                wait = policy.backoff(failures, self._rng())
            if self._clock() + wait > deadline:
                raise self._unavailable(
                    ref,
                    f"gave up after {failures} attempts within the {policy.total_timeout:g} s "
                    f"resolve budget, last: {problem}",
                )
            await self._sleep(wait)

    def _unavailable(self, ref: ModelRef, what: str) -> RegistryUnavailable:
        return RegistryUnavailable(
            f"resolving {ref.canonical}: registry {ref.registry_base} unavailable: {what}; "
            f"{unavailable_fix(ref, self._allow_insecure)}"
        )

    async def _fetch(self, ref: ModelRef) -> bytes:
        """One attempt: GET the manifest, following same-origin redirects. Returns the body of
        a 2xx; raises _Retryable for transient failures and the typed error for the others."""
        url = httpx.URL(ref.manifest_url)
        origin = _origin(url)
        for _ in range(self._max_redirects + 1):
            try:
                async with self._client.stream("GET", url) as response:
                    status = response.status_code
                    if status in REDIRECT_STATUSES:
                        url = self._redirect_target(ref, url, origin, response)
                        continue
                    if status == 404:
                        raise ModelNotFound(
                            f"spec.model {ref.canonical!r}: the registry has no such tag "
                            f"(GET {ref.manifest_url} → 404); fix the tag (a bare name means "
                            ":latest) or push the model"
                        )
                    if status == 429 or status >= 500:
                        raise _Retryable(
                            f"GET {url} → {status}", response.headers.get("Retry-After")
                        )
                    if not 200 <= status < 300:
                        raise RegistryError(
                            f"resolving {ref.canonical}: GET {url} → unexpected status {status}; "
                            "check the registry (auth, mirror configuration)",
                            status=status,
                        )
                    return await self._read_capped(ref, response)
            except httpx.TransportError as err:
                raise _Retryable(f"GET {url}: {type(err).__name__}: {err}") from err
            except httpx.HTTPError as err:
                raise RegistryError(
                    f"resolving {ref.canonical}: GET {url}: {type(err).__name__}: {err}; "
                    "check the registry"
                ) from err
        raise RegistryError(
            f"resolving {ref.canonical}: more than {self._max_redirects} redirects from "
            f"{ref.manifest_url}; check the registry"
        )

    def _redirect_target(
        self,
        ref: ModelRef,
        url: httpx.URL,
        origin: tuple[str, str, int | None],
        response: httpx.Response,
    ) -> httpx.URL:
        location = response.headers.get("Location")
        if not location:
            raise RegistryError(
                f"resolving {ref.canonical}: GET {url} → {response.status_code} without a "
                "Location header; check the registry"
            )
        target = url.join(location)
        if _origin(target) != origin:
            raise RegistryError(
                f"resolving {ref.canonical}: refused a redirect from {ref.registry_base} to "
                f"{target.scheme}://{target.netloc.decode('ascii')} (redirects may not change "
                "scheme, host or port); point spec.model or --ollaya-registry at the final host "
                "and allow it in --allowed-registries"
            )
        return target

    async def _read_capped(self, ref: ModelRef, response: httpx.Response) -> bytes:
        too_big = RegistryError(
            f"resolving {ref.canonical}: the manifest at {ref.manifest_url} is larger than "
            f"{self._max_body_bytes} bytes; a schema-2 manifest is a few KiB, check the registry"
        )
        declared = response.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_body_bytes:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        # Decoded bytes: the digest is over the manifest, not over a gzip transfer encoding
        # of it (Go's client, which the reference and the runtime use, decodes transparently).
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self._max_body_bytes:
                raise too_big
            chunks.append(chunk)
        return b"".join(chunks)

    def _accept(self, ref: ModelRef, body: bytes) -> ResolvedModel:
        try:
            manifest = json.loads(body)
        except (ValueError, RecursionError):  # not UTF-8/JSON, a huge integer, deep nesting
            raise RegistryError(
                f"resolving {ref.canonical}: {ref.manifest_url} did not return valid JSON; "
                "check the registry speaks the Ollaya registry API"
            ) from None
        version = manifest.get("schemaVersion") if isinstance(manifest, dict) else None
        # `type(...) is int` because JSON `true` would otherwise pass as an int.
        if type(version) is not int or version != 2:
            raise RegistryError(
                f"resolving {ref.canonical}: {ref.manifest_url} is not a schema-2 manifest "
                f"(schemaVersion {version!r}); check the registry speaks the Ollaya registry API"
            )
        return ResolvedModel(
            digest=hashlib.sha256(body).hexdigest(),
            manifest_bytes_len=len(body),
            canonical=ref.canonical,
            url=ref.manifest_url,
        )


def resolve_sync(
    ref: ModelRef,
    *,
    allowed_registries: Sequence[str] = ("ollaya.dev",),
    allow_insecure: bool = False,
) -> ResolvedModel:
    """One-shot blocking resolve for the CLI; not for use inside a running event loop."""

    async def once() -> ResolvedModel:
        async with RegistryResolver(
            allowed_registries=allowed_registries, allow_insecure=allow_insecure
        ) as resolver:
            return await resolver.resolve(ref)

    return asyncio.run(once())

"""Every Kubernetes call is bounded: connect and read timeouts, watches included.

The kubernetes client sends a request without any timeout unless the caller passes
``_request_timeout`` (urllib3 then waits for ever: a peer that accepts and never answers, or a
connection left half-open by an API server restart or a load-balancer failover, blocked a call
until TCP gave up, about 15 minutes). Here every request without its own timeout gets one:

- a plain call: ``(connect, read)``;
- a watch: the read timeout is the watch's server-side ``timeoutSeconds`` plus a margin, so a
  healthy server always ends the watch first, and a silent one is noticed soon after.

A timeout raises urllib3's ``TimeoutError`` family (not ``ApiException``): activities let it
through as a retryable failure, the controller's reconcile retries with backoff, the watch
loop re-lists. TCP keepalive is on, so a half-open connection idle in the pool is found out too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import urllib3
from kubernetes import client

# An API server's default watch lifetime is random, 1 to 2 times minRequestTimeout (30 to 60
# minutes):
# the read bound for a watch that does not say its own.
DEFAULT_WATCH_SECONDS = 3600.0


@dataclass(frozen=True)
class KubeTimeouts:
    """Client-side bounds of one Kubernetes request, in seconds."""

    connect: float = 5.0
    read: float = 30.0
    # Past the server-side end of a watch, how long to wait for it before calling it silent.
    watch_margin: float = 30.0
    # urllib3 retries of a refused or reset connection; a read that timed out is not retried
    # here (the caller's retry, with its backoff and heartbeat, takes over).
    connect_retries: int = 2
    # Retries of a 429 (the API server's fairness asking to slow down, e.g. for a few seconds
    # after a CRD was established), after its Retry-After, as kubectl does. 0 for the
    # controller and the worker, whose reconcile and activity retries back off on their own;
    # the CLI, which has no such loop, said "cannot reach the API server" at the first one.
    throttled_retries: int = 0

    def for_url(self, url: str) -> tuple[float, float]:
        query = parse_qs(urlsplit(url).query)
        if query.get("watch", [""])[0].lower() not in ("true", "1"):
            return self.connect, self.read
        try:
            server = float(query.get("timeoutSeconds", ["0"])[0])
        except ValueError:
            server = 0.0
        return self.connect, (server if server > 0 else DEFAULT_WATCH_SECONDS) + self.watch_margin

    def retries(self) -> urllib3.Retry:
        if not self.throttled_retries:
            return urllib3.Retry(
                total=self.connect_retries,
                connect=self.connect_retries,
                read=0,
                redirect=0,
                status=0,
            )
        return urllib3.Retry(
            total=self.connect_retries + self.throttled_retries,
            connect=self.connect_retries,
            read=0,
            redirect=0,
            status=self.throttled_retries,
            status_forcelist=(429,),
            # A 429 was refused before it was processed: any method may be sent again.
            allowed_methods=None,
            respect_retry_after_header=True,
            backoff_factor=0.5,
            backoff_max=10,
        )


def bound_requests(api_client: client.ApiClient, timeouts: KubeTimeouts) -> None:
    """Give every request of ``api_client`` that has no ``_request_timeout`` the bounds."""
    rest = api_client.rest_client
    unbounded: Callable[..., Any] = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None and len(args) < 4:
            kwargs["_request_timeout"] = timeouts.for_url(url)
        return unbounded(method, url, *args, **kwargs)

    rest.request = request


def configure(configuration: client.Configuration, timeouts: KubeTimeouts) -> None:
    """Settings that must be in place before the ApiClient builds its connection pool."""
    configuration.retries = timeouts.retries()
    configuration.keep_alive = True

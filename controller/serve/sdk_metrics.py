"""The Temporal SDK's own ``temporal_*`` series served with dmrollout's, by worker and controller.

With metrics over HTTPS (the default) the chart binds the SDK's plain Prometheus exporter to
loopback only (its unauthenticated port is never reachable from outside the Pod) and the
process serves its series through the authenticated ``/metrics``, after its own. The names do
not overlap, so the two texts concatenate into one valid exposition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import httpx

log = logging.getLogger("dmrollout.metrics")

# The SDK's exporter is on loopback next to this process: a scrape never waits long on it.
SDK_SCRAPE_TIMEOUT_SECONDS: Final = 2.0


def with_sdk_series(own: Callable[[], bytes], sdk_bind_address: str | None) -> Callable[[], bytes]:
    """``own`` followed by the SDK's series read from ``sdk_bind_address`` (when given)."""
    sdk_url = loopback_url(sdk_bind_address) if sdk_bind_address else None

    def render() -> bytes:
        mine = own()
        if sdk_url is None:
            return mine
        try:
            with httpx.Client(trust_env=False, timeout=SDK_SCRAPE_TIMEOUT_SECONDS) as c:
                response = c.get(sdk_url)
                response.raise_for_status()
        except httpx.HTTPError as e:
            log.warning("Temporal SDK metrics not read from %s: %s", sdk_url, type(e).__name__)
            return mine
        return mine + response.content

    return render


def loopback_url(bind_address: str) -> str:
    host, _, port = bind_address.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

"""Authentication and authorization of a metrics scrape, as controller-runtime's
``filters.WithAuthenticationAndAuthorization`` does it: the bearer token goes to a TokenReview,
the user it names to a SubjectAccessReview for the request's verb on its non-resource path.

- no token, or one the API server does not authenticate: 401;
- an authenticated user without ``get`` on ``/metrics``: 403;
- the API server gives no verdict (down, slow, refused the review): 500, never a guess.

Verdicts (200/401/403, never a 500) are cached for a short TTL keyed by a hash of the token, so
a Prometheus scraping every 15-30 s costs the API server at most two reviews per TTL per
token, and the cache never holds a token itself. Bounded in entries, oldest evicted first.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kube.access_review import ReviewedUser, ReviewUnavailable

log = logging.getLogger("dmrollout.metrics.auth")


class Reviews(Protocol):
    def authenticate(self, token: str) -> ReviewedUser | None: ...

    def allowed(self, user: ReviewedUser, verb: str, path: str) -> bool: ...


@dataclass(frozen=True)
class Verdict:
    status: int
    message: str


OK = Verdict(200, "ok")
UNAUTHORIZED = Verdict(401, "Unauthorized")


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


class MetricsAuth:
    def __init__(
        self,
        reviews: Reviews,
        ttl_seconds: float = 10.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reviews = reviews
        self._ttl = ttl_seconds
        self._max = max_entries
        self._clock = clock
        self._cache: OrderedDict[tuple[str, str, str], tuple[float, Verdict]] = OrderedDict()
        # The HTTP server answers scrapes on several threads.
        self._lock = threading.Lock()

    def check(self, authorization: str | None, verb: str, path: str) -> Verdict:
        token = bearer_token(authorization)
        if token is None:
            return UNAUTHORIZED
        key = (hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest(), verb, path)
        cached = self._cached(key)
        if cached is not None:
            return cached
        try:
            verdict = self._review(token, verb, path)
        except ReviewUnavailable as e:
            log.error("metrics scrape not reviewed: %s", e)
            return Verdict(500, "authentication or authorization failed: no verdict")
        self._remember(key, verdict)
        return verdict

    def _review(self, token: str, verb: str, path: str) -> Verdict:
        user = self._reviews.authenticate(token)
        if user is None:
            log.debug("metrics scrape with a token that is not authenticated")
            return UNAUTHORIZED
        if not self._reviews.allowed(user, verb, path):
            log.info("metrics scrape denied: %s may not %s %s", user.username, verb, path)
            return Verdict(403, f"Forbidden: user {user.username!r} may not {verb} {path}")
        return OK

    def _cached(self, key: tuple[str, str, str]) -> Verdict | None:
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._cache[key]
                return None
            return entry[1]

    def _remember(self, key: tuple[str, str, str], verdict: Verdict) -> None:
        if self._ttl <= 0 or self._max <= 0:
            return
        with self._lock:
            self._cache[key] = (self._clock() + self._ttl, verdict)
            self._cache.move_to_end(key)
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)

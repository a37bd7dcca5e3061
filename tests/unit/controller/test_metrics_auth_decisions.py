"""MetricsAuth's verdicts and its cache, with a fake reviewer (no API server, no sockets)."""

from __future__ import annotations

import pytest

from controller.serve.metrics_auth import MetricsAuth, bearer_token
from kube.access_review import ReviewedUser, ReviewUnavailable

READER = ReviewedUser(
    "system:serviceaccount:monitoring:prometheus", "u1", ("system:authenticated",)
)


class FakeReviews:
    def __init__(self) -> None:
        self.users = {"good": READER, "nobody": ReviewedUser("nobody", "u2", ())}
        self.allowed_users = {READER.username}
        self.calls: list[str] = []
        self.down = False

    def authenticate(self, token: str) -> ReviewedUser | None:
        self.calls.append("TokenReview")
        if self.down:
            raise ReviewUnavailable("the API server did not answer (ReadTimeoutError)")
        return self.users.get(token)

    def allowed(self, user: ReviewedUser, verb: str, path: str) -> bool:
        self.calls.append("SubjectAccessReview")
        return user.username in self.allowed_users and (verb, path) == ("get", "/metrics")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("Bearer abc", "abc"),
        ("bearer abc ", "abc"),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_verdicts() -> None:
    reviews = FakeReviews()
    auth = MetricsAuth(reviews, ttl_seconds=0)
    assert auth.check(None, "get", "/metrics").status == 401
    assert reviews.calls == []  # no token, no review
    assert auth.check("Bearer bad", "get", "/metrics").status == 401
    assert auth.check("Bearer nobody", "get", "/metrics").status == 403
    assert auth.check("Bearer good", "get", "/metrics").status == 200
    assert auth.check("Bearer good", "get", "/debug").status == 403


def test_a_verdict_is_reused_within_the_ttl_and_asked_again_after() -> None:
    reviews, clock = FakeReviews(), Clock()
    auth = MetricsAuth(reviews, ttl_seconds=10, clock=clock)
    for _ in range(5):
        assert auth.check("Bearer good", "get", "/metrics").status == 200
    assert reviews.calls == ["TokenReview", "SubjectAccessReview"]
    # A revoked binding takes effect once the verdict expires.
    reviews.allowed_users.clear()
    clock.now += 9.9
    assert auth.check("Bearer good", "get", "/metrics").status == 200
    clock.now += 0.2
    assert auth.check("Bearer good", "get", "/metrics").status == 403
    assert len(reviews.calls) == 4


def test_denials_are_cached_too_but_per_token_and_path() -> None:
    reviews, clock = FakeReviews(), Clock()
    auth = MetricsAuth(reviews, ttl_seconds=10, clock=clock)
    assert auth.check("Bearer bad", "get", "/metrics").status == 401
    assert auth.check("Bearer bad", "get", "/metrics").status == 401
    assert reviews.calls == ["TokenReview"]
    assert auth.check("Bearer good", "get", "/debug").status == 403
    assert auth.check("Bearer good", "get", "/metrics").status == 200


def test_no_verdict_is_500_and_never_cached() -> None:
    reviews, clock = FakeReviews(), Clock()
    auth = MetricsAuth(reviews, ttl_seconds=10, clock=clock)
    reviews.down = True
    verdict = auth.check("Bearer good", "get", "/metrics")
    assert verdict.status == 500
    assert "good" not in verdict.message
    reviews.down = False
    assert auth.check("Bearer good", "get", "/metrics").status == 200


def test_the_cache_is_bounded_oldest_first() -> None:
    reviews, clock = FakeReviews(), Clock()
    reviews.users.update({f"t{i}": READER for i in range(5)})
    auth = MetricsAuth(reviews, ttl_seconds=10, max_entries=3, clock=clock)
    for i in range(5):
        auth.check(f"Bearer t{i}", "get", "/metrics")
    assert len(auth._cache) == 3
    reviews.calls.clear()
    auth.check("Bearer t4", "get", "/metrics")  # still cached
    assert reviews.calls == []
    auth.check("Bearer t0", "get", "/metrics")  # evicted: reviewed again
    assert reviews.calls == ["TokenReview", "SubjectAccessReview"]


def test_the_cache_never_holds_a_token() -> None:
    auth = MetricsAuth(FakeReviews(), ttl_seconds=10)
    auth.check("Bearer good", "get", "/metrics")
    assert all("good" not in key for key in (k[0] for k in auth._cache))

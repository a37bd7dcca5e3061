"""Who presents a bearer token, and may they read a non-resource URL: TokenReview
(authentication.k8s.io/v1) and SubjectAccessReview (authorization.k8s.io/v1), the two calls
controller-runtime's ``filters.WithAuthenticationAndAuthorization`` (and kube-rbac-proxy) make
for every scrape of a secured metrics endpoint.

Both are ``create`` calls that store nothing; the reviewing identity needs ``create`` on
``tokenreviews`` and ``subjectaccessreviews`` (the metrics-auth rules of the chart and manifests).
Each call is bounded by its own timeout: a scrape must never wait longer than Prometheus does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kube.client import Kube
from kube.errors import KubeError, Unavailable


class ReviewUnavailable(Exception):
    """The API server did not give a verdict (transport failure, timeout, or an error status):
    neither an authentication nor an authorization answer. The caller answers 500."""


@dataclass(frozen=True)
class ReviewedUser:
    """The identity a TokenReview vouched for (what a SubjectAccessReview is asked about)."""

    username: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class AccessReviews:
    def __init__(self, kube: Kube, timeout_seconds: float) -> None:
        self._authn = kube.authentication
        self._authz = kube.authorization
        self._timeout = timeout_seconds

    def authenticate(self, token: str) -> ReviewedUser | None:
        """The token's user, or None when the API server says it is not authenticated."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        status = self._create(self._authn.create_token_review, body)
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        return ReviewedUser(
            username=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(user.get("groups") or ()),
            extra=tuple(sorted((k, tuple(v)) for k, v in (user.get("extra") or {}).items())),
        )

    def allowed(self, user: ReviewedUser, verb: str, path: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``."""
        spec: dict[str, Any] = {
            "user": user.username,
            "uid": user.uid,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        status = self._create(self._authz.create_subject_access_review, body)
        return bool(status.get("allowed")) and not status.get("denied")

    def _create(self, create: Any, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = create(
                body, _preload_content=False, _request_timeout=(self._timeout, self._timeout)
            )
        except Unavailable as e:
            cause = type(e.__cause__ or e).__name__
            raise ReviewUnavailable(f"the API server did not answer ({cause})") from e
        except KubeError as e:
            raise ReviewUnavailable(f"the review was refused: HTTP {e.status}") from e
        status: dict[str, Any] = json.loads(response.data).get("status") or {}
        return status


def who_am_i(kube: Kube) -> str | None:
    """The caller's user name as the API server authenticated it (SelfSubjectReview,
    authentication.k8s.io/v1, which every authenticated user may create), or None when the
    server does not say: what an approval from the CLI names as its approver."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = kube.raw(kube.authentication.create_self_subject_review, body)
    except (KubeError, AttributeError):
        return None
    user = ((answer.get("status") or {}).get("userInfo") or {}).get("username")
    return str(user) if user else None

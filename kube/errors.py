"""The Kubernetes API's failures as types, so that no caller reads an HTTP status code.

As kopf's ``_cogs/clients/errors.py`` does: every call through ``kube.client.Kube`` (its typed
APIs are wrapped by :func:`translated`) raises one of these instead of the client's
``ApiException`` or urllib3's transport errors, and callers say what they mean
(``except NotFound``) instead of ``e.status == 404``. Each keeps the HTTP status and the API's
own Status ``reason`` for logs and messages, never the response body (a body can quote what was
sent).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

import urllib3
from kubernetes.client.rest import ApiException

F = TypeVar("F", bound=Callable[..., Any])


class KubeError(Exception):
    """A Kubernetes API call failed. ``status``: the HTTP status (0: no answer); ``reason``:
    the API's Status reason (``AlreadyExists``, ``Conflict``, ``Expired``, …) or the HTTP
    reason phrase."""

    def __init__(self, message: str, *, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(KubeError):
    """404: the object (or its namespace) does not exist."""


class Conflict(KubeError):
    """409: the object exists already (a create), or changed since it was read (a conditional
    write, ``reason`` ``Conflict``)."""

    @property
    def already_exists(self) -> bool:
        return self.reason == "AlreadyExists"


class Gone(KubeError):
    """410: the resourceVersion a list or watch resumes from was compacted away: list again."""


class Forbidden(KubeError):
    """401 or 403: the credentials were refused, or RBAC or an admission policy denied it."""


class Invalid(KubeError):
    """400 or 422: the API server refused the object or the request as malformed."""


class Unavailable(KubeError):
    """The API server did not answer: the connection was refused, reset or timed out (a silent
    or half-open server), or it answered 429 or 5xx. Transient: the caller retries."""


class KubeconfigInvalid(Exception):
    """No usable Kubernetes configuration: the kubeconfig (or the in-cluster environment) is
    missing, unreadable, or names no such context."""


_BY_STATUS: dict[int, type[KubeError]] = {
    400: Invalid,
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: Unavailable,
}


def status_reason(body: str | bytes | None) -> str:
    """The ``reason`` of a ``metav1.Status`` body ('' when the body is not one)."""
    if not body:
        return ""
    try:
        doc = json.loads(body)
    except ValueError:
        return ""
    return str(doc.get("reason") or "") if isinstance(doc, dict) else ""


def from_status(status: int, reason: str, what: str = "the request") -> KubeError:
    """The typed error of an answer with HTTP ``status``."""
    cls = _BY_STATUS.get(status) or (Unavailable if status >= 500 else KubeError)
    message = f"the API server refused {what}: {status} {reason}".rstrip()
    return cls(message, status=status, reason=reason)


def from_api_exception(error: ApiException) -> KubeError:
    status = int(error.status or 0)
    reason = status_reason(error.body) or str(error.reason or "")
    if status == 0:  # the client's own "no answer" (e.g. a refused connection)
        return Unavailable(_no_answer(str(error.reason or "no response")))
    return from_status(status, reason)


def from_transport(error: urllib3.exceptions.HTTPError) -> Unavailable:
    cause = error.reason if isinstance(error, urllib3.exceptions.MaxRetryError) else error
    what = "timed out" if isinstance(cause, urllib3.exceptions.TimeoutError) else "failed"
    return Unavailable(_no_answer(f"the request {what} ({type(cause).__name__})"))


def _no_answer(what: str) -> str:
    return (
        f"the Kubernetes API server did not answer: {what}; retrying. Check that the API "
        "server is up and reachable from dmrollout"
    )


def translating(fn: F) -> F:
    """``fn`` raising the typed errors instead of ``ApiException`` and urllib3's."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ApiException as e:
            raise from_api_exception(e) from e
        except urllib3.exceptions.HTTPError as e:
            raise from_transport(e) from e

    return call  # type: ignore[return-value]


class translated:
    """A typed API object of the kubernetes client whose every method raises the typed errors."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        return translating(attr) if callable(attr) else attr

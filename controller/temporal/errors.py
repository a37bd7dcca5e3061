"""What a Temporal call's failure means for the controller: Temporal away (not there, timed out,
throttling) or refusing the controller's credential, as opposed to an answer to act on (not
found, invalid). Rollouts wait while Temporal is away; nothing that needs only Kubernetes does."""

from __future__ import annotations

from typing import Final

from temporalio.service import RPCError, RPCStatusCode

from decisionmodel.vocabulary import Reason

# No answer, or none to act on: the frontend away, timed out, throttling, or failing inside.
_UNREACHABLE_CODES: Final = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.CANCELLED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.INTERNAL,
        RPCStatusCode.UNKNOWN,
    }
)


# Answers that refuse this controller's credential, not an absence: the API key or the client
# certificate is expired or revoked (UNAUTHENTICATED), or the identity lacks the namespace
# (PERMISSION_DENIED). The steady state goes on as for an absence; the condition says which.
_REFUSED_CODES: Final = {
    RPCStatusCode.UNAUTHENTICATED: Reason.TEMPORAL_UNAUTHORIZED,
    RPCStatusCode.PERMISSION_DENIED: Reason.TEMPORAL_PERMISSION_DENIED,
}
# The same refusals as the SDK's connection words them (lazy connect, or a TLS handshake the
# server ended because it refused the client certificate: "received fatal alert: ...").
_REFUSED_WORDS: Final = (
    ("permission denied", Reason.TEMPORAL_PERMISSION_DENIED),
    ("permissiondenied", Reason.TEMPORAL_PERMISSION_DENIED),
    ("unauthenticated", Reason.TEMPORAL_UNAUTHORIZED),
    ("fatal alert", Reason.TEMPORAL_UNAUTHORIZED),
)


class TemporalUnavailable(Exception):
    """Temporal cannot be used now: it did not answer (refused, reset, timed out), or it refused
    this controller's credential (``reason`` says which); the message names where it was asked.
    Rollouts wait; nothing that needs only Kubernetes does."""

    def __init__(self, message: str, reason: Reason = Reason.TEMPORAL_UNAVAILABLE) -> None:
        super().__init__(message)
        self.reason = reason


def refusal_reason(error: BaseException) -> Reason | None:
    """TemporalUnauthorized / TemporalPermissionDenied when Temporal refused the controller's
    credential; None for anything else."""
    if isinstance(error, RPCError) and error.status in _REFUSED_CODES:
        return _REFUSED_CODES[error.status]
    if isinstance(error, RPCError | RuntimeError):
        text = (error.message if isinstance(error, RPCError) else str(error)).lower()
        for words, reason in _REFUSED_WORDS:
            if words in text:
                return reason
    return None


def is_unreachable(error: BaseException) -> bool:
    """A failure that says Temporal is not there (as opposed to an answer: not found, refused)."""
    if isinstance(error, RPCError):
        return error.status in _UNREACHABLE_CODES
    # The SDK's lazy connection raises this while the frontend cannot be reached.
    return isinstance(error, RuntimeError) and "client connect" in str(error).lower()


def away_reason(error: BaseException) -> Reason | None:
    """Why Temporal cannot be used now (a refused credential first: an UNAVAILABLE that is a
    refused certificate is one), or None for an answer to act on (not found, invalid)."""
    refused = refusal_reason(error)
    if refused is not None:
        return refused
    return Reason.TEMPORAL_UNAVAILABLE if is_unreachable(error) else None


def is_away(error: BaseException) -> bool:
    """Temporal cannot be used now: not there, or refusing the controller's credential. What
    needs only Kubernetes goes on."""
    return away_reason(error) is not None

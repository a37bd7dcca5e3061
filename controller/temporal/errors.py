"""What a Temporal call's failure means for the controller: Temporal away (not there, timed out,
throttling) or refusing the controller's credential, as opposed to an answer to act on (not
found, invalid). Rollouts wait while Temporal is away; nothing that needs only Kubernetes does."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
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


class Problem(enum.Enum):
    """What kind of failure a Temporal call met, for whoever words it for a person (the CLI)."""

    CONNECT = "connect"  # the client could not connect at all
    CONFIG = "config"  # a client profile or config file is wrong
    UPDATE_NO_ANSWER = "update-no-answer"  # an update was sent, its answer did not come in time
    NO_ANSWER = "no-answer"  # the frontend did not answer (unavailable, deadline exceeded)
    REFUSED = "refused"  # the credential or the identity was refused
    NAMESPACE_MISSING = "namespace-missing"
    SEARCH_ATTRIBUTES = "search-attributes"  # the namespace lacks dmrollout's attributes


@dataclass(frozen=True)
class TemporalProblem:
    kind: Problem
    status: str = ""  # the RPC status name, when there was one


def problem_of(error: BaseException) -> TemporalProblem | None:
    """The kind of ``error`` when it is Temporal's; None for anything else."""
    if isinstance(error, RuntimeError) and str(error).startswith("Failed client connect"):
        return TemporalProblem(Problem.CONNECT)
    if type(error).__name__ == "ConfigError":  # temporal_sdk_bridge: a profile or config file
        return TemporalProblem(Problem.CONFIG)
    if isinstance(error, WorkflowUpdateRPCTimeoutOrCancelledError):
        return TemporalProblem(Problem.UPDATE_NO_ANSWER)
    if not isinstance(error, RPCError):
        return None
    status = error.status.name if error.status is not None else ""
    if error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
        return TemporalProblem(Problem.NO_ANSWER, status)
    if error.status in (RPCStatusCode.UNAUTHENTICATED, RPCStatusCode.PERMISSION_DENIED):
        return TemporalProblem(Problem.REFUSED, status)
    if error.status == RPCStatusCode.NOT_FOUND and "namespace" in str(error).lower():
        return TemporalProblem(Problem.NAMESPACE_MISSING, status)
    if "search attribute" in str(error).lower():
        return TemporalProblem(Problem.SEARCH_ATTRIBUTES, status)
    return None

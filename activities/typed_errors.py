"""Typed errors → Temporal: permanent reasons are non-retryable ApplicationErrors.

The error ``type`` is the reference's reason name (ModelNotFound, DigestMismatch, …); the
workflow reads it to record failedRevision.reason, and a RetryPolicy lists the same names as
non-retryable, so a permanent failure is never retried whatever raised it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio.exceptions import ApplicationError

from decisionmodel.errors import DmrolloutError
from decisionmodel.vocabulary import Reason
from kube.client import APIServerUnavailable, DecisionModelGone


def to_application_error(error: DmrolloutError) -> ApplicationError:
    # str(error) is the message the error class built: it names the field and the fix and, by
    # the errors module's rule, never carries a secret or dataset content.
    return ApplicationError(str(error), type=error.reason, non_retryable=error.permanent)


@asynccontextmanager
async def typed_errors() -> AsyncIterator[None]:
    """Wrap an activity body: DmrolloutError → ApplicationError with its reason."""
    try:
        yield
    except DmrolloutError as e:
        raise to_application_error(e) from None
    except APIServerUnavailable as e:
        raise ApplicationError(str(e), type=Reason.API_SERVER_UNAVAILABLE) from None
    except DecisionModelGone as e:
        raise ApplicationError(
            str(e), type=Reason.DECISION_MODEL_GONE, non_retryable=True
        ) from None

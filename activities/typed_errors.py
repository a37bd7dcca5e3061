"""Typed errors → Temporal: permanent reasons are non-retryable ApplicationErrors.

The error ``type`` is the reference's reason name (ModelNotFound, DigestMismatch, …); the
workflow reads it to record failedRevision.reason, and a RetryPolicy lists the same names as
non-retryable, so a permanent failure is never retried whatever raised it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity
from temporalio.exceptions import ApplicationError

from decisionmodel.errors import DmrolloutError
from decisionmodel.rollout.contracts import DMRef, Phase, StepStatus
from decisionmodel.vocabulary import GUARD_REASONS, ConditionType, Reason
from kube.client import DecisionModelGone, Kube
from kube.errors import Unavailable
from kube.rollout_status import clear_guard, show_guard


def to_application_error(error: DmrolloutError) -> ApplicationError:
    # str(error) is the message the error class built: it names the field and the fix and, by
    # the errors module's rule, never carries a secret or dataset content.
    return ApplicationError(str(error), type=error.reason, non_retryable=error.permanent)


class GuardDisplay:
    """What an activity does about a guard on ``condition``: show it when it holds the step
    (kube.rollout_status.show_guard), and take it back when a later attempt gets past it, so
    Ready, Degraded and the phase the controller derives from it (controller.reconciler.
    guard_status) do not outlive the fix."""

    def __init__(
        self, kube: Kube, dm: DMRef, condition: ConditionType, phase: Phase | None = None
    ) -> None:
        self.kube, self.dm, self.condition = kube, dm, condition
        # The step's phase, put back when the guard clears (while it held, the phase was the
        # one the controller derives from it: kube.rollout_status.enter_phase).
        self.phase = phase
        self._passed = False

    async def __call__(self, error: DmrolloutError) -> None:
        first = activity.in_activity() and activity.info().attempt == 1
        await show_guard(self.kube, self.dm, self.condition, error.reason, str(error), first)

    async def passed(self) -> None:
        """The step is past its guards (Secrets read, objects owned) and goes on to its long
        part (a download, an evaluation): the guard a person has just fixed stops showing now,
        not when the step ends (issue 34: the reason stayed on Ready and Degraded for the
        whole download or evaluation). Whatever the attempt: a guard's new window starts at
        attempt 1 again. Once per attempt."""
        if not self._passed:
            self._passed = True
            await clear_guard(self.kube, self.dm, self.condition, self.phase)

    async def cleared(self) -> None:
        if not self._passed and activity.in_activity() and activity.info().attempt > 1:
            await clear_guard(self.kube, self.dm, self.condition, self.phase)


OnGuard = GuardDisplay


def show_guards(
    kube: Kube, dm: DMRef, condition: ConditionType, status: StepStatus | None = None
) -> OnGuard:
    """The ``on_guard`` of a step whose guards show on ``condition``; ``status``: the step's
    own status writes (the phase it enters), when it makes them."""
    return GuardDisplay(kube, dm, condition, step_phase(status))


def step_phase(status: StepStatus | None) -> Phase | None:
    """The phase a step enters, when it writes it itself (None: the workflow does)."""
    return status.enter.phase if status is not None and status.enter is not None else None


@asynccontextmanager
async def typed_errors(on_guard: OnGuard | None = None) -> AsyncIterator[None]:
    """Wrap an activity body: DmrolloutError → ApplicationError with its reason; a guard that
    holds the step is shown first (``on_guard``), then retried."""
    try:
        yield
        if on_guard is not None:
            await on_guard.cleared()
    except DmrolloutError as e:
        if on_guard is not None and not e.permanent and e.reason in GUARD_REASONS:
            await on_guard(e)
        raise to_application_error(e) from None
    except Unavailable as e:
        raise ApplicationError(str(e), type=Reason.API_SERVER_UNAVAILABLE) from None
    except DecisionModelGone as e:
        raise ApplicationError(
            str(e), type=Reason.DECISION_MODEL_GONE, non_retryable=True
        ) from None
    except UnicodeError as e:
        # An encoding failure nobody typed: its text quotes the character and its position,
        # which may belong to an API key or a dataset. Only the class name leaves (retried:
        # the typed paths refuse known-bad input before it gets here).
        raise ApplicationError(
            f"{type(e).__name__} while encoding or decoding a value; details withheld, they "
            "may quote a secret or dataset content",
            type=Reason.ACTIVITY_FAILED,
        ) from None

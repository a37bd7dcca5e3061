"""A step activity's own status writes: the phase when it starts, its outcome when it ends.

Before issue 14 every phase change was a ``record_status`` activity of its own (3 history
events and a workflow task each; 8 of the 13 activities of a rollout). A rollout now passes
``StepStatus`` in the step's input and the step writes through the same writer
(``kube.rollout_status``). Without it (a rollout started on the old code) nothing is written
here: that workflow still schedules record_status itself.

``writes_step_status`` wraps a step's activity method, so the step's own code is untouched. Its
writes run under ``typed_errors``: a DecisionModel gone ends the step with DecisionModelGone
(permanent), any other failure retries the step, whose work is idempotent.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from activities.status import stamped
from activities.typed_errors import typed_errors
from decisionmodel.rollout import step_status
from decisionmodel.rollout.contracts import (
    EvaluateInput,
    EvaluationDesign,
    EvaluationDesignInput,
    EvaluationOutcome,
    PrefetchResult,
    PromoteInput,
    PromoteResult,
    ResolveInput,
    ResolveResult,
    RevisionObjectsInput,
    StatusUpdate,
    StepStatus,
    WarmupInput,
    WarmupResult,
)
from kube.client import Kube
from kube.rollout_status import emit_update_event, enter_phase, write_status


class StepInput(Protocol):
    @property
    def status(self) -> StepStatus | None: ...


class StepActivities(Protocol):
    @property
    def kube(self) -> Kube | None: ...


S = TypeVar("S", bound=StepActivities)
I = TypeVar("I", bound=StepInput)  # noqa: E741
O = TypeVar("O")  # noqa: E741
Report = Callable[[I, O], StatusUpdate]


async def _write(kube: Kube | None, update: StatusUpdate, *, entering: bool = False) -> None:
    if kube is None:  # an activity run without a cluster (unit tests): nothing to write to
        return
    async with typed_errors():
        if entering:
            await enter_phase(kube, stamped(update))
        else:
            await write_status(kube, stamped(update))
        await emit_update_event(kube, update)


async def enter_step(kube: Kube | None, status: StepStatus | None) -> None:
    """The phase this step puts the rollout in (every attempt: writing it again is a no-op,
    and while a guard holds the step the guard's phase stays: kube.rollout_status.enter_phase)."""
    if status is not None and status.enter is not None:
        await _write(kube, status.enter, entering=True)


async def report_step(kube: Kube | None, status: StepStatus | None, update: StatusUpdate) -> None:
    """The step's outcome (``decisionmodel.rollout.step_status``), when the rollout asked for it."""
    if status is not None and status.report:
        await _write(kube, update)


def writes_step_status(
    report: Report[I, O], *, enter: bool = True
) -> Callable[[Callable[[S, I], Awaitable[O]]], Callable[[S, I], Awaitable[O]]]:
    """Decorate a step activity (under ``@activity.defn``): write ``inp.status.enter`` before
    it runs (unless ``enter=False``: the step does it itself) and ``report(inp, result)``
    after it returns."""

    def wrap(step: Callable[[S, I], Awaitable[O]]) -> Callable[[S, I], Awaitable[O]]:
        @functools.wraps(step)
        async def run(self: S, inp: I) -> O:
            if enter:
                await enter_step(self.kube, inp.status)
            result = await step(self, inp)
            await report_step(self.kube, inp.status, report(inp, result))
            return result

        return run

    return wrap


def enters_step(step: Callable[[S, I], Awaitable[O]]) -> Callable[[S, I], Awaitable[O]]:
    """Decorate a step activity that only enters a phase (start: warmup_inspect reports)."""

    @functools.wraps(step)
    async def run(self: S, inp: I) -> O:
        await enter_step(self.kube, inp.status)
        return await step(self, inp)

    return run


# What each step reports when it ends, from its input and its result.
def resolved(inp: ResolveInput, result: ResolveResult) -> StatusUpdate:
    return step_status.resolved(inp.dm, result)


def cached(inp: RevisionObjectsInput, _: PrefetchResult) -> StatusUpdate:
    return step_status.cached(inp.dm, inp.record)


def model_ready(inp: WarmupInput, result: WarmupResult) -> StatusUpdate:
    return step_status.model_ready(inp.dm, inp.record, result, inp.replicas)


def designed(inp: EvaluationDesignInput, design: EvaluationDesign) -> StatusUpdate:
    return step_status.designed(inp.dm, design)


def evaluated(inp: EvaluateInput, outcome: EvaluationOutcome) -> StatusUpdate:
    return step_status.evaluated(inp.dm, inp.policy, outcome)


def promoted(inp: PromoteInput, _: PromoteResult) -> StatusUpdate:
    return step_status.promoted(inp.dm, inp.candidate)

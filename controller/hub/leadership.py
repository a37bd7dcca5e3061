"""Leader election of the hub's pipeline controller: one replica starts and aborts runs.

Two pipeline controllers acting at once would race on every pipeline: both start the revision's
run (harmless, the workflow ID dedupes), but each also aborts what it takes for a superseded
run and rewrites the conditions from its own view, so a replica still catching up after a
restart could abort the run the other just started for a newer revision. The main controller's
election (controller/machinery/leader.py, client-go's rules) is reused on a Lease of its own:
sharing the controller's Lease would make the two controllers exclude each other. The CLI
builds the elector (``controller.cli.pipeline``): the hub and the reconciler are independent
rooms (.importlinter), so this module knows it only as an :class:`Elector`.

As in the main controller, a replica that loses the Lease exits (1) so that its Pod restarts as
a standby with nothing left of its old view; SIGTERM releases the Lease (0) so a standby takes
over at its next retry instead of waiting out the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger("dmrollout.pipelines.leader")

PIPELINE_LEASE_NAME: Final = "dmrollout-pipeline-controller"
STOPPED: Final = 0  # SIGTERM/SIGINT: the Lease was released
ENDED: Final = 1  # leadership lost, or the controller's loop ended: restart as a standby


class PipelineControllerSettings(BaseSettings):
    """Settings of ``dmrollout pipeline-controller`` (environment
    ``DMROLLOUT_PIPELINE_CONTROLLER_*``); the durations are client-go's defaults, as the main
    controller's."""

    model_config = SettingsConfigDict(env_prefix="DMROLLOUT_PIPELINE_CONTROLLER_", extra="ignore")

    leader_election: bool = Field(
        default=True, description="Hold a Lease so two replicas never both start or abort runs."
    )
    lease_namespace: str = Field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "default"),
        description="Namespace of the Lease.",
    )
    lease_name: str = Field(
        default=PIPELINE_LEASE_NAME,
        description="The Lease's name: not the controller's (dmrollout-controller), or the "
        "two controllers would exclude each other.",
    )
    identity: str = Field(
        default_factory=lambda: (
            os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
        ),
        description="This replica's identity in the Lease.",
    )
    lease_duration_seconds: float = Field(default=15.0, description="client-go default.")
    renew_deadline_seconds: float = Field(default=10.0, description="client-go default.")
    retry_period_seconds: float = Field(default=2.0, description="client-go default.")
    health_port: int = Field(
        default=8082,
        ge=0,
        le=65535,
        description="Port of /healthz and /readyz (0: an ephemeral one). Not the "
        "controller's 8080, so both run side by side on one machine.",
    )


class Elector(Protocol):
    """What the pipeline controller needs of controller.machinery.leader.LeaderElector."""

    async def run(
        self,
        on_started: Callable[[], Awaitable[None]] | None,
        on_stopped: Callable[[], None],
    ) -> None: ...

    async def release(self) -> None: ...


class Outcome:
    """How the process ends: the first of a stop signal, the Lease lost, the loop ended."""

    def __init__(self) -> None:
        self.code: int | None = None
        self.lost = False
        self._done = asyncio.Event()

    def finish(self, code: int, lost: bool = False) -> None:
        # The first cause wins: a release after SIGTERM also calls on_stopped, which must not
        # turn a clean stop into a failure.
        if self.code is None:
            self.code = code
            self.lost = lost
            self._done.set()

    async def wait(self) -> int:
        await self._done.wait()
        assert self.code is not None
        return self.code


def stop_on_signals(outcome: Outcome) -> None:
    """SIGTERM (the kubelet) and SIGINT end the process cleanly, releasing the Lease."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, outcome.finish, STOPPED)


async def run_leading(
    work: Callable[[], Awaitable[None]], elector: Elector | None, outcome: Outcome
) -> int:
    """Run ``work`` only while ``elector`` holds the Lease (always, without one) until
    ``outcome`` is finished; the exit code. ``work`` is cancelled and awaited before the Lease
    is released: the successor starts only once this replica stopped acting."""
    working: list[asyncio.Task[None]] = []

    async def lead() -> None:
        task = asyncio.current_task()
        assert task is not None
        working.append(task)
        log.info("leading: reconciling DecisionModelPipelines")
        try:
            await work()
            log.error("the pipeline controller's loop ended")
        except Exception:
            log.exception("the pipeline controller's loop failed")
        outcome.finish(ENDED)

    def lost() -> None:
        if outcome.code is None:
            log.error("pipeline controller lost its Lease: exiting so a standby takes over")
        outcome.finish(ENDED, lost=True)

    if elector is None:
        election = asyncio.create_task(lead(), name="pipeline-controller")
    else:
        election = asyncio.create_task(elector.run(lead, lost), name="pipeline-leader")
    code = await outcome.wait()
    for task in (election, *working):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if elector is not None and not outcome.lost:
        # Stopped, or the loop ended while leading: hand the Lease over now. A lost one is
        # not ours, and its API server is likely away anyway.
        await elector.release()
    return code


__all__ = [
    "ENDED",
    "PIPELINE_LEASE_NAME",
    "STOPPED",
    "Elector",
    "Outcome",
    "PipelineControllerSettings",
    "run_leading",
    "stop_on_signals",
]

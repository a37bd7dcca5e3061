"""One start/stop lifecycle for a controller process that acts only while it leads: the
reconciler's manager and the hub's pipeline controller (issue 37, item 1).

The process ends at the first of: a stop signal (SIGTERM from the kubelet, SIGINT: exit 0,
the Lease released so a standby takes over at its next retry instead of waiting out the
lease), the Lease lost, or its loop ending (exit 1, so its Pod restarts as a standby with
nothing left of its old view: client-go's rule). The loop is cancelled and awaited before the
Lease is released: the successor starts only once this replica stopped acting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

log = logging.getLogger("dmrollout.leader")

STOPPED: Final = 0  # SIGTERM/SIGINT: the Lease was released
ENDED: Final = 1  # leadership lost, or the loop ended: restart as a standby


class Elector(Protocol):
    """What a leading loop needs of controller.machinery.leader.LeaderElector."""

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
    work: Callable[[], Awaitable[None]],
    elector: Elector | None,
    outcome: Outcome,
    what: str,
) -> int:
    """Run ``work`` only while ``elector`` holds the Lease (always, without one) until
    ``outcome`` is finished; the exit code. ``what`` names the loop in the log."""
    working: list[asyncio.Task[None]] = []

    async def lead() -> None:
        task = asyncio.current_task()
        assert task is not None
        working.append(task)
        log.info("leading: %s", what)
        try:
            await work()
            if outcome.code is None:
                log.error("%s: the loop ended", what)
        except Exception:
            log.exception("%s: the loop failed", what)
        outcome.finish(ENDED)

    def lost() -> None:
        if outcome.code is None:
            log.error("%s: leadership lost, exiting so a standby takes over", what)
        outcome.finish(ENDED, lost=True)

    if elector is None:
        election = asyncio.create_task(lead(), name=what)
    else:
        election = asyncio.create_task(elector.run(lead, lost), name=f"{what} (leader)")
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

"""A worker or controller process kept running as a Deployment's container is: started again
after it exits, after a backoff. Shared by the chaos cells and the lifecycle explorer."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time

from harness.rollout_harness import ControllerProcess, WorkerProcess


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Supervised:
    """A worker or controller kept running: started again after it exits, after a backoff
    (CrashLoopBackOff's shape, shortened: 1 s doubling to 8 s, back to 1 s after 30 s up)."""

    def __init__(self, name: str, proc: WorkerProcess | ControllerProcess) -> None:
        self.name = name
        self.proc = proc
        self.held_down = False
        self.restarts = 0
        self._backoff = 0.5
        self._started_at = 0.0
        self._due: float | None = None

    def alive(self) -> bool:
        return self.proc.proc is not None and self.proc.proc.poll() is None

    def start(self) -> None:
        self.proc.start()
        self.held_down = False
        self._started_at = time.monotonic()
        self._due = None

    def kill(self) -> None:
        self.held_down = True
        if self.alive():
            self.proc.kill()

    def hold_down(self) -> None:
        """Not started again when it exits (the kernel is about to kill it)."""
        self.held_down = True

    def exit_code(self, timeout: float) -> int | None:
        """Its exit code once it exits, None if it is still running after ``timeout``."""
        assert self.proc.proc is not None
        try:
            return self.proc.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        self.held_down = True
        self.proc.stop()

    def tend(self) -> None:
        if self.held_down or self.alive():
            return
        now = time.monotonic()
        if self._due is None:
            ran = now - self._started_at
            self._backoff = 1.0 if ran > 30 else min(self._backoff * 2, 8.0)
            self._due = now + self._backoff
        elif now >= self._due:
            self.restarts += 1
            self.start()


async def supervise(processes: list[Supervised]) -> None:
    while True:
        for p in list(processes):  # the explorer replaces processes while this runs
            p.tend()
        await asyncio.sleep(0.5)

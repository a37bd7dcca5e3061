"""The whole local environment: control plane + fake kubelet + Temporal + simulators.

Used by the pytest fixtures (``tests/conftest.py``) and by ``dmrollout dev up`` / the demo. Every
part is a real process; all of them listen on loopback or the namespace-local Pod network.
"""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from localenv.cluster import LocalCluster
from localenv.processes import ManagedProcess, wait_until
from localenv.temporal import TemporalDevServer

REGISTRY_PORT = 5000
RUNTIME_PORT = 11435
REGISTRY_URL = f"http://127.0.0.1:{REGISTRY_PORT}"
REGISTRY_HOST = f"127.0.0.1:{REGISTRY_PORT}"


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


@dataclass
class Simulators:
    """The registry and runtime simulators, sharing the simulated volumes of ``state_dir``."""

    state_dir: Path
    kubeconfig: Path

    def __post_init__(self) -> None:
        self.registry: ManagedProcess | None = None
        self.runtime: ManagedProcess | None = None

    registry_url = REGISTRY_URL

    def start(self) -> Simulators:
        logs = self.state_dir / "logs"
        self.registry = ManagedProcess(
            "registry-sim",
            [sys.executable, "-m", "simulators.registry", "--host", "127.0.0.1",
             "--port", str(REGISTRY_PORT), "--state-dir", str(self.state_dir)],
            logs,
        ).start()  # fmt: skip
        # 0.0.0.0: one process answers on every Pod IP of the namespace-local Pod network.
        self.runtime = ManagedProcess(
            "runtime-sim",
            [sys.executable, "-m", "simulators.runtime", "--host", "0.0.0.0",
             "--port", str(RUNTIME_PORT), "--state-dir", str(self.state_dir),
             "--kubeconfig", str(self.kubeconfig)],
            logs,
        ).start()  # fmt: skip
        wait_until(lambda: _port_open("127.0.0.1", REGISTRY_PORT), 30, "registry simulator",
                   0.1, [self.registry])  # fmt: skip
        wait_until(lambda: _port_open("127.0.0.1", RUNTIME_PORT), 30, "runtime simulator",
                   0.1, [self.runtime])  # fmt: skip
        return self

    def stop(self) -> None:
        for p in (self.runtime, self.registry):
            if p is not None:
                p.stop()


class LocalEnv:
    """Start in dependency order, stop in reverse; each part usable on its own."""

    def __init__(self, state_dir: Path, temporal_ui_ip: str | None = None) -> None:
        self.state_dir = state_dir
        self.cluster = LocalCluster(state_dir / "cluster")
        self.kubelet: ManagedProcess | None = None
        self.temporal = TemporalDevServer(state_dir / "temporal", ui_ip=temporal_ui_ip)
        self.simulators = Simulators(state_dir / "sim", self.cluster.kubeconfig)
        self.timings: dict[str, float] = {}
        # Processes a caller adds (the demo's worker and controller): stopped first.
        self.extra_processes: list[ManagedProcess] = []

    def start_cluster(self) -> None:
        t0 = time.monotonic()
        self.cluster.start()
        self.kubelet = ManagedProcess(
            "fake-kubelet",
            [sys.executable, "-m", "localenv.kubelet", "--kubeconfig", str(self.cluster.kubeconfig),
             "--state-dir", str(self.simulators.state_dir)],
            self.state_dir / "logs",
        ).start()  # fmt: skip
        self.timings["cluster"] = time.monotonic() - t0

    def start_temporal(self) -> None:
        t0 = time.monotonic()
        self.temporal.start()
        self.timings["temporal"] = time.monotonic() - t0

    def start_simulators(self) -> None:
        t0 = time.monotonic()
        self.simulators.start()
        self.timings["simulators"] = time.monotonic() - t0

    def start(self) -> LocalEnv:
        self.start_cluster()
        self.start_temporal()
        self.start_simulators()
        return self

    def stop(self) -> None:
        for p in reversed(self.extra_processes):
            p.stop()
        self.simulators.stop()
        self.temporal.stop()
        if self.kubelet is not None:
            self.kubelet.stop()
        self.cluster.stop()

    def __enter__(self) -> LocalEnv:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

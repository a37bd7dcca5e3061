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
    """The registry and runtime simulators, sharing the simulated volumes of ``state_dir``.

    The ports are the defaults everywhere but beside another environment in the same network
    namespace (``localenv.multicluster``); the product's serving Pods expect the runtime on
    RUNTIME_PORT (decisionmodel's HTTP_PORT).
    """

    state_dir: Path
    kubeconfig: Path
    registry_port: int = REGISTRY_PORT
    runtime_port: int = RUNTIME_PORT

    def __post_init__(self) -> None:
        self.registry: ManagedProcess | None = None
        self.runtime: ManagedProcess | None = None
        self.registry_url = f"http://127.0.0.1:{self.registry_port}"

    # The default's, for tests that need it before any instance exists.
    registry_url = REGISTRY_URL

    def runtime_args(self) -> list[str]:
        """The runtime simulator's command line: one cluster's Pods, at its kubeconfig."""
        return [
            sys.executable, "-m", "simulators.runtime", "--host", "0.0.0.0",
            "--port", str(self.runtime_port), "--state-dir", str(self.state_dir),
            "--kubeconfig", str(self.kubeconfig),
        ]  # fmt: skip

    def start(self) -> Simulators:
        logs = self.state_dir / "logs"
        self.registry = ManagedProcess(
            "registry-sim",
            [sys.executable, "-m", "simulators.registry", "--host", "127.0.0.1",
             "--port", str(self.registry_port), "--state-dir", str(self.state_dir)],
            logs,
        ).start()  # fmt: skip
        # 0.0.0.0: one process answers on every Pod IP of the namespace-local Pod network.
        self.runtime = ManagedProcess("runtime-sim", self.runtime_args(), logs).start()
        wait_until(lambda: _port_open("127.0.0.1", self.registry_port), 30,
                   "registry simulator", 0.1, [self.registry])  # fmt: skip
        wait_until(lambda: _port_open("127.0.0.1", self.runtime_port), 30,
                   "runtime simulator", 0.1, [self.runtime])  # fmt: skip
        return self

    def stop(self) -> None:
        for p in (self.runtime, self.registry):
            if p is not None:
                p.stop()


def fake_kubelet(
    kubeconfig: Path, sim_state: Path, log_dir: Path, name: str = "fake-kubelet"
) -> ManagedProcess:
    """The fake kubelet of one cluster (not started), keeping its volumes under ``sim_state``
    where the runtime simulator looks for that cluster's stores."""
    return ManagedProcess(
        name,
        [sys.executable, "-m", "localenv.kubelet", "--kubeconfig", str(kubeconfig),
         "--state-dir", str(sim_state)],
        log_dir,
    )  # fmt: skip


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
        self.kubelet = fake_kubelet(
            self.cluster.kubeconfig, self.simulators.state_dir, self.state_dir / "logs"
        ).start()
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

"""Several local clusters in one network namespace, with one Temporal and one set of simulators.

Issue 25 rolls a model out on a hub (staging) cluster, then on a production cluster. Here both
are real control planes (``localenv.cluster.LocalCluster``), each in a ``ClusterSlot`` of its own
(ports, PKI, kubeconfig, state, fake nodes whose Pod CIDRs do not meet the other's) with a fake
kubelet of its own. The Temporal dev server and the registry simulator are shared, as one
Temporal and one registry would be. The runtime simulator is one process too: it answers on
every Pod IP and asks the cluster that hands out the address (``localenv.multiruntime``).
Each cluster's simulated volumes live apart (``sim_state``): a PVC of the same namespace and
name in both clusters (one DecisionModel promoted from hub to prod) is two volumes.

    hack/in-netns.sh .venv/bin/python -m localenv.multicluster     # hub and prod, Ctrl-C stops
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from localenv.cluster import ClusterSlot, LocalCluster, in_private_netns
from localenv.env import REGISTRY_PORT, RUNTIME_PORT, Simulators, fake_kubelet
from localenv.multiruntime import ClusterPods
from localenv.processes import ManagedProcess
from localenv.temporal import DEFAULT_PORT as TEMPORAL_PORT
from localenv.temporal import DEFAULT_UI_PORT as TEMPORAL_UI_PORT
from localenv.temporal import TemporalDevServer


@dataclass(frozen=True)
class SharedPorts:
    """The ports of the parts the clusters share; the defaults are LocalEnv's."""

    temporal: int = TEMPORAL_PORT
    temporal_ui: int = TEMPORAL_UI_PORT
    registry: int = REGISTRY_PORT
    runtime: int = RUNTIME_PORT


# Beside a LocalEnv in the same namespace: ``make test`` keeps a worker's session environment
# up from one test file to the next, so a file with clusters of its own must not meet its
# ports (use it with first_slot=1). The product's serving Pods expect the runtime on
# RUNTIME_PORT: with these ports only a test that talks to the runtime itself is served.
BESIDE_LOCAL_ENV = SharedPorts(temporal=7333, temporal_ui=8333, registry=5100, runtime=11535)


@dataclass
class MultiClusterSimulators(Simulators):
    """The simulators, the runtime serving the Pods of every cluster in ``clusters``."""

    clusters: tuple[ClusterPods, ...] = ()

    def runtime_args(self) -> list[str]:
        args = [sys.executable, "-m", "localenv.multiruntime", "--host", "0.0.0.0",
                "--port", str(self.runtime_port)]  # fmt: skip
        for cluster in self.clusters:
            args += cluster.args()
        return args


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class MultiClusterEnv:
    """Clusters ``names`` in slots ``first_slot``, ``first_slot + 1``…, Temporal, simulators.

    Start in dependency order, stop in reverse; a failed start stops what it started.
    """

    def __init__(
        self,
        state_dir: Path,
        names: Sequence[str] = ("hub", "prod"),
        *,
        first_slot: int = 0,
        ports: SharedPorts | None = None,
        temporal_ui_ip: str | None = None,
        temporal_namespaces: tuple[str, ...] = (),
    ) -> None:
        if not names or len(set(names)) != len(names):
            raise ValueError(f"cluster names must be distinct and at least one: {names!r}")
        self.state_dir = state_dir
        self.ports = ports or SharedPorts()
        self.clusters: dict[str, LocalCluster] = {
            name: LocalCluster(state_dir / name, slot=ClusterSlot(first_slot + i, name))
            for i, name in enumerate(names)
        }
        self.kubelets: dict[str, ManagedProcess] = {}
        self.temporal = TemporalDevServer(
            state_dir / "temporal",
            port=self.ports.temporal,
            ui_port=self.ports.temporal_ui,
            ui_ip=temporal_ui_ip,
            extra_namespaces=temporal_namespaces,
        )
        self.simulators = MultiClusterSimulators(
            state_dir / "sim",
            # Not read by the routed runtime; the field is the single-cluster runtime's.
            next(iter(self.clusters.values())).kubeconfig,
            registry_port=self.ports.registry,
            runtime_port=self.ports.runtime,
        )
        self.timings: dict[str, float] = {}
        # Processes a caller adds (workers, controllers): stopped first.
        self.extra_processes: list[ManagedProcess] = []

    def sim_state(self, name: str) -> Path:
        """Where cluster ``name``'s simulated volumes live (its fake kubelet writes them, the
        runtime reads its Pods' stores there)."""
        return self.simulators.state_dir / "clusters" / name

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> MultiClusterEnv:
        if not in_private_netns():
            raise RuntimeError(
                "the local clusters run only inside their private network namespace: "
                "run through hack/in-netns.sh"
            )
        self._check_networks_apart()
        self._check_ports_free()
        began = time.monotonic()
        try:
            for name in self.clusters:
                self.start_cluster(name)
            self.start_temporal()
            self.start_simulators()
        except BaseException:
            self.stop()
            raise
        self.timings["start"] = time.monotonic() - began
        return self

    def start_cluster(self, name: str) -> None:
        t0 = time.monotonic()
        cluster = self.clusters[name]
        cluster.start()
        self.kubelets[name] = fake_kubelet(
            cluster.kubeconfig, self.sim_state(name), cluster.log_dir
        ).start()
        self.timings[f"cluster {name}"] = time.monotonic() - t0

    def start_temporal(self) -> None:
        t0 = time.monotonic()
        self.temporal.start()
        self.timings["temporal"] = time.monotonic() - t0

    def start_simulators(self) -> None:
        t0 = time.monotonic()
        # Read now, not in __init__: a caller may replace a cluster's nodes before start.
        self.simulators.clusters = tuple(
            ClusterPods(c.kubeconfig, self.sim_state(name), self._networks(c))
            for name, c in self.clusters.items()
        )
        self.simulators.start()
        self.timings["simulators"] = time.monotonic() - t0

    def stop(self) -> None:
        for p in reversed(self.extra_processes):
            p.stop()
        self.simulators.stop()
        self.temporal.stop()
        for name in reversed(list(self.clusters)):
            kubelet = self.kubelets.pop(name, None)
            if kubelet is not None:
                kubelet.stop()
            self.clusters[name].stop()

    def __enter__(self) -> MultiClusterEnv:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- checks ----------------------------------------------------------------------------
    @staticmethod
    def _networks(cluster: LocalCluster) -> tuple[str, ...]:
        # hostNetwork Pods have the node's address; every other Pod one of its nodes' CIDRs.
        return (*(n.pod_cidr for n in cluster.nodes), f"{cluster.slot.node_ip}/32")

    def _check_networks_apart(self) -> None:
        """No address may belong to two clusters: the runtime simulator would serve one
        cluster's Pod as the other's."""
        for (a, ca), (b, cb) in combinations(self.clusters.items(), 2):
            for x in self._networks(ca):
                for y in self._networks(cb):
                    if ipaddress.ip_network(x).overlaps(ipaddress.ip_network(y)):
                        raise ValueError(f"clusters {a} and {b} overlap: {x} and {y}")

    def listeners(self) -> dict[str, int]:
        """Every port this environment listens on, by part."""
        ports = {
            f"{name} {part}": port
            for name, cluster in self.clusters.items()
            for part, port in cluster.ports.items()
        }
        ports |= {
            "temporal": self.temporal.port,
            "temporal ui": self.temporal.ui_port,
            "temporal metrics": self.temporal.metrics_port,
            "registry simulator": self.ports.registry,
            "runtime simulator": self.ports.runtime,
        }
        return ports

    def _check_ports_free(self) -> None:
        """Fail before starting anything when a port is taken or used twice. Without it a
        second environment in the namespace would not always fail: the readiness waits of
        Temporal and the simulators probe the port, which the other environment answers."""
        ports = self.listeners()
        by_port: dict[int, list[str]] = {}
        for part, port in ports.items():
            by_port.setdefault(port, []).append(part)
        twice = {port: parts for port, parts in by_port.items() if len(parts) > 1}
        if twice:
            raise ValueError(f"ports used twice: {twice}")
        taken = {part: port for part, port in ports.items() if _port_open(port)}
        if taken:
            raise RuntimeError(
                f"ports already in use in this network namespace: {taken} (another local "
                "environment? beside a LocalEnv use first_slot=1, ports=BESIDE_LOCAL_ENV)"
            )


def main() -> None:  # pragma: no cover - manual use: python -m localenv.multicluster
    state = Path(tempfile.mkdtemp(prefix="dmrollout-multicluster-"))
    with MultiClusterEnv(state) as env:
        timings = ", ".join(f"{part} {secs:.1f}s" for part, secs in env.timings.items())
        print(f"clusters up ({timings})", file=sys.stderr)
        for name, cluster in env.clusters.items():
            print(f"  {name}: KUBECONFIG={cluster.kubeconfig}", file=sys.stderr)
        print(f"  Temporal: {env.temporal.address}; state, logs: {state}", file=sys.stderr)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # pragma: no cover
    main()

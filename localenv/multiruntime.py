"""The runtime simulator answering for the Pods of several local clusters.

``simulators.runtime`` answers on every Pod IP of the network namespace and asks one cluster
which Pod has the address a request came to. Clusters side by side (``localenv.multicluster``)
hand out Pod IPs from ranges that do not overlap (``localenv.cluster.ClusterSlot``), so the
address also says which cluster to ask: each cluster gets a ``KubePodDirectory`` of its own (its
API server, its simulated volumes) and a lookup goes to the one whose ranges hold the address.

    python -m localenv.multiruntime --host 0.0.0.0 --port 11435 \\
        --cluster HUB_KUBECONFIG HUB_STATE 100.72.65.0/24,100.72.66.0/24 \\
        --cluster PROD_KUBECONFIG PROD_STATE 100.72.129.0/24,100.72.130.0/24
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simulators.pods import PodDirectory, SimPod

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ClusterPods:
    """Where the runtime finds one cluster's Pods: its kubeconfig, the state directory its fake
    kubelet keeps volumes in, and the address ranges of its Pods (node Pod CIDRs, and the node
    IP for hostNetwork Pods)."""

    kubeconfig: Path
    state_dir: Path
    networks: tuple[str, ...]

    def args(self) -> list[str]:
        return ["--cluster", str(self.kubeconfig), str(self.state_dir), ",".join(self.networks)]


class RoutedPodDirectory:
    """A PodDirectory per set of address ranges; a lookup asks the one holding the address."""

    def __init__(self, routes: Sequence[tuple[Sequence[str], PodDirectory]]) -> None:
        self._routes: list[tuple[tuple[Network, ...], PodDirectory]] = [
            (tuple(ipaddress.ip_network(n) for n in networks), directory)
            for networks, directory in routes
        ]

    async def lookup(self, ip: str) -> SimPod | None:
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return None
        for networks, directory in self._routes:
            if any(address in n for n in networks):
                return await directory.lookup(ip)
        # No cluster hands out this address: the runtime answers 503 POD_UNKNOWN, as it does
        # for an address no Pod has.
        return None


def main(argv: list[str] | None = None) -> None:
    from simulators.kube_pods import KubePodDirectory
    from simulators.runtime import DEFAULT_PORT, make_app
    from simulators.serve import serve_until_signal

    parser = argparse.ArgumentParser(prog="python -m localenv.multiruntime", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument(
        "--cluster",
        nargs=3,
        action="append",
        required=True,
        metavar=("KUBECONFIG", "STATE_DIR", "CIDRS"),
        help="one cluster: its kubeconfig, its volumes' state dir, its comma-separated ranges",
    )
    parser.add_argument("--ready-file", type=Path, default=None)
    args = parser.parse_args(argv)
    routes: list[tuple[Sequence[str], PodDirectory]] = [
        (cidrs.split(","), KubePodDirectory(Path(state), kubeconfig=kubeconfig, follow=True))
        for kubeconfig, state, cidrs in args.cluster
    ]
    app = make_app(RoutedPodDirectory(routes))
    asyncio.run(serve_until_signal(app, args.host, args.port, ready_file=args.ready_file))


if __name__ == "__main__":
    main()

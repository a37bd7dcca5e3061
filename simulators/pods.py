"""What the runtime simulator knows about the Pod a request was sent to, and where it asks.

One simulator process answers for every simulated Pod; it tells them apart by the local address
a request arrived on (each Pod IP is an address of the simulator's network namespace) and asks a
`PodDirectory` which Pod owns that IP.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field


class SimPod(BaseModel):
    """The Pod behind one IP, as far as the runtime simulator needs it."""

    model_config = ConfigDict(frozen=True)

    uid: str
    namespace: str
    name: str
    ip: str
    # Fault injection, prefix `sim.dmrollout.dev/` (see simulators.pod_faults).
    annotations: dict[str, str] = Field(default_factory=dict)
    # Env of the `ollaya` container, Secret and ConfigMap references already resolved.
    env: dict[str, str] = Field(default_factory=dict)
    node_has_gpu: bool = False
    # Host directory of the volume mounted at OLLAYA_MODELS (None: nothing mounted there).
    store_dir: Path | None = None
    store_read_only: bool = False


class PodDirectory(Protocol):
    async def lookup(self, ip: str) -> SimPod | None: ...


class StaticPodDirectory:
    """A fixed, mutable set of Pods (unit tests, demos without a cluster)."""

    def __init__(self, pods: Iterable[SimPod] = ()) -> None:
        self._by_ip: dict[str, SimPod] = {pod.ip: pod for pod in pods}

    def put(self, pod: SimPod) -> None:
        """Add or replace the Pod at `pod.ip` (replace it to change annotations or env)."""
        self._by_ip[pod.ip] = pod

    def remove(self, ip: str) -> None:
        self._by_ip.pop(ip, None)

    async def lookup(self, ip: str) -> SimPod | None:
        return self._by_ip.get(ip)

"""The runtime simulator on loopback, with one simulated Pod per 127.0.0.x address.

The simulator tells Pods apart by the local address a request arrived on (all of 127/8 is
local on ``lo``), so the fixture listens on each 127.0.0.x a Pod uses, one port for all: only
loopback, which the test opens itself, so no network namespace is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulators.catalogue import DEFAULT_CATALOGUE, ModelArtifact, build_artifact
from simulators.pods import SimPod, StaticPodDirectory
from simulators.volumes import write_model_to_store

API_KEY = "sim-api-key-0123456789"
LAYA = build_artifact("library/laya", "en", DEFAULT_CATALOGUE["library/laya:en"])


@dataclass
class RuntimeSim:
    directory: StaticPodDirectory
    port: int
    tmp: Path

    def base_url(self, ip: str) -> str:
        return f"http://{ip}:{self.port}"

    def add_pod(
        self,
        ip: str,
        *,
        artifact: ModelArtifact | None = LAYA,
        env: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        node_has_gpu: bool = False,
    ) -> SimPod:
        """A serving Pod as dmrollout renders it (API key, OLLAYA_KEEP_ALIVE=-1) whose store
        holds ``artifact``, as the prefetch Job leaves it."""
        suffix = ip.replace(".", "-")
        store = self.tmp / f"store-{suffix}"
        if artifact is not None:
            ns, model = artifact.name.split("/")
            write_model_to_store(
                store, "ollaya.dev", ns, model, artifact.tag, artifact.manifest, artifact.blobs
            )
        pod_env = {
            "OLLAYA_MODELS": "/models",
            "OLLAYA_API_KEY": API_KEY,
            "OLLAYA_KEEP_ALIVE": "-1",
            "OLLAYA_DEVICE": "cpu",
        }
        pod_env.update(env or {})
        fields: dict[str, Any] = {
            "uid": f"uid-{suffix}",
            "namespace": "default",
            "name": f"pod-{suffix}",
            "ip": ip,
            "env": pod_env,
            "annotations": {f"sim.dmrollout.dev/{k}": v for k, v in (annotations or {}).items()},
            "node_has_gpu": node_has_gpu,
            "store_dir": store,
            "store_read_only": True,
        }
        pod = SimPod(**fields)
        self.directory.put(pod)
        return pod

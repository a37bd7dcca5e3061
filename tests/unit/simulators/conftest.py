"""Fixtures for the simulator tests: in-process apps on ephemeral loopback ports.

The runtime simulator listens on 0.0.0.0 and tells Pods apart by the local address, so each
simulated Pod gets its own 127.0.0.x address (all of 127/8 is local on `lo`). Run inside the
test network namespace (`hack/in-netns.sh`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from simulators import registry as registry_module
from simulators import runtime as runtime_module
from simulators.catalogue import ModelArtifact, ModelProfile, build_artifact
from simulators.pods import SimPod, StaticPodDirectory
from simulators.volumes import write_model_to_store


@dataclass
class FakeClock:
    now: datetime = field(default_factory=lambda: datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


async def start_app(app: web.Application, host: str) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    return runner, int(runner.addresses[0][1])


@dataclass
class RuntimeHarness:
    directory: StaticPodDirectory
    clock: FakeClock
    port: int
    tmp: Path

    def url(self, ip: str, path: str) -> str:
        return f"http://{ip}:{self.port}{path}"

    def add_pod(self, ip: str, **overrides: Any) -> SimPod:
        """A Pod at `ip` with a writable store of its own (uid and name from the IP)."""
        suffix = ip.replace(".", "-")
        fields: dict[str, Any] = {
            "uid": f"uid-{suffix}",
            "namespace": "default",
            "name": f"pod-{suffix}",
            "ip": ip,
            "store_dir": self.tmp / f"store-{suffix}",
            "env": {"OLLAYA_MODELS": "/models"},
        }
        fields.update(overrides)
        pod = SimPod(**fields)
        self.directory.put(pod)
        return pod

    def update_pod(self, ip: str, **changes: Any) -> SimPod:
        pod = self.directory._by_ip[ip].model_copy(update=changes)
        self.directory.put(pod)
        return pod


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[RuntimeHarness]:
    directory = StaticPodDirectory()
    clock = FakeClock()
    runner, port = await start_app(runtime_module.make_app(directory, clock=clock), "0.0.0.0")
    try:
        yield RuntimeHarness(directory=directory, clock=clock, port=port, tmp=tmp_path)
    finally:
        await runner.cleanup()


@dataclass
class RegistryHarness:
    app: web.Application
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> registry_module.RegistryState:
        return self.app[registry_module.REGISTRY]


@pytest.fixture
async def registry(tmp_path: Path) -> AsyncIterator[RegistryHarness]:
    app = registry_module.make_app(tmp_path / "registry-state")
    runner, port = await start_app(app, "127.0.0.1")
    try:
        yield RegistryHarness(app=app, port=port)
    finally:
        await runner.cleanup()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10.0, trust_env=False) as client:
        yield client


def store_model(
    store_dir: Path,
    name: str = "library/laya",
    tag: str = "en",
    profile: ModelProfile | None = None,
    host: str = "ollaya.dev",
) -> ModelArtifact:
    """Write a model into a store as a prefetch would; returns what was written."""
    artifact = build_artifact(name, tag, profile or ModelProfile())
    ns, model = name.split("/")
    write_model_to_store(store_dir, host, ns, model, tag, artifact.manifest, artifact.blobs)
    return artifact


@pytest.fixture
def stored() -> Callable[..., ModelArtifact]:
    return store_model

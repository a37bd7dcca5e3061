"""Serving the registry simulator (and helper apps) on ephemeral loopback ports.

Serving refuses to start outside the private network namespace of ``hack/in-netns.sh``.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from aiohttp import web

from simulators import registry as registry_sim


async def serve(app: web.Application, host: str = "127.0.0.1") -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    return runner, int(runner.addresses[0][1])


@dataclass
class RegistrySim:
    app: web.Application
    port: int

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def base(self) -> str:
        return f"http://{self.authority}"

    @property
    def state(self) -> registry_sim.RegistryState:
        return self.app[registry_sim.REGISTRY]

    async def admin(self, method: str, path: str, body: object = None) -> httpx.Response:
        """The simulator's /_sim/ admin API, over HTTP as a test in another process would."""
        async with httpx.AsyncClient(base_url=self.base, trust_env=False) as client:
            response = await client.request(method, path, json=body)
        response.raise_for_status()
        return response

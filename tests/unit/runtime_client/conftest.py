"""Fixtures of the runtime-client tests that run the runtime simulator (runtime_harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from runtime_harness import RuntimeSim

from simulators import runtime as runtime_sim
from simulators.pods import StaticPodDirectory

# Simulated Pods use 127.0.0.1 to 127.0.0.<POD_ADDRESSES + 1>.
POD_ADDRESSES = 20


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[RuntimeSim]:
    directory = StaticPodDirectory()
    runner = web.AppRunner(runtime_sim.make_app(directory))
    await runner.setup()
    # One listener per loopback address a simulated Pod has, all on one port: loopback only,
    # never a host interface, so the tier needs no network namespace.
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = int(runner.addresses[0][1])
    for last in range(2, POD_ADDRESSES + 2):
        await web.TCPSite(runner, f"127.0.0.{last}", port).start()
    try:
        yield RuntimeSim(directory=directory, port=port, tmp=tmp_path)
    finally:
        await runner.cleanup()

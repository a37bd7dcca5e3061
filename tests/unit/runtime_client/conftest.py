"""Fixtures of the runtime-client tests that run the runtime simulator (runtime_harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from runtime_harness import RuntimeSim

from localenv.cluster import in_private_netns
from simulators import runtime as runtime_sim
from simulators.pods import StaticPodDirectory


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[RuntimeSim]:
    if not in_private_netns():
        pytest.fail("socket tests run inside the test netns: hack/in-netns.sh .venv/bin/pytest …")
    directory = StaticPodDirectory()
    runner = web.AppRunner(runtime_sim.make_app(directory))
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", 0).start()
    try:
        yield RuntimeSim(directory=directory, port=int(runner.addresses[0][1]), tmp=tmp_path)
    finally:
        await runner.cleanup()

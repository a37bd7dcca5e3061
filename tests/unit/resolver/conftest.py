"""Fixtures of the resolver tests that run the registry simulator (registry_harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from registry_harness import RegistrySim, serve

from simulators import registry as registry_sim


@pytest.fixture
async def registry(tmp_path: Path) -> AsyncIterator[RegistrySim]:
    app = registry_sim.make_app(tmp_path / "registry-state")
    runner, port = await serve(app)
    try:
        yield RegistrySim(app=app, port=port)
    finally:
        await runner.cleanup()

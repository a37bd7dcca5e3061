"""Both simulators start as processes, answer, and stop cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[3]


@asynccontextmanager
async def process(*args: str, ready_file: Path) -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        "--ready-file",
        str(ready_file),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        # Wait for the ready line (the process writes it once the socket is bound).
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)  # type: ignore[union-attr]
        url = json.loads(line)["listening"]
        assert json.loads(ready_file.read_text()) == {"listening": url}
        yield url
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_registry_process(tmp_path: Path) -> None:
    async with (
        process(
            "-m",
            "simulators.registry",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--state-dir",
            str(tmp_path / "registry"),
            ready_file=tmp_path / "registry.ready",
        ) as url,
        httpx.AsyncClient(trust_env=False) as http,
    ):
        response = await http.get(f"{url}/v2/library/laya/manifests/en")
        assert response.status_code == 200
        assert response.json()["schemaVersion"] == 2
    assert (tmp_path / "registry" / "registry-catalogue.json").is_file()


async def test_runtime_process(tmp_path: Path) -> None:
    async with (
        process(
            "-m",
            "simulators.runtime",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--state-dir",
            str(tmp_path / "runtime"),
            "--kubeconfig",
            str(tmp_path / "no-such-kubeconfig"),
            ready_file=tmp_path / "runtime.ready",
        ) as url,
        # The first lookup imports the Kubernetes client (3 s here idle, more on a loaded CI).
        httpx.AsyncClient(trust_env=False, timeout=60) as http,
    ):
        # No cluster to ask: no Pod is known at this address.
        response = await http.get(f"{url}/")
        assert response.status_code == 503
        assert response.json()["code"] == "POD_UNKNOWN"

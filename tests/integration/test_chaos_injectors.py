"""The chaos matrix's injectors themselves (localenv/chaos.py): the silent proxy goes silent and
back, and a fault is healed whatever happens while it is in place."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from localenv.chaos import SilentProxy, Together, fault_window, kubeconfig_via
from localenv.cluster import in_private_netns

# How long "no answer" is waited for: the proxy answers an echo in milliseconds.
SILENCE_SECONDS = 0.5


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    if not in_private_netns():
        pytest.fail("socket tests run inside the test netns: hack/in-netns.sh .venv/bin/pytest …")

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    yield int(server.sockets[0].getsockname()[1])
    server.close()


async def answered(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], data: bytes) -> bool:
    reader, writer = conn
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(1024), SILENCE_SECONDS) == data
    except TimeoutError:
        return False


async def test_the_proxy_forwards_goes_silent_and_comes_back(echo_port: int) -> None:
    with SilentProxy("127.0.0.1", echo_port) as proxy:
        before = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await answered(before, b"ping")
        proxy.silence()
        during = await asyncio.open_connection("127.0.0.1", proxy.port)  # accepted…
        assert not await answered(during, b"hello")  # …and never answered
        assert not await answered(before, b"again")  # an open connection goes quiet too
        proxy.resume()
        after = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert await answered(after, b"back")
        # Silenced connections stay silent: a half-open connection, for the client to find out.
        assert not await answered(before, b"still?")
        for _, writer in (before, during, after):
            writer.close()


@dataclass
class Recorder:
    name: str
    log: list[str]
    fail_heal: bool = False

    def inject(self) -> None:
        self.log.append(f"inject {self.name}")

    def heal(self) -> None:
        self.log.append(f"heal {self.name}")
        if self.fail_heal:
            raise RuntimeError(f"{self.name} would not heal")


async def test_a_fault_is_healed_when_the_block_fails() -> None:
    log: list[str] = []
    with pytest.raises(ValueError, match="cell broke"):
        async with fault_window(Recorder("api", log)) as window:
            raise ValueError("cell broke")
    assert log == ["inject api", "heal api"]
    assert window.cleared_at is not None and window.cleared_at >= window.injected_at


def test_together_heals_every_part_in_reverse_even_when_one_heal_fails() -> None:
    log: list[str] = []
    both = Together("both", [Recorder("a", log, fail_heal=True), Recorder("b", log)])
    both.inject()
    with pytest.raises(RuntimeError, match="a would not heal"):
        both.heal()
    assert log == ["inject a", "inject b", "heal b", "heal a"]


def test_kubeconfig_via_points_every_cluster_at_the_proxy(tmp_path: Path) -> None:
    original = tmp_path / "kubeconfig"
    config = {"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}]}
    original.write_text(yaml.safe_dump(config))
    via = yaml.safe_load(kubeconfig_via(original, 16443, tmp_path / "via").read_text())
    assert via["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:16443"

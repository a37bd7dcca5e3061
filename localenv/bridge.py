"""A TCP bridge between the host's loopback and the private network namespace.

The local environment lives in a network namespace of its own; a browser on the host cannot
reach it. Two relays meet at a Unix socket (a file: visible from both namespaces, no IP
traffic): ``outside`` listens on the host's 127.0.0.1 and hands each connection to the socket;
``inside`` (in the namespace) accepts on the socket and connects to the service there. Only
loopback and a Unix socket are involved, so nothing reaches a host-network address.

    python -m localenv.bridge outside --listen 127.0.0.1:8233 --unix /tmp/ui.sock
    python -m localenv.bridge inside  --unix /tmp/ui.sock --connect 127.0.0.1:8233
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable

CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _splice(
    client_r: asyncio.StreamReader,
    client_w: asyncio.StreamWriter,
    connect: Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]],
) -> None:
    try:
        up_r, up_w = await connect()
    except OSError:
        client_w.close()
        return
    await asyncio.gather(_pipe(client_r, up_w), _pipe(up_r, client_w))


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1"):
        # Never listen or connect beyond loopback: the bridge exists for a local browser.
        raise SystemExit(f"bridge: {text}: only loopback addresses are allowed")
    return host, int(port)


async def outside(listen: str, unix: str) -> None:
    host, port = _host_port(listen)
    server = await asyncio.start_server(
        lambda r, w: _splice(r, w, lambda: asyncio.open_unix_connection(unix)), host, port
    )
    async with server:
        await _until_signalled()


async def inside(unix: str, connect: str) -> None:
    host, port = _host_port(connect)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(unix)
    server = await asyncio.start_unix_server(
        lambda r, w: _splice(r, w, lambda: asyncio.open_connection(host, port)), unix
    )
    os.chmod(unix, 0o600)
    async with server:
        await _until_signalled()


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="loopback ↔ namespace bridge over a Unix socket")
    sub = parser.add_subparsers(dest="side", required=True)
    out = sub.add_parser("outside")
    out.add_argument("--listen", required=True)
    out.add_argument("--unix", required=True)
    ins = sub.add_parser("inside")
    ins.add_argument("--unix", required=True)
    ins.add_argument("--connect", required=True)
    args = parser.parse_args()
    if args.side == "outside":
        asyncio.run(outside(args.listen, args.unix))
    else:
        asyncio.run(inside(args.unix, args.connect))


if __name__ == "__main__":
    main()

"""A TCP proxy in front of Temporal's frontend that can refuse every call as UNAUTHENTICATED.

Temporal's dev server accepts any caller, so it cannot refuse a credential. Forwarding, bytes
pass both ways untouched (as ``localenv.chaos.SilentProxy``). Refusing, the proxy is the gRPC
server itself: it speaks just enough HTTP/2 to answer each call with a trailers-only response
``grpc-status: 16`` (UNAUTHENTICATED), as a frontend does when an API key or a client certificate
has expired or been revoked. Switching closes the open connections, so the client's next call
opens a new one and meets the new behaviour (a real frontend refuses from the next call on).

Its own event loop runs in a thread, so a test that blocks its loop never stalls the traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING, WINDOW_UPDATE, CONTINUATION = 0x0, 0x1, 0x4, 0x6, 0x8, 0x9
ACK, END_STREAM, END_HEADERS = 0x1, 0x1, 0x4
UNAUTHENTICATED = 16


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    head = struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream)
    return head + payload


def _literal(name: str, value: str) -> bytes:
    """HPACK: a literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2);
    every string here is shorter than 127 bytes."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def refusal(message: str) -> bytes:
    """The header block of a trailers-only gRPC response with status UNAUTHENTICATED."""
    return (
        b"\x88"  # :status 200, indexed from the static table
        + _literal("content-type", "application/grpc")
        + _literal("grpc-status", str(UNAUTHENTICATED))
        + _literal("grpc-message", message)
    )


class RefusingProxy:
    def __init__(self, upstream_host: str, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = 0
        self.refusing = False
        self.refused = 0  # calls answered UNAUTHENTICATED
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> RefusingProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._serve, self.host, 0))
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def refuse(self) -> None:
        self._call(self._switch(True))

    def accept(self) -> None:
        self._call(self._switch(False))

    def stop(self) -> None:
        if self._thread.is_alive():
            self._call(self._switch(self.refusing))
            if self._server is not None:
                self._server.close()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> RefusingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _switch(self, refusing: bool) -> None:
        self.refusing = refusing
        for w in list(self._writers):
            w.close()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            if self.refusing:
                await self._refuse(reader, writer)
            else:
                await self._forward(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self._writers.add(up_writer)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while chunk := await src.read(65536):
                    dst.write(chunk)
                    await dst.drain()
            dst.close()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        finally:
            self._writers.discard(up_writer)
            up_writer.close()

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A gRPC server of one answer: every call UNAUTHENTICATED (RFC 9113 framing)."""
        if await reader.readexactly(len(PREFACE)) != PREFACE:
            return
        writer.write(frame(SETTINGS, 0, 0))
        block = refusal("the test's proxy refuses this credential: API key expired")
        while True:
            head = await reader.readexactly(9)
            length = int.from_bytes(head[:3], "big")
            kind, flags = head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = await reader.readexactly(length)
            if kind == SETTINGS and not flags & ACK:
                writer.write(frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                writer.write(frame(PING, ACK, 0, payload))
            elif kind in (HEADERS, CONTINUATION) and flags & END_HEADERS:
                self.refused += 1
                writer.write(frame(HEADERS, END_STREAM | END_HEADERS, stream, block))
            elif kind == DATA and length:
                # Give the connection's window back: the calls' bodies are read and dropped.
                writer.write(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", length)))
            await writer.drain()

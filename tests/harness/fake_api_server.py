"""A fake Kubernetes API server on a loopback socket this test opens itself: lists answer
``items`` at resourceVersion ``list_rv``; each watch request takes the next step of ``script``:

- a list of events: sent as one chunked JSON-lines body, then the stream ends;
- ``"hold"``: headers, then nothing until the client closes the connection;
- ``"410"``: the status 410 Gone;
- ``"reset"``: the connection is closed before any answer.

Once the script is used up, a watch holds. ``silent`` answers no request at all.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client

from kube.client import Kube
from kube.timeouts import KubeTimeouts


class FakeAPIServer:
    def __init__(
        self,
        items: list[dict[str, Any]] | None = None,
        script: list[Any] | None = None,
        silent: bool = False,
        list_rv: str = "100",
    ) -> None:
        self.items = items or []
        self.script = list(script or [])
        self.silent = silent
        self.list_rv = list_rv
        self.lists = 0
        self.watched_from: list[str | None] = []
        self.watches_closed = 0
        self.server: asyncio.Server | None = None

    @property
    def watches(self) -> int:
        return len(self.watched_from)

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def kube(self) -> Kube:
        configuration = client.Configuration()
        configuration.host = self.url
        return Kube(
            client.ApiClient(configuration),
            timeouts=KubeTimeouts(connect=1.0, read=2.0, watch_margin=1.0, connect_retries=0),
        )

    async def __aenter__(self) -> FakeAPIServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if self.silent:
                    await reader.read()  # until the client gives up
                    return
                target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode()
                query = parse_qs(urlsplit(target).query)
                if query.get("watch") == ["true"]:
                    await self._watch(reader, writer, query.get("resourceVersion", [None])[0])
                    return
                self.lists += 1
                body = json.dumps(
                    {"items": self.items, "metadata": {"resourceVersion": self.list_rv}}
                ).encode()
                writer.write(_head(200, len(body)) + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    async def _watch(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rv: str | None
    ) -> None:
        self.watched_from.append(rv)
        step = self.script.pop(0) if self.script else "hold"
        if step == "reset":
            return
        if step == "410":
            body = b'{"kind":"Status","code":410,"reason":"Expired"}'
            writer.write(_head(410, len(body)) + body)
            await writer.drain()
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        if step == "hold":
            await writer.drain()
            await reader.read()  # EOF: the client closed the watch
            self.watches_closed += 1
            return
        lines = b"".join(json.dumps(e).encode() + b"\n" for e in step)
        writer.write(f"{len(lines):x}\r\n".encode() + lines + b"\r\n0\r\n\r\n")
        await writer.drain()


def _head(status: int, length: int) -> bytes:
    phrase = {200: "OK", 410: "Gone"}[status]
    return (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()

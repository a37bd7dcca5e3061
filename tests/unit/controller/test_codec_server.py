"""The codec server over real HTTP on 127.0.0.1 (run inside hack/in-netns.sh): the protocol the
Temporal UI speaks, CORS for its origin, the bearer token, the namespace, errors by key ID."""

from __future__ import annotations

import base64
import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from controller.temporal.codec_server import CodecServer, CodecServerConfig, origin_of
from controller.temporal.payload_codec import KEY_ID_METADATA, AesGcmCodec

UI = "http://127.0.0.1:8233"
TOKEN = "t0ken-for-the-cli"
PLAIN = Payload(metadata={"encoding": b"json/plain"}, data=b'{"model":"laya:en"}')
CODEC = AesGcmCodec({"k1": os.urandom(32)}, "k1")


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[CodecServer]:
    extra: dict[str, Any] = getattr(request, "param", {})
    config = CodecServerConfig(
        port=0, origins=frozenset([origin_of(UI + "/namespaces")]), namespace="default", **extra
    )
    srv = CodecServer(CODEC, config).start()
    yield srv
    srv.stop()


def post(server: CodecServer, path: str, payloads: list[Payload], **headers: str) -> httpx.Response:
    body = json_format.MessageToJson(Payloads(payloads=payloads))
    with httpx.Client(trust_env=False) as c:
        return c.post(
            f"http://127.0.0.1:{server.port}{path}",
            content=body,
            headers={"Content-Type": "application/json", "Origin": UI, **headers},
        )


def payloads_of(response: httpx.Response) -> list[Payload]:
    return list(json_format.Parse(response.text, Payloads()).payloads)


def test_decode_returns_what_the_worker_encrypted(server: CodecServer) -> None:
    [sealed] = CODEC.encrypt_all([PLAIN])
    # The path and query the Temporal UI 2.54 sends.
    r = post(
        server, "/decode?preserveStorageRefs=true", [sealed, PLAIN], **{"X-Namespace": "default"}
    )
    assert r.status_code == 200, r.text
    assert payloads_of(r) == [PLAIN, PLAIN]
    assert r.headers["access-control-allow-origin"] == UI
    # The wire form is what the UI reads: base64 data and metadata in protobuf JSON.
    wire = json.loads(r.text)["payloads"][0]
    assert base64.b64decode(wire["data"]) == PLAIN.data


def test_encode_encrypts(server: CodecServer) -> None:
    r = post(server, "/encode", [PLAIN])
    assert r.status_code == 200, r.text
    [sealed] = payloads_of(r)
    assert sealed.metadata[KEY_ID_METADATA] == b"k1" and b"laya" not in sealed.data
    assert CODEC.decrypt_all([sealed]) == [PLAIN]


def test_preflight_allows_the_ui_origin_only(server: CodecServer) -> None:
    with httpx.Client(trust_env=False) as c:
        url = f"http://127.0.0.1:{server.port}/decode"
        ok = c.options(url, headers={"Origin": UI, "Access-Control-Request-Method": "POST"})
        other = c.options(url, headers={"Origin": "http://evil.example"})
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == UI
    assert "x-namespace" in ok.headers["access-control-allow-headers"]
    assert "POST" in ok.headers["access-control-allow-methods"]
    assert "access-control-allow-origin" not in other.headers


def test_unknown_key_id_is_a_400_naming_it(server: CodecServer) -> None:
    [sealed] = AesGcmCodec({"old-key": os.urandom(32)}, "old-key").encrypt_all([PLAIN])
    r = post(server, "/decode", [sealed])
    assert r.status_code == 400
    assert "'old-key'" in r.text


def test_other_namespace_and_unknown_path_and_garbage(server: CodecServer) -> None:
    assert post(server, "/decode", [PLAIN], **{"X-Namespace": "other"}).status_code == 403
    assert post(server, "/elsewhere", [PLAIN]).status_code == 404
    with httpx.Client(trust_env=False) as c:
        r = c.post(f"http://127.0.0.1:{server.port}/decode", content=b"{not json")
    assert r.status_code == 400
    # Refused before reading: a huge body, and a negative length (read(-1) would read until
    # the client hangs up).
    for length, status in ((64 * 1024 * 1024, b"413"), (-1, b"411")):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(f"POST /decode HTTP/1.1\r\nContent-Length: {length}\r\n\r\n".encode())
            assert s.recv(64).split()[1] == status


@pytest.mark.parametrize("server", [{"token": TOKEN}], indirect=True)
def test_bearer_token_when_configured(server: CodecServer) -> None:
    [sealed] = CODEC.encrypt_all([PLAIN])
    assert post(server, "/decode", [sealed]).status_code == 401
    assert post(server, "/decode", [sealed], Authorization="Bearer nope").status_code == 401
    r = post(server, "/decode", [sealed], Authorization=f"Bearer {TOKEN}")
    assert r.status_code == 200 and payloads_of(r) == [PLAIN]

"""`POST /api/pull` of the runtime simulator: copy a model from a registry into the Pod's store.

As the contract has it: 404 `MODEL_NOT_FOUND` when the registry does not know the tag and 502
`REGISTRY_ERROR` when it cannot be reached or answers garbage, both before the stream starts;
then NDJSON progress (`pulling manifest`, `pulling <12hex>` with digest/total/completed,
`verifying sha256 digest`, `writing manifest`, `success`), where a later failure is the last
line, `{"error", "code"}` with `DIGEST_MISMATCH`, `REGISTRY_ERROR` or `STORAGE_ERROR` (a read-only
store). Blobs come from the descriptor's `urls[0]` when present (its origin replaced by
OLLAYA_HF_ENDPOINT when set; OLLAYA_HF_TOKEN is sent there only, never to the registry), else from
the registry's blob endpoint. The manifest is written last, so a failed pull leaves no model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from simulators.model_names import InvalidModelName, ModelRef, parse_model_name
from simulators.pods import SimPod
from simulators.volumes import store_blob_path, write_blob, write_manifest
from simulators.wire import ApiError, detail_item, json_error, validation_error

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_STATUS_OF_CODE = {"STORAGE_ERROR": 500, "DIGEST_MISMATCH": 500, "REGISTRY_ERROR": 502}
REGISTRY_TIMEOUT = aiohttp.ClientTimeout(total=30)


class _StepError(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


async def _get(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    async with session.get(url, headers=headers, timeout=REGISTRY_TIMEOUT) as response:
        return response.status, await response.read()


async def _fetch_manifest(
    session: aiohttp.ClientSession, ref: ModelRef, name: str
) -> tuple[bytes, list[dict[str, Any]]]:
    accept = {"Accept": "application/vnd.docker.distribution.manifest.v2+json"}
    try:
        status, body = await _get(session, ref.manifest_url, accept)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ApiError(502, f"pull model manifest: {exc}", "REGISTRY_ERROR") from exc
    if status == 404:
        raise ApiError(
            404, f"pull model manifest: model '{name}' not found in registry", "MODEL_NOT_FOUND"
        )
    if not 200 <= status < 300:
        raise ApiError(502, f"pull model manifest: registry answered {status}", "REGISTRY_ERROR")
    try:
        manifest = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(502, "pull model manifest: not JSON", "REGISTRY_ERROR") from exc
    if not isinstance(manifest, dict) or manifest.get("schemaVersion") != 2:
        raise ApiError(502, "pull model manifest: not schema version 2", "REGISTRY_ERROR")
    raw_descriptors: list[Any] = [manifest.get("config"), *(manifest.get("layers") or [])]
    descriptors: list[dict[str, Any]] = []
    for descriptor in raw_descriptors:
        if not (
            isinstance(descriptor, dict)
            and isinstance(descriptor.get("digest"), str)
            and _DIGEST.match(descriptor["digest"])
            and isinstance(descriptor.get("size"), int)
        ):
            raise ApiError(502, "pull model manifest: bad descriptor", "REGISTRY_ERROR")
        descriptors.append(descriptor)
    return body, descriptors


def _blob_source(
    ref: ModelRef, descriptor: dict[str, Any], env: dict[str, str]
) -> tuple[str, dict[str, str]]:
    urls = descriptor.get("urls")
    if isinstance(urls, list) and urls and isinstance(urls[0], str):
        url = urls[0]
        endpoint = env.get("OLLAYA_HF_ENDPOINT", "").strip().rstrip("/")
        if endpoint:
            parts = urlsplit(url)
            url = endpoint + parts.path + (f"?{parts.query}" if parts.query else "")
        token = env.get("OLLAYA_HF_TOKEN", "")
        return url, ({"Authorization": f"Bearer {token}"} if token else {})
    return ref.blob_url(descriptor["digest"]), {}


async def _steps(
    session: aiohttp.ClientSession,
    pod: SimPod,
    ref: ModelRef,
    manifest: bytes,
    descriptors: list[dict[str, Any]],
) -> AsyncIterator[dict[str, Any]]:
    yield {"status": "pulling manifest"}
    store = pod.store_dir
    if store is None or pod.store_read_only:
        raise _StepError(
            f"write {pod.env.get('OLLAYA_MODELS', 'store')}: read-only file system",
            "STORAGE_ERROR",
        )
    for descriptor in descriptors:
        digest: str = descriptor["digest"]
        hex_digest = digest.removeprefix("sha256:")
        size: int = descriptor["size"]
        line = {"status": f"pulling {hex_digest[:12]}", "digest": digest, "total": size}
        yield {**line, "completed": 0}
        existing = store_blob_path(store, digest)
        if existing.is_file() and hashlib.sha256(existing.read_bytes()).hexdigest() == hex_digest:
            yield {**line, "completed": size}
            continue
        url, headers = _blob_source(ref, descriptor, pod.env)
        try:
            status, data = await _get(session, url, headers)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _StepError(f"pull blob {hex_digest[:12]}: {exc}", "REGISTRY_ERROR") from exc
        if not 200 <= status < 300:
            raise _StepError(
                f"pull blob {hex_digest[:12]}: registry answered {status}", "REGISTRY_ERROR"
            )
        if hashlib.sha256(data).hexdigest() != hex_digest:
            raise _StepError(f"digest mismatch for blob {digest}", "DIGEST_MISMATCH")
        try:
            write_blob(store, digest, data)
        except OSError as exc:
            raise _StepError(f"write blob: {exc}", "STORAGE_ERROR") from exc
        yield {**line, "completed": len(data)}
    yield {"status": "verifying sha256 digest"}
    yield {"status": "writing manifest"}
    try:
        write_manifest(store, ref.host, ref.namespace, ref.model, ref.tag, manifest)
    except OSError as exc:
        raise _StepError(f"write manifest: {exc}", "STORAGE_ERROR") from exc
    yield {"status": "success"}


async def _lines(
    session: aiohttp.ClientSession,
    pod: SimPod,
    ref: ModelRef,
    manifest: bytes,
    descriptors: list[dict[str, Any]],
) -> AsyncIterator[dict[str, Any]]:
    try:
        async for line in _steps(session, pod, ref, manifest, descriptors):
            yield line
    except _StepError as err:
        yield {"error": err.message, "code": err.code}


async def handle_pull(
    request: web.Request, pod: SimPod, session: aiohttp.ClientSession, body: Any
) -> web.StreamResponse:
    if not isinstance(body, dict):
        raise validation_error([detail_item(["body"], "body must be an object", "type_error")])
    name = body.get("model", body.get("name"))
    if not isinstance(name, str) or not name.strip():
        raise validation_error([detail_item(["body", "model"], "model is required", "missing")])
    try:
        ref = parse_model_name(name, pod.env.get("OLLAYA_REGISTRY"))
    except InvalidModelName as exc:
        raise ApiError(400, str(exc), "INVALID_MODEL_NAME") from exc
    manifest, descriptors = await _fetch_manifest(session, ref, name)
    lines = _lines(session, pod, ref, manifest, descriptors)
    if body.get("stream") is False:
        last: dict[str, Any] = {}
        async for line in lines:
            last = line
        if "error" in last:
            return json_error(_STATUS_OF_CODE.get(last["code"], 500), last["error"], last["code"])
        return web.json_response({"status": "success"})
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    async for line in lines:
        await response.write(json.dumps(line).encode() + b"\n")
    await response.write_eof()
    return response

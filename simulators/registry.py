"""The Ollaya registry simulator (Docker registry v2 API subset, RUNTIME_API.md "Registry").

Registry API:

- `GET /v2/` → `{}`.
- `GET`/`HEAD /v2/<ns>/<model>/manifests/<tag>` → the schema-2 manifest bytes
  (`Content-Type: application/vnd.docker.distribution.manifest.v2+json`,
  `Docker-Content-Digest: sha256:<hex>`); the model digest is sha256 of exactly these bytes.
  Unknown → 404 `{"errors":[{"code":"MANIFEST_UNKNOWN",…}],"error":…,"code":"MANIFEST_UNKNOWN"}`.
- `GET`/`HEAD /v2/<ns>/<model>/blobs/sha256:<hex>` → blob bytes; unknown → 404 `BLOB_UNKNOWN`.
- `GET /_weights/<hex>`: a stand-in weight host (Hugging Face) for layers whose profile sets
  `weights_url` (their descriptor then carries `urls: ["<weights_url>/<hex>"]`).

Admin API under `/_sim/` (for tests in other processes; never logged):

- `PUT /_sim/models/<ns>/<model>/<tag>` body: ModelProfile fields, all optional →
  `{"name","digest","manifest_path","size"}`; `DELETE` the same path; `GET /_sim/models`.
- `PUT /_sim/faults` (optionally `/_sim/faults/<ns>/<model>/<tag>`), `GET`, `DELETE`
  (simulators.registry_faults).
- `GET /_sim/requests` → `{"requests":[{"method","path","query","headers","authorization"}]}`:
  every registry request, headers without `Authorization` (`authorization` says whether one was
  sent); `DELETE /_sim/requests` empties it.
- `POST /_sim/reset`: default catalogue, no faults, empty request log.

The catalogue starts as simulators.catalogue.DEFAULT_CATALOGUE, or as saved in
`<state-dir>/registry-catalogue.json` from an earlier run.

Run: `python -m simulators.registry --host 127.0.0.1 --port N --state-dir DIR`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from aiohttp import web
from pydantic import ValidationError

from simulators.catalogue import (
    DEFAULT_CATALOGUE,
    MANIFEST_MEDIA_TYPE,
    ModelArtifact,
    ModelProfile,
    build_artifact,
)
from simulators.registry_faults import FaultBook, RegistryFault
from simulators.wire import ApiError, detail_item, error_middleware, validation_error

CATALOGUE_FILE = "registry-catalogue.json"
MAX_LOGGED_REQUESTS = 10_000
MOVED_SUFFIX = "+moved"

_PART = re.compile(r"^[a-z0-9_][a-z0-9_.-]{0,79}$")
_BLOB_DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _check_name(ns: str, model: str, tag: str) -> None:
    for part, what in ((ns, "namespace"), (model, "model"), (tag, "tag")):
        if not _PART.match(part):
            raise ApiError(400, f"invalid {what} {part!r}", "INVALID_MODEL_NAME")


def _registry_error(status: int, code: str, message: str) -> web.Response:
    body = {"errors": [{"code": code, "message": message}], "error": message, "code": code}
    return web.json_response(body, status=status)


class RegistryState:
    """The catalogue, faults and request log; usable in-process (`app[REGISTRY]`)."""

    def __init__(self, state_dir: Path | None = None, *, default_catalogue: bool = True) -> None:
        self.state_dir = state_dir
        self._use_default = default_catalogue
        self.entries: dict[str, ModelArtifact] = {}
        self._moved: dict[str, ModelArtifact] = {}
        self.faults = FaultBook()
        self.requests: list[dict[str, Any]] = []
        saved = self._saved_catalogue()
        if saved is not None:
            for key, profile in saved.items():
                self._install(key, profile)
        else:
            self.reset()

    # -- catalogue ------------------------------------------------------------------------------

    def _saved_catalogue(self) -> dict[str, ModelProfile] | None:
        if self.state_dir is None:
            return None
        path = self.state_dir / CATALOGUE_FILE
        if not path.is_file():
            return None
        raw = json.loads(path.read_text())
        return {key: ModelProfile.model_validate(value) for key, value in raw.items()}

    def _save(self) -> None:
        if self.state_dir is None:
            return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = {key: a.profile.model_dump() for key, a in self.entries.items()}
        tmp = self.state_dir / f".{CATALOGUE_FILE}.tmp"
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
        tmp.replace(self.state_dir / CATALOGUE_FILE)

    def _install(self, key: str, profile: ModelProfile) -> ModelArtifact:
        repo, _, tag = key.partition(":")
        # Built once: the served bytes (and so the digest) stay stable for the entry's life.
        artifact = build_artifact(repo, tag, profile)
        self.entries[key] = artifact
        self._moved.pop(key, None)
        return artifact

    def reset(self) -> None:
        self.entries.clear()
        self._moved.clear()
        if self._use_default:
            for key, profile in DEFAULT_CATALOGUE.items():
                self._install(key, profile)
        self.faults.clear()
        self.requests.clear()
        self._save()

    def put_model(self, ns: str, model: str, tag: str, profile: ModelProfile) -> ModelArtifact:
        artifact = self._install(f"{ns}/{model}:{tag}", profile)
        self._save()
        return artifact

    def delete_model(self, ns: str, model: str, tag: str) -> bool:
        key = f"{ns}/{model}:{tag}"
        found = self.entries.pop(key, None) is not None
        self._moved.pop(key, None)
        self._save()
        return found

    def moved_artifact(self, key: str) -> ModelArtifact:
        """The bytes a moved tag serves: the same model under a changed revision."""
        if key not in self._moved:
            current = self.entries[key]
            profile = current.profile.model_copy(
                update={"revision": current.profile.revision + MOVED_SUFFIX}
            )
            self._moved[key] = build_artifact(current.name, current.tag, profile)
        return self._moved[key]

    def blob(self, hex_digest: str) -> bytes | None:
        for artifact in (*self.entries.values(), *self._moved.values()):
            if hex_digest in artifact.blobs:
                return artifact.blobs[hex_digest]
        return None

    # -- request log ----------------------------------------------------------------------------

    def log_request(self, request: web.Request) -> None:
        headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        self.requests.append(
            {
                "method": request.method,
                "path": request.path,
                "query": request.query_string,
                "headers": headers,
                "authorization": "Authorization" in request.headers,
            }
        )
        del self.requests[:-MAX_LOGGED_REQUESTS]


REGISTRY = web.AppKey("registry_state", RegistryState)


def _state(request: web.Request) -> RegistryState:
    return request.app[REGISTRY]


@web.middleware
async def _log_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith("/_sim/"):
        _state(request).log_request(request)
    return await handler(request)


async def _apply_fault(
    state: RegistryState, kind: Literal["manifest", "blob"], repo: str, tag: str | None
) -> web.Response | None:
    fault = state.faults.response_fault(kind, repo, tag)
    if fault is None:
        return None
    if fault.delay_seconds > 0:
        await asyncio.sleep(fault.delay_seconds)
    if fault.status is None and fault.body is None:
        return None
    status = fault.status or 200
    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
    if fault.body is not None:
        default_type = MANIFEST_MEDIA_TYPE if kind == "manifest" else "application/octet-stream"
        headers["Content-Type"] = fault.content_type or default_type
        return web.Response(status=status, body=fault.body.encode(), headers=headers)
    code = "TOOMANYREQUESTS" if status == 429 else "UNAVAILABLE"
    response = _registry_error(status, code, f"simulated registry fault ({status})")
    response.headers.update(headers)
    return response


async def _manifest(request: web.Request) -> web.StreamResponse:
    state = _state(request)
    ns, model, tag = (request.match_info[k] for k in ("ns", "model", "tag"))
    repo, key = f"{ns}/{model}", f"{ns}/{model}:{tag}"
    faulted = await _apply_fault(state, "manifest", repo, tag)
    if faulted is not None:
        return faulted
    if key not in state.entries:
        return _registry_error(404, "MANIFEST_UNKNOWN", f"manifest unknown: {key}")
    artifact = state.entries[key]
    if state.faults.moved_read(repo, tag):
        artifact = state.moved_artifact(key)
    return web.Response(
        body=artifact.manifest,
        headers={
            "Content-Type": MANIFEST_MEDIA_TYPE,
            "Docker-Content-Digest": f"sha256:{artifact.digest}",
        },
    )


async def _blob(request: web.Request) -> web.StreamResponse:
    state = _state(request)
    ns, model, digest = (request.match_info[k] for k in ("ns", "model", "digest"))
    faulted = await _apply_fault(state, "blob", f"{ns}/{model}", None)
    if faulted is not None:
        return faulted
    match = _BLOB_DIGEST.match(digest)
    data = state.blob(match.group(1)) if match else None
    if data is None:
        return _registry_error(404, "BLOB_UNKNOWN", f"blob unknown: {digest}")
    return web.Response(
        body=data,
        headers={"Content-Type": "application/octet-stream", "Docker-Content-Digest": digest},
    )


async def _weights(request: web.Request) -> web.StreamResponse:
    """A stand-in for the weight host (Hugging Face) that `urls[0]` of a layer may name."""
    state = _state(request)
    # Unscoped blob faults hit the weight host too (it has no <ns>/<model> to scope by).
    faulted = await _apply_fault(state, "blob", "", None)
    if faulted is not None:
        return faulted
    data = state.blob(request.match_info["hex"])
    if data is None:
        return _registry_error(404, "BLOB_UNKNOWN", "no such weights")
    return web.Response(body=data, headers={"Content-Type": "application/octet-stream"})


async def _version_check(request: web.Request) -> web.Response:
    return web.json_response({})


# -- admin ------------------------------------------------------------------------------------


async def _json_object(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"invalid JSON body: {exc}", "BAD_REQUEST") from exc
    if not isinstance(body, dict):
        raise validation_error([detail_item(["body"], "body must be an object", "type_error")])
    return body


def _pydantic_422(exc: ValidationError) -> ApiError:
    return validation_error(
        [
            detail_item(["body", *(str(p) for p in e["loc"])], e["msg"], e["type"])
            for e in exc.errors()
        ]
    )


def _model_view(key: str, artifact: ModelArtifact) -> dict[str, Any]:
    return {
        "name": key,
        "digest": artifact.digest,
        "manifest_path": f"/v2/{artifact.name}/manifests/{artifact.tag}",
        "size": len(artifact.manifest),
        "profile": artifact.profile.model_dump(),
    }


async def _put_model(request: web.Request) -> web.Response:
    ns, model, tag = (request.match_info[k] for k in ("ns", "model", "tag"))
    _check_name(ns, model, tag)
    try:
        profile = ModelProfile.model_validate(await _json_object(request))
    except ValidationError as exc:
        raise _pydantic_422(exc) from exc
    artifact = _state(request).put_model(ns, model, tag, profile)
    return web.json_response(_model_view(f"{ns}/{model}:{tag}", artifact))


async def _delete_model(request: web.Request) -> web.Response:
    ns, model, tag = (request.match_info[k] for k in ("ns", "model", "tag"))
    if not _state(request).delete_model(ns, model, tag):
        raise ApiError(404, f"no model {ns}/{model}:{tag}", "MANIFEST_UNKNOWN")
    return web.json_response({"deleted": f"{ns}/{model}:{tag}"})


async def _get_model(request: web.Request) -> web.Response:
    ns, model, tag = (request.match_info[k] for k in ("ns", "model", "tag"))
    key = f"{ns}/{model}:{tag}"
    artifact = _state(request).entries.get(key)
    if artifact is None:
        raise ApiError(404, f"no model {key}", "MANIFEST_UNKNOWN")
    return web.json_response(_model_view(key, artifact))


async def _list_models(request: web.Request) -> web.Response:
    entries = _state(request).entries
    return web.json_response({"models": [_model_view(k, a) for k, a in sorted(entries.items())]})


def _faults_view(state: RegistryState) -> web.Response:
    return web.json_response({"faults": [f.model_dump() for f in state.faults.list()]})


def _scope(match_info: Mapping[str, str]) -> str | None:
    if "ns" not in match_info:
        return None
    ns, model, tag = match_info["ns"], match_info["model"], match_info["tag"]
    _check_name(ns, model, tag)
    return f"{ns}/{model}:{tag}"


async def _put_fault(request: web.Request) -> web.Response:
    body = await _json_object(request)
    scope = _scope(request.match_info)
    if scope is not None:
        body["model"] = scope
    try:
        fault = RegistryFault.model_validate(body)
    except ValidationError as exc:
        raise _pydantic_422(exc) from exc
    state = _state(request)
    state.faults.set(fault)
    return _faults_view(state)


async def _delete_faults(request: web.Request) -> web.Response:
    state = _state(request)
    state.faults.clear(_scope(request.match_info) or request.query.get("model"))
    return _faults_view(state)


async def _get_faults(request: web.Request) -> web.Response:
    return _faults_view(_state(request))


async def _get_requests(request: web.Request) -> web.Response:
    return web.json_response({"requests": _state(request).requests})


async def _delete_requests(request: web.Request) -> web.Response:
    _state(request).requests.clear()
    return web.json_response({"requests": []})


async def _reset(request: web.Request) -> web.Response:
    _state(request).reset()
    return web.json_response({"reset": True})


def make_app(state_dir: Path | None = None, *, default_catalogue: bool = True) -> web.Application:
    """The registry simulator as an aiohttp app; its state is `app[REGISTRY]`."""
    app = web.Application(middlewares=[error_middleware, _log_middleware])
    app[REGISTRY] = RegistryState(state_dir, default_catalogue=default_catalogue)
    r = app.router
    r.add_get("/v2/", _version_check)
    r.add_get("/v2/{ns}/{model}/manifests/{tag}", _manifest)
    r.add_get("/v2/{ns}/{model}/blobs/{digest}", _blob)
    r.add_get("/_weights/{hex}", _weights)
    model_path = "/_sim/models/{ns}/{model}/{tag}"
    r.add_put(model_path, _put_model)
    r.add_delete(model_path, _delete_model)
    r.add_get(model_path, _get_model)
    r.add_get("/_sim/models", _list_models)
    for path in ("/_sim/faults", "/_sim/faults/{ns}/{model}/{tag}"):
        r.add_put(path, _put_fault)
        r.add_delete(path, _delete_faults)
    r.add_get("/_sim/faults", _get_faults)
    r.add_get("/_sim/requests", _get_requests)
    r.add_delete("/_sim/requests", _delete_requests)
    r.add_post("/_sim/reset", _reset)
    return app


def main(argv: list[str] | None = None) -> None:
    from simulators.serve import serve_until_signal

    parser = argparse.ArgumentParser(prog="python -m simulators.registry", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--ready-file", type=Path, default=None)
    args = parser.parse_args(argv)
    app = make_app(args.state_dir)
    asyncio.run(serve_until_signal(app, args.host, args.port, ready_file=args.ready_file))


if __name__ == "__main__":
    main()

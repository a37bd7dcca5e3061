from __future__ import annotations

import hashlib
import json
import socket
from typing import Any

import httpx

from simulators.volumes import store_manifest_path

POD = "127.0.0.2"


def lines(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def add_pulling_pod(runtime: Any, registry: Any, **overrides: Any) -> Any:
    env = {"OLLAYA_REGISTRY": registry.base, "OLLAYA_MODELS": "/models"}
    env.update(overrides.pop("env", {}))
    return runtime.add_pod(POD, env=env, **overrides)


def registry_store_path(pod: Any, registry: Any, tag: str = "en") -> Any:
    host = registry.base.removeprefix("http://")
    return store_manifest_path(pod.store_dir, host, "library", "laya", tag)


async def test_pull_streams_progress_and_fills_the_store(
    runtime: Any, registry: Any, http: httpx.AsyncClient
) -> None:
    pod = add_pulling_pod(runtime, registry)
    response = await http.post(runtime.url(POD, "/api/pull"), json={"model": "laya:en"})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/x-ndjson")
    progress = lines(response)
    statuses = [line["status"] for line in progress]
    manifest = registry.state.entries["library/laya:en"]
    config_hex = json.loads(manifest.manifest)["config"]["digest"].removeprefix("sha256:")
    assert statuses[0] == "pulling manifest"
    assert f"pulling {config_hex[:12]}" in statuses
    assert statuses[-3:] == ["verifying sha256 digest", "writing manifest", "success"]
    blob_lines = [line for line in progress if "digest" in line]
    assert all(line["total"] > 0 and "completed" in line for line in blob_lines)
    assert blob_lines[-1]["completed"] == blob_lines[-1]["total"]
    stored = registry_store_path(pod, registry).read_bytes()
    assert stored == manifest.manifest
    assert hashlib.sha256(stored).hexdigest() == manifest.digest
    # What was pulled loads and reports the registry digest.
    load = await http.post(runtime.url(POD, "/api/decide"), json={"model": "laya:en"})
    assert load.status_code == 200
    ps = (await http.get(runtime.url(POD, "/api/ps"))).json()
    assert ps["models"][0]["digest"] == manifest.digest
    # A second pull finds the blobs already there and still succeeds.
    again = await http.post(
        runtime.url(POD, "/api/pull"), json={"model": "laya:en", "stream": False}
    )
    assert again.json() == {"status": "success"}


async def test_pull_unknown_tag_is_404(
    runtime: Any, registry: Any, http: httpx.AsyncClient
) -> None:
    add_pulling_pod(runtime, registry)
    response = await http.post(runtime.url(POD, "/api/pull"), json={"model": "laya:nope"})
    assert response.status_code == 404
    assert response.json()["code"] == "MODEL_NOT_FOUND"
    assert "not found in registry" in response.json()["error"]


async def test_pull_unreachable_registry_is_502(runtime: Any, http: httpx.AsyncClient) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    runtime.add_pod(POD, env={"OLLAYA_REGISTRY": f"http://127.0.0.1:{closed_port}"})
    response = await http.post(runtime.url(POD, "/api/pull"), json={"model": "laya:en"})
    assert response.status_code == 502 and response.json()["code"] == "REGISTRY_ERROR"


async def test_pull_registry_faults_are_502(
    runtime: Any, registry: Any, http: httpx.AsyncClient
) -> None:
    add_pulling_pod(runtime, registry)
    for fault in (
        {"status": 200, "body": "not json"},
        {"status": 503},
        {"status": 200, "body": "[]"},
    ):
        await http.put(f"{registry.base}/_sim/faults", json=fault)
        response = await http.post(runtime.url(POD, "/api/pull"), json={"model": "laya:en"})
        assert response.status_code == 502, fault
        assert response.json()["code"] == "REGISTRY_ERROR"
        await http.delete(f"{registry.base}/_sim/faults")


async def test_pull_into_read_only_store_fails_with_storage_error(
    runtime: Any, registry: Any, http: httpx.AsyncClient
) -> None:
    pod = add_pulling_pod(runtime, registry, store_read_only=True)
    response = await http.post(runtime.url(POD, "/api/pull"), json={"model": "laya:en"})
    assert response.status_code == 200
    progress = lines(response)
    assert progress[0] == {"status": "pulling manifest"}
    assert progress[-1]["code"] == "STORAGE_ERROR" and progress[-1]["error"]
    assert not registry_store_path(pod, registry).exists()
    flat = await http.post(
        runtime.url(POD, "/api/pull"), json={"model": "laya:en", "stream": False}
    )
    assert flat.status_code == 500 and flat.json()["code"] == "STORAGE_ERROR"


async def test_pull_detects_corrupt_blobs(
    runtime: Any, registry: Any, http: httpx.AsyncClient
) -> None:
    pod = add_pulling_pod(runtime, registry)
    await http.put(
        f"{registry.base}/_sim/faults", json={"target": "blob", "status": 200, "body": "corrupt"}
    )
    response = await http.post(runtime.url(POD, "/api/pull"), json={"model": "laya:en"})
    assert lines(response)[-1]["code"] == "DIGEST_MISMATCH"
    assert not registry_store_path(pod, registry).exists()
    await http.put(f"{registry.base}/_sim/faults", json={"target": "blob", "status": 500})
    response = await http.post(runtime.url(POD, "/api/pull"), json={"model": "laya:en"})
    assert lines(response)[-1]["code"] == "REGISTRY_ERROR"


async def test_download_token_goes_to_the_weight_host_only(
    runtime: Any, registry: Any, http: httpx.AsyncClient
) -> None:
    created = await http.put(
        f"{registry.base}/_sim/models/library/laya/hf",
        json={"weights_url": f"{registry.base}/_weights"},
    )
    digest = created.json()["digest"]
    pod = add_pulling_pod(runtime, registry, env={"OLLAYA_HF_TOKEN": "hf_s3cret"})
    await http.delete(f"{registry.base}/_sim/requests")
    response = await http.post(runtime.url(POD, "/api/pull"), json={"model": "laya:hf"})
    assert lines(response)[-1] == {"status": "success"}
    log = (await http.get(f"{registry.base}/_sim/requests")).json()["requests"]
    by_path = {entry["path"]: entry["authorization"] for entry in log}
    weights = [p for p in by_path if p.startswith("/_weights/")]
    assert len(weights) == 1 and by_path[weights[0]] is True
    assert all(not auth for p, auth in by_path.items() if p.startswith("/v2/"))
    assert "hf_s3cret" not in json.dumps(log)
    stored = registry_store_path(pod, registry, tag="hf").read_bytes()
    assert hashlib.sha256(stored).hexdigest() == digest


async def test_pull_validation(runtime: Any, registry: Any, http: httpx.AsyncClient) -> None:
    add_pulling_pod(runtime, registry)
    missing = await http.post(runtime.url(POD, "/api/pull"), json={"stream": False})
    assert missing.status_code == 422
    bad = await http.post(runtime.url(POD, "/api/pull"), json={"model": "a/b/c/d"})
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_MODEL_NAME"


async def test_pull_honours_the_scheme_of_the_host(
    runtime: Any, registry: Any, http: httpx.AsyncClient
) -> None:
    # RUNTIME_API.md: a host may carry http://; the pull then speaks plain HTTP to that host,
    # without any OLLAYA_REGISTRY.
    pod = runtime.add_pod(POD, env={"OLLAYA_MODELS": "/models"})
    name = f"{registry.base}/library/laya:en"
    response = await http.post(runtime.url(POD, "/api/pull"), json={"model": name})
    assert response.status_code == 200 and lines(response)[-1] == {"status": "success"}
    manifest = registry.state.entries["library/laya:en"].manifest
    assert registry_store_path(pod, registry).read_bytes() == manifest


async def test_a_host_without_a_scheme_is_pulled_over_https(
    runtime: Any, registry: Any, http: httpx.AsyncClient
) -> None:
    # ...and without a scheme the host is https, even when OLLAYA_REGISTRY names the same host
    # over http (that variable is for host-less names): TLS to a plain-HTTP server fails.
    add_pulling_pod(runtime, registry)
    host = registry.base.removeprefix("http://")
    response = await http.post(
        runtime.url(POD, "/api/pull"), json={"model": f"{host}/library/laya:en"}
    )
    assert response.status_code == 502 and response.json()["code"] == "REGISTRY_ERROR"
    assert registry.state.requests == []

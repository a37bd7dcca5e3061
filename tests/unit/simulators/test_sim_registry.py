from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import httpx

from simulators import registry as registry_module
from simulators.catalogue import DEFAULT_CATALOGUE, MANIFEST_MEDIA_TYPE, build_manifest

MANIFEST = "/v2/library/laya/manifests/en"


async def test_default_catalogue_is_served(registry: Any, http: httpx.AsyncClient) -> None:
    assert (await http.get(f"{registry.base}/v2/")).json() == {}
    for key, profile in DEFAULT_CATALOGUE.items():
        repo, _, tag = key.partition(":")
        response = await http.get(f"{registry.base}/v2/{repo}/manifests/{tag}")
        assert response.status_code == 200
        assert response.headers["Content-Type"] == MANIFEST_MEDIA_TYPE
        assert response.content == build_manifest(repo, tag, profile)
        digest = hashlib.sha256(response.content).hexdigest()
        assert response.headers["Docker-Content-Digest"] == f"sha256:{digest}"


async def test_head_and_blobs(registry: Any, http: httpx.AsyncClient) -> None:
    get = await http.get(registry.base + MANIFEST)
    head = await http.head(registry.base + MANIFEST)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["Docker-Content-Digest"] == get.headers["Docker-Content-Digest"]
    manifest = get.json()
    for descriptor in [manifest["config"], *manifest["layers"]]:
        blob = await http.get(f"{registry.base}/v2/library/laya/blobs/{descriptor['digest']}")
        assert blob.status_code == 200
        assert f"sha256:{hashlib.sha256(blob.content).hexdigest()}" == descriptor["digest"]
    missing = await http.get(f"{registry.base}/v2/library/laya/blobs/sha256:{'0' * 64}")
    assert missing.status_code == 404 and missing.json()["code"] == "BLOB_UNKNOWN"


async def test_unknown_tag_is_404(registry: Any, http: httpx.AsyncClient) -> None:
    response = await http.get(f"{registry.base}/v2/library/laya/manifests/nope")
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == "MANIFEST_UNKNOWN"
    assert body["errors"][0]["code"] == "MANIFEST_UNKNOWN"


async def test_admin_models(registry: Any, http: httpx.AsyncClient) -> None:
    path = f"{registry.base}/_sim/models/acme/laya/v1"
    created = await http.put(path, json={"accuracy": 0.61, "revision": "a"})
    assert created.status_code == 200
    body = created.json()
    assert body["manifest_path"] == "/v2/acme/laya/manifests/v1"
    served = await http.get(registry.base + body["manifest_path"])
    assert hashlib.sha256(served.content).hexdigest() == body["digest"]
    assert json.loads(served.json()["annotations"]["dev.dmrollout.sim/profile"])["accuracy"] == 0.61
    # Same profile, same bytes; another revision, another digest.
    assert (await http.put(path, json={"accuracy": 0.61, "revision": "a"})).json()["digest"] == (
        body["digest"]
    )
    moved = (await http.put(path, json={"accuracy": 0.61, "revision": "b"})).json()
    assert moved["digest"] != body["digest"]
    listed = (await http.get(f"{registry.base}/_sim/models")).json()["models"]
    assert "acme/laya:v1" in {m["name"] for m in listed}
    assert (await http.get(path)).json()["digest"] == moved["digest"]
    assert (await http.delete(path)).status_code == 200
    assert (await http.get(registry.base + body["manifest_path"])).status_code == 404
    assert (await http.delete(path)).status_code == 404


async def test_admin_validation(registry: Any, http: httpx.AsyncClient) -> None:
    bad = await http.put(f"{registry.base}/_sim/models/acme/laya/v1", json={"confidence": 2})
    assert bad.status_code == 422
    assert bad.json()["code"] == "VALIDATION_ERROR"
    assert bad.json()["detail"][0]["loc"] == ["body", "confidence"]
    typo = await http.put(f"{registry.base}/_sim/models/acme/laya/v1", json={"acuracy": 0.3})
    assert typo.status_code == 422
    name = await http.put(f"{registry.base}/_sim/models/acme/La%20ya/v1", json={})
    assert name.status_code == 400
    fault = await http.put(f"{registry.base}/_sim/faults", json={"status": 9999})
    assert fault.status_code == 422


async def test_throttling_fault_counts_down(registry: Any, http: httpx.AsyncClient) -> None:
    await http.put(
        f"{registry.base}/_sim/faults", json={"status": 429, "count": 2, "retry_after": 1}
    )
    for _ in range(2):
        response = await http.get(registry.base + MANIFEST)
        assert response.status_code == 429
        assert response.headers["Retry-After"] == "1"
    assert (await http.get(registry.base + MANIFEST)).status_code == 200
    assert (await http.get(f"{registry.base}/_sim/faults")).json() == {"faults": []}


async def test_server_error_fault_and_clear(registry: Any, http: httpx.AsyncClient) -> None:
    await http.put(f"{registry.base}/_sim/faults", json={"status": 503})
    for _ in range(3):
        assert (await http.get(registry.base + MANIFEST)).status_code == 503
    # Blobs are not hit by a manifest fault.
    manifest_digest = json.loads(
        build_manifest("library/laya", "en", DEFAULT_CATALOGUE["library/laya:en"])
    )
    config = manifest_digest["config"]["digest"]
    assert (await http.get(f"{registry.base}/v2/library/laya/blobs/{config}")).status_code == 200
    await http.delete(f"{registry.base}/_sim/faults")
    assert (await http.get(registry.base + MANIFEST)).status_code == 200


async def test_scoped_fault_hits_only_its_model(registry: Any, http: httpx.AsyncClient) -> None:
    await http.put(f"{registry.base}/_sim/faults/library/laya/en", json={"status": 500})
    assert (await http.get(registry.base + MANIFEST)).status_code == 500
    other = await http.get(f"{registry.base}/v2/library/laya/manifests/multilingual")
    assert other.status_code == 200
    await http.put(
        f"{registry.base}/_sim/faults", json={"model": "library/nli:latest", "status": 502}
    )
    assert (await http.get(f"{registry.base}/v2/library/nli/manifests/latest")).status_code == 502
    await http.delete(f"{registry.base}/_sim/faults", params={"model": "library/laya:en"})
    assert (await http.get(registry.base + MANIFEST)).status_code == 200
    assert (await http.get(f"{registry.base}/v2/library/nli/manifests/latest")).status_code == 502
    await http.delete(f"{registry.base}/_sim/faults/library/nli/latest")
    assert (await http.get(f"{registry.base}/v2/library/nli/manifests/latest")).status_code == 200


async def test_blob_target_fault(registry: Any, http: httpx.AsyncClient) -> None:
    await http.put(
        f"{registry.base}/_sim/faults",
        json={"target": "blob", "status": 200, "body": "corrupt", "count": 1},
    )
    manifest = (await http.get(registry.base + MANIFEST)).json()
    blob_url = f"{registry.base}/v2/library/laya/blobs/{manifest['config']['digest']}"
    assert (await http.get(blob_url)).content == b"corrupt"
    assert (await http.get(blob_url)).content != b"corrupt"


async def test_slow_fault(registry: Any, http: httpx.AsyncClient) -> None:
    await http.put(f"{registry.base}/_sim/faults", json={"delay_seconds": 0.5, "count": 1})
    started = time.monotonic()
    slow = await http.get(registry.base + MANIFEST)
    elapsed = time.monotonic() - started
    assert slow.status_code == 200 and elapsed >= 0.5
    started = time.monotonic()
    await http.get(registry.base + MANIFEST)
    assert time.monotonic() - started < 0.5  # count 1: the fault is spent


async def test_garbage_fault(registry: Any, http: httpx.AsyncClient) -> None:
    await http.put(f"{registry.base}/_sim/faults", json={"status": 200, "body": "not json"})
    response = await http.get(registry.base + MANIFEST)
    assert response.status_code == 200 and response.content == b"not json"


async def test_tag_moved_changes_digest_on_second_read(
    registry: Any, http: httpx.AsyncClient
) -> None:
    before = (await http.get(registry.base + MANIFEST)).content
    await http.put(f"{registry.base}/_sim/faults/library/laya/en", json={"tag_moved": True})
    first = await http.get(registry.base + MANIFEST)
    second = await http.get(registry.base + MANIFEST)
    third = await http.get(registry.base + MANIFEST)
    assert first.content == before
    assert second.content != before and third.content == second.content
    assert second.headers["Docker-Content-Digest"] == (
        f"sha256:{hashlib.sha256(second.content).hexdigest()}"
    )
    # The moved manifest's blobs can be pulled too.
    for descriptor in [second.json()["config"], *second.json()["layers"]]:
        blob = await http.get(f"{registry.base}/v2/library/laya/blobs/{descriptor['digest']}")
        assert blob.status_code == 200
    await http.delete(f"{registry.base}/_sim/faults")
    assert (await http.get(registry.base + MANIFEST)).content == before


async def test_request_log_hides_credentials(registry: Any, http: httpx.AsyncClient) -> None:
    await http.get(registry.base + MANIFEST, headers={"Authorization": "Bearer s3cret"})
    await http.get(registry.base + MANIFEST, headers={"X-Probe": "1"})
    await http.get(f"{registry.base}/_sim/models")
    log = (await http.get(f"{registry.base}/_sim/requests")).json()["requests"]
    assert [entry["path"] for entry in log] == [MANIFEST, MANIFEST]
    assert [entry["authorization"] for entry in log] == [True, False]
    assert "s3cret" not in json.dumps(log)
    assert log[1]["headers"]["X-Probe"] == "1" and log[0]["method"] == "GET"
    await http.delete(f"{registry.base}/_sim/requests")
    assert (await http.get(f"{registry.base}/_sim/requests")).json() == {"requests": []}


async def test_reset_and_persistence(
    registry: Any, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await http.put(f"{registry.base}/_sim/models/acme/x/v1", json={"accuracy": 0.3})
    await http.delete(f"{registry.base}/_sim/models/library/nli/latest")
    await http.put(f"{registry.base}/_sim/faults", json={"status": 503})
    # A restarted registry with the same state dir serves the same catalogue.
    again = registry_module.RegistryState(tmp_path / "registry-state")
    assert set(again.entries) == {"library/laya:en", "library/laya:multilingual", "acme/x:v1"}
    assert again.entries["acme/x:v1"].digest == registry.state.entries["acme/x:v1"].digest
    assert (await http.post(f"{registry.base}/_sim/reset")).status_code == 200
    assert set(registry.state.entries) == set(DEFAULT_CATALOGUE)
    assert (await http.get(registry.base + MANIFEST)).status_code == 200


async def test_concurrent_reads_see_stable_bytes(registry: Any, http: httpx.AsyncClient) -> None:
    bodies = await asyncio.gather(*(http.get(registry.base + MANIFEST) for _ in range(10)))
    assert len({b.content for b in bodies}) == 1

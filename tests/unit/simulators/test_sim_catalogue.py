from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from simulators.catalogue import (
    DEFAULT_CATALOGUE,
    MANIFEST_MEDIA_TYPE,
    PROFILE_ANNOTATION,
    ModelProfile,
    build_artifact,
    build_manifest,
)
from simulators.keep_alive import keep_alive_seconds, parse_duration
from simulators.model_names import InvalidModelName, display_name, parse_model_name
from simulators.store import StoreError, read_stored_model
from simulators.volumes import (
    host_dir_name,
    store_blob_path,
    store_manifest_path,
    volume_dir,
    write_model_to_store,
)


def test_manifest_is_schema2_and_deterministic() -> None:
    profile = ModelProfile(accuracy=0.7, confidence=0.9)
    artifact = build_artifact("library/laya", "en", profile)
    assert build_manifest("library/laya", "en", profile) == artifact.manifest
    assert artifact.digest == hashlib.sha256(artifact.manifest).hexdigest()
    manifest = json.loads(artifact.manifest)
    assert manifest["schemaVersion"] == 2
    assert manifest["mediaType"] == MANIFEST_MEDIA_TYPE
    for descriptor in [manifest["config"], *manifest["layers"]]:
        hex_digest = descriptor["digest"].removeprefix("sha256:")
        blob = artifact.blobs[hex_digest]
        assert hashlib.sha256(blob).hexdigest() == hex_digest
        assert descriptor["size"] == len(blob) and descriptor["mediaType"]
    assert json.loads(manifest["annotations"][PROFILE_ANNOTATION])["accuracy"] == 0.7


def test_revision_name_and_tag_change_the_digest() -> None:
    base = build_artifact("library/laya", "en", ModelProfile()).digest
    assert build_artifact("library/laya", "en", ModelProfile(revision="2")).digest != base
    assert build_artifact("library/laya", "fr", ModelProfile()).digest != base
    assert build_artifact("acme/laya", "en", ModelProfile()).digest != base


def test_profile_round_trips_through_annotation_and_config_blob() -> None:
    profile = ModelProfile(accuracy=0.61, confidence=0.77, family="nli", size=42)
    artifact = build_artifact("library/nli", "latest", profile)
    assert ModelProfile.from_manifest(artifact.manifest) == profile
    bare = json.loads(artifact.manifest)
    del bare["annotations"]
    bare_bytes = json.dumps(bare).encode()
    assert ModelProfile.from_manifest(bare_bytes, artifact.blobs.get) == profile
    assert ModelProfile.from_manifest(bare_bytes) == ModelProfile()
    with pytest.raises(ValueError):
        ModelProfile.from_manifest(b"not json")


def test_profile_limits() -> None:
    with pytest.raises(ValidationError):
        ModelProfile(confidence=0.5)
    with pytest.raises(ValidationError):
        ModelProfile(accuracy=1.5)
    with pytest.raises(ValidationError):
        ModelProfile.model_validate({"acuracy": 0.3})
    assert set(DEFAULT_CATALOGUE) == {
        "library/laya:en",
        "library/laya:multilingual",
        "library/nli:latest",
    }


def test_volume_and_store_paths(tmp_path: Path) -> None:
    assert volume_dir(tmp_path, "team-a", "dm-store-abc") == (
        tmp_path / "volumes" / "team-a" / "dm-store-abc"
    )
    assert host_dir_name("http://localhost:8080") == "localhost_8080"
    assert store_manifest_path(tmp_path, "mirror.corp:8080", "library", "laya", "en") == (
        tmp_path / "manifests" / "mirror.corp_8080" / "library" / "laya" / "en"
    )
    assert (
        store_blob_path(tmp_path, "sha256:" + "a" * 64) == tmp_path / "blobs" / f"sha256-{'a' * 64}"
    )
    with pytest.raises(ValueError):
        volume_dir(tmp_path, "..", "x")
    with pytest.raises(ValueError):
        store_blob_path(tmp_path, "sha256:xyz")


def test_written_store_reads_back(tmp_path: Path) -> None:
    profile = ModelProfile(accuracy=0.5, confidence=0.6)
    artifact = build_artifact("library/laya", "en", profile)
    path = write_model_to_store(
        tmp_path, "ollaya.dev", "library", "laya", "en", artifact.manifest, artifact.blobs
    )
    assert path.read_bytes() == artifact.manifest
    ref = parse_model_name("laya:en")
    stored = read_stored_model(tmp_path, ref)
    assert stored is not None
    assert stored.digest == artifact.digest and stored.profile == profile
    assert read_stored_model(tmp_path, parse_model_name("laya:fr")) is None
    assert read_stored_model(None, ref) is None
    path.write_bytes(b"\x00garbage")
    with pytest.raises(StoreError):
        read_stored_model(tmp_path, ref)


@pytest.mark.parametrize(
    ("name", "registry", "expected"),
    [
        ("laya:en", None, ("https", "ollaya.dev", "library", "laya", "en")),
        ("Laya:EN", None, ("https", "ollaya.dev", "library", "laya", "en")),
        ("nli", None, ("https", "ollaya.dev", "library", "nli", "latest")),
        ("acme/laya:v2", None, ("https", "ollaya.dev", "acme", "laya", "v2")),
        ("laya:en", "http://127.0.0.1:5000", ("http", "127.0.0.1:5000", "library", "laya", "en")),
        ("mirror.corp/library/laya:en", None, ("https", "mirror.corp", "library", "laya", "en")),
        ("localhost/laya:en", None, ("https", "localhost", "library", "laya", "en")),
        # A host without a scheme is https even when it is OLLAYA_REGISTRY's host: that
        # variable is the registry of host-less names only (RUNTIME_API.md, seed 001).
        (
            "127.0.0.1:5000/library/laya:en",
            "http://127.0.0.1:5000",
            ("https", "127.0.0.1:5000", "library", "laya", "en"),
        ),
        ("127.0.0.1:5000/laya", None, ("https", "127.0.0.1:5000", "library", "laya", "latest")),
        # A host may carry its scheme; a scheme makes the first segment a host.
        (
            "http://127.0.0.1:5000/library/laya:en",
            None,
            ("http", "127.0.0.1:5000", "library", "laya", "en"),
        ),
        ("HTTPS://Mirror.Corp/laya:en", None, ("https", "mirror.corp", "library", "laya", "en")),
        ("https://registry/acme/laya:en", None, ("https", "registry", "acme", "laya", "en")),
        (
            "http://localhost:5000/laya",
            None,
            ("http", "localhost:5000", "library", "laya", "latest"),
        ),
    ],
)
def test_model_names(name: str, registry: str | None, expected: tuple[str, ...]) -> None:
    ref = parse_model_name(name, registry)
    assert (ref.scheme, ref.host, ref.namespace, ref.model, ref.tag) == expected


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a/b/c/d:e",
        "acme/lib/laya:en",
        "-bad:en",
        "laya:",
        "x:Ü",
        "http://laya:en",
        "http://a.b/c/d/e:f",
        "ftp://host/laya:en",
        "http:///laya:en",
        "acme//laya:en",
    ],
)
def test_invalid_model_names(name: str) -> None:
    with pytest.raises(InvalidModelName):
        parse_model_name(name)


def test_display_name() -> None:
    assert display_name("Laya:EN") == "laya:en"
    assert display_name("localhost:5000/nli") == "localhost:5000/nli:latest"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (-1, -1.0),
        (0, 0.0),
        (30, 30.0),
        ("-1", -1.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("-1m", -60.0),
        ("0s", 0.0),
        (2.5, 2.5),
    ],
)
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["forever", "5 m", True, None, [], "1x"])
def test_bad_durations(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


def test_keep_alive_defaults() -> None:
    assert keep_alive_seconds(None, None) == 300.0
    assert keep_alive_seconds(None, "-1") == -1.0
    assert keep_alive_seconds(None, "garbage") == 300.0
    assert keep_alive_seconds("10s", "-1") == 10.0

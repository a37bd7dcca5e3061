"""Reading a simulated Pod's model store (layout in simulators.volumes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulators.catalogue import ModelProfile, sha256_hex
from simulators.model_names import ModelRef
from simulators.volumes import store_blob_path, store_manifest_path


class StoreError(Exception):
    """The store holds the model, but its manifest cannot be used."""


@dataclass(frozen=True)
class StoredModel:
    manifest: bytes
    digest: str  # sha256 of the manifest bytes, bare hex
    profile: ModelProfile
    path: Path


def read_stored_model(store_dir: Path | None, ref: ModelRef) -> StoredModel | None:
    """The model `ref` as stored, or None when the store does not hold it."""
    if store_dir is None:
        return None
    path = store_manifest_path(store_dir, ref.host, ref.namespace, ref.model, ref.tag)
    try:
        manifest = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as exc:
        raise StoreError(f"reading {path}: {exc}") from exc

    def blob(hex_digest: str) -> bytes | None:
        try:
            return store_blob_path(store_dir, hex_digest).read_bytes()
        except (OSError, ValueError):
            return None

    try:
        profile = ModelProfile.from_manifest(manifest, blob)
    except ValueError as exc:
        raise StoreError(f"manifest {path}: {exc}") from exc
    return StoredModel(manifest=manifest, digest=sha256_hex(manifest), profile=profile, path=path)

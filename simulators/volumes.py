"""Where simulated PersistentVolumes and the Ollaya model store live on the host.

A simulated PVC is a plain directory, `<state-dir>/volumes/<namespace>/<claimName>/`. Whatever is
mounted at `OLLAYA_MODELS` in a simulated Pod is such a directory, laid out exactly like the real
runtime's store (RUNTIME_API.md, "On-disk store"):

    manifests/<host>/<ns>/<model>/<tag>     the registry manifest bytes (`:` in host written `_`)
    blobs/sha256-<hex>                      config and weight blobs

The runtime simulator reads it, its `/api/pull` writes it, and the lead's fake kubelet writes
prefetched stores with `write_model_to_store`, so all three agree on one layout.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# A path segment must not escape its parent: the names come from Kubernetes objects and from
# model names a test controls, but a `..` must never turn into a write outside the state dir.
_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _segment(value: str, what: str) -> str:
    if not _SAFE_SEGMENT.match(value) or value in {".", ".."}:
        raise ValueError(f"invalid {what} for a store path: {value!r}")
    return value


def volume_dir(state_dir: Path, namespace: str, claim: str) -> Path:
    """The host directory backing PVC `claim` in `namespace`."""
    return Path(state_dir) / "volumes" / _segment(namespace, "namespace") / _segment(claim, "claim")


def host_dir_name(host: str) -> str:
    """The store's directory name for a registry host: scheme dropped, `:` written `_`."""
    for scheme in ("http://", "https://"):
        if host.lower().startswith(scheme):
            host = host[len(scheme) :]
    host = host.rstrip("/").lower().replace(":", "_")
    return _segment(host, "registry host")


def store_manifest_path(store_dir: Path, host: str, ns: str, model: str, tag: str) -> Path:
    """`manifests/<host>/<ns>/<model>/<tag>` under the store root."""
    return (
        Path(store_dir)
        / "manifests"
        / host_dir_name(host)
        / _segment(ns, "namespace")
        / _segment(model, "model")
        / _segment(tag, "tag")
    )


def store_blob_path(store_dir: Path, digest: str) -> Path:
    """`blobs/sha256-<hex>`; `digest` may carry the `sha256:` prefix."""
    hex_digest = digest.removeprefix("sha256:")
    if not _HEX64.match(hex_digest):
        raise ValueError(f"invalid blob digest: {digest!r}")
    return Path(store_dir) / "blobs" / f"sha256-{hex_digest}"


def _write_atomically(path: Path, data: bytes) -> None:
    # Readers (the runtime simulator, a digest check) must never see half a manifest.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)


def write_blob(store_dir: Path, digest: str, data: bytes) -> Path:
    path = store_blob_path(store_dir, digest)
    _write_atomically(path, data)
    return path


def write_manifest(
    store_dir: Path, host: str, ns: str, model: str, tag: str, manifest: bytes
) -> Path:
    path = store_manifest_path(store_dir, host, ns, model, tag)
    _write_atomically(path, manifest)
    return path


def write_model_to_store(
    store_dir: Path,
    host: str,
    ns: str,
    model: str,
    tag: str,
    manifest: bytes,
    blobs: Mapping[str, bytes] | None = None,
) -> Path:
    """Write a pulled model (blobs first, manifest last, as a pull does); returns the manifest path.

    `blobs` maps bare hex digests (or `sha256:<hex>`) to bytes, e.g. `ModelArtifact.blobs`.
    """
    for digest, data in (blobs or {}).items():
        write_blob(store_dir, digest, data)
    return write_manifest(store_dir, host, ns, model, tag, manifest)

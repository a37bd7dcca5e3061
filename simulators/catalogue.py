"""Simulated models: their profiles and the exact registry bytes that carry them.

A `ModelProfile` holds what the simulated runtime needs to behave like that model: its accuracy
and confidence (see `simulators.answers`) and the metadata `/api/ps` reports. The registry serves
it inside a Docker v2 schema-2 manifest, twice:

- as the manifest annotation `dev.dmrollout.sim/profile` (canonical JSON), so the manifest bytes
  alone, as found in a store, suffice to recover it;
- in the config blob (`sim_profile`), where a real Ollaya config keeps model metadata.

`build_artifact` is deterministic: the same (name, tag, profile) always gives the same bytes and
so the same digest (sha256 of the manifest bytes, as the contract defines the model digest).
Change `revision` to get different bytes for an otherwise identical model.

Default catalogue (the registry simulator starts with it):

| model | accuracy | confidence | family | parameter_size | quantization | size |
| --- | --- | --- | --- | --- | --- | --- |
| library/laya:en | 0.92 | 0.85 | laya | 421M | F32 | 845897529 |
| library/laya:multilingual | 0.88 | 0.80 | laya | 568M | F32 | 1135432704 |
| library/nli:latest | 0.80 | 0.75 | nli | 184M | F16 | 369328128 |
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_MEDIA_TYPE = "application/vnd.docker.container.image.v1+json"
WEIGHTS_MEDIA_TYPE = "application/vnd.ollaya.image.model"
PROFILE_ANNOTATION = "dev.dmrollout.sim/profile"


class ModelProfile(BaseModel):
    """How a simulated model answers and what `/api/ps` says about it."""

    def accuracy_for(self, state: object) -> float:
        """The accuracy this model answers ``state`` with (weak_marker, above)."""
        if self.weak_marker is not None and self.weak_marker in json.dumps(state):
            return self.weak_accuracy
        return self.accuracy

    model_config = ConfigDict(extra="forbid", frozen=True)

    accuracy: float = Field(0.9, ge=0.0, le=1.0)
    # Above 0.5 so the chosen answer always carries the largest probability and a noul answer
    # lands on the chosen side of 0.5: then a pair is correct exactly when the model meant it
    # to be (simulators.answers), whatever the evaluator reads.
    confidence: float = Field(0.8, gt=0.5, le=1.0)
    size: int = Field(845897529, ge=0)
    format: str = "onnx"
    family: str = "laya"
    parameter_size: str = "421M"
    quantization_level: str = "F32"
    context_length: int = Field(512, ge=1)
    revision: str = ""
    # A model that is worse on one kind of case: a state whose text holds ``weak_marker`` is
    # answered at ``weak_accuracy`` (a regression confined to one slice of a golden set).
    weak_marker: str | None = Field(default=None, min_length=1, max_length=64)
    weak_accuracy: float = Field(0.0, ge=0.0, le=1.0)
    # Where the weights layer says it lives (`urls[0]` = `<weights_url>/<hex>`), as real
    # manifests point at a Hugging Face endpoint; the registry simulator serves such a stand-in
    # at `/_weights/<hex>`. None: no `urls`, the blob comes from the registry.
    weights_url: str | None = None

    def dump(self) -> dict[str, object]:
        """The profile as JSON; the weak_* fields only when set, so every model made before
        they existed keeps its bytes and its digest."""
        unset = {"weak_marker", "weak_accuracy"} if self.weak_marker is None else set()
        return self.model_dump(exclude=unset)

    def canonical_json(self) -> str:
        return json.dumps(self.dump(), sort_keys=True, separators=(",", ":"))

    def details(self) -> dict[str, str]:
        """The `details` object of `/api/ps`."""
        return {
            "format": self.format,
            "family": self.family,
            "parameter_size": self.parameter_size,
            "quantization_level": self.quantization_level,
        }

    @classmethod
    def from_manifest(
        cls,
        manifest_bytes: bytes,
        blobs_lookup: Callable[[str], bytes | None] | None = None,
    ) -> ModelProfile:
        """The profile a manifest carries: its annotation, else its config blob, else defaults.

        `blobs_lookup(hex)` returns a blob's bytes or None. Raises ValueError when the bytes are
        not a JSON object (a corrupt store).
        """
        try:
            manifest = json.loads(manifest_bytes)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"manifest is not JSON: {exc}") from exc
        if not isinstance(manifest, dict):
            raise ValueError("manifest is not a JSON object")
        annotations = manifest.get("annotations")
        if isinstance(annotations, dict) and isinstance(annotations.get(PROFILE_ANNOTATION), str):
            return _profile_or_default(_loads(annotations[PROFILE_ANNOTATION]))
        config = manifest.get("config")
        if blobs_lookup is not None and isinstance(config, dict):
            digest = config.get("digest")
            if isinstance(digest, str):
                blob = blobs_lookup(digest.removeprefix("sha256:"))
                if blob is not None:
                    parsed = _loads(blob)
                    if isinstance(parsed, dict):
                        return _profile_or_default(parsed.get("sim_profile"))
        return cls()


def _loads(raw: str | bytes) -> Any:
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def _profile_or_default(data: Any) -> ModelProfile:
    if not isinstance(data, dict):
        return ModelProfile()
    try:
        return ModelProfile.model_validate(data)
    except ValidationError:
        return ModelProfile()


@dataclass(frozen=True)
class ModelArtifact:
    """One model as a registry serves it: manifest bytes, its digest, and its blobs by hex."""

    name: str  # "<ns>/<model>"
    tag: str
    profile: ModelProfile
    manifest: bytes
    blobs: dict[str, bytes] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """sha256 of the manifest bytes, bare hex (what `/api/ps` reports)."""
        return sha256_hex(self.manifest)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _descriptor(media_type: str, data: bytes) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": f"sha256:{sha256_hex(data)}", "size": len(data)}


def build_artifact(name: str, tag: str, profile: ModelProfile) -> ModelArtifact:
    """The deterministic manifest and blobs for `name` (`<ns>/<model>`), `tag` and `profile`."""
    config = json.dumps(
        {
            "model_format": profile.format,
            "model_family": profile.family,
            "model_type": profile.parameter_size,
            "file_type": profile.quantization_level,
            "name": f"{name}:{tag}",
            "sim_profile": profile.dump(),
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    # Small stand-in weights: the size /api/ps reports comes from the profile, not from here.
    weights = (
        f"simulated weights of {name}:{tag}\nrevision: {profile.revision}\n"
        f"profile: {profile.canonical_json()}\n"
    ).encode()
    layer = _descriptor(WEIGHTS_MEDIA_TYPE, weights)
    if profile.weights_url:
        layer["urls"] = [f"{profile.weights_url.rstrip('/')}/{sha256_hex(weights)}"]
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": _descriptor(CONFIG_MEDIA_TYPE, config),
            "layers": [layer],
            "annotations": {PROFILE_ANNOTATION: profile.canonical_json()},
        },
        separators=(",", ":"),
    ).encode()
    return ModelArtifact(
        name=name,
        tag=tag,
        profile=profile,
        manifest=manifest,
        blobs={sha256_hex(config): config, sha256_hex(weights): weights},
    )


def build_manifest(name: str, tag: str, profile: ModelProfile) -> bytes:
    """The exact manifest bytes the registry simulator serves for this model."""
    return build_artifact(name, tag, profile).manifest


DEFAULT_CATALOGUE: dict[str, ModelProfile] = {
    "library/laya:en": ModelProfile(
        accuracy=0.92,
        confidence=0.85,
        size=845897529,
        family="laya",
        parameter_size="421M",
        quantization_level="F32",
    ),
    "library/laya:multilingual": ModelProfile(
        accuracy=0.88,
        confidence=0.80,
        size=1135432704,
        family="laya",
        parameter_size="568M",
        quantization_level="F32",
    ),
    "library/nli:latest": ModelProfile(
        accuracy=0.80,
        confidence=0.75,
        size=369328128,
        family="nli",
        parameter_size="184M",
        quantization_level="F16",
    ),
}

"""Revision identity: which spec changes make a new blue-green revision.

A revision is named by a hash over an explicit inputs model, so what counts as identity is
written down in one place: engine, model, digest, device, image, resources and placement
(REFERENCE.md "Revision identity"). Everything else — replicas, cache, auth, rollout settings —
is applied in place to the running stable and must never change the hash.

Changing the canonical form changes every hash, which starts a rollout of every DecisionModel
on upgrade; the known-answer test in tests/unit/api/test_revision.py guards against that.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.api.spec import (
    DIGEST_PATTERN,
    DecisionModelSpec,
    Device,
    Engine,
    SchedulingSpec,
)

REVISION_HASH_LENGTH: Final = 16
PLACEMENT_HASH_LENGTH: Final = 10
# The fixed order of the hashed fields. Part of the hash format: never reorder, only append
# new optional fields that are omitted when unset, so existing hashes stay the same.
HASH_FIELDS: Final = ("engine", "model", "digest", "device", "image", "resources", "placement")


def _sorted_tree(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _sorted_tree(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted_tree(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    # No spaces; non-ASCII kept as UTF-8 (hashed as UTF-8 bytes); NaN refused (not JSON).
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    """JSON with every object's keys sorted and no whitespace."""
    return _dumps(_sorted_tree(value))


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def placement_hash(scheduling: SchedulingSpec | Mapping[str, Any] | None) -> str | None:
    """sha256 of the canonical scheduling JSON, first 10 hex; None when nothing is set.

    Empty maps and lists count as unset, so `scheduling: {nodeSelector: {}}` hashes like no
    scheduling at all and revisions recorded before placement existed keep their hash.
    """
    if scheduling is None:
        return None
    doc = scheduling.to_wire() if isinstance(scheduling, SchedulingSpec) else dict(scheduling)
    doc = {k: v for k, v in doc.items() if v not in (None, "", {}, [])}
    if not doc:
        return None
    return _sha256_hex(canonical_json(doc))[:PLACEMENT_HASH_LENGTH]


class RevisionInputs(BaseModel):
    """Everything that makes a revision, and nothing else."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: Engine = Field(description="Serving engine.")
    model: str = Field(min_length=1, description="Model name:tag as written in the spec.")
    digest: str = Field(pattern=DIGEST_PATTERN, description="Resolved manifest digest.")
    device: Device = Field(description="Device class.")
    image: str = Field(min_length=1, description="Runtime image the revision runs.")
    resources: dict[str, Any] = Field(default_factory=dict, description="Container resources.")
    placement: str | None = Field(default=None, description="placement_hash of scheduling.")

    @classmethod
    def from_spec(cls, spec: DecisionModelSpec, digest: str, image: str) -> RevisionInputs:
        """The identity of `spec` once its digest is resolved and its image chosen."""
        return cls(
            engine=spec.engine,
            model=spec.model,
            digest=digest,
            device=spec.device,
            image=image,
            resources=spec.resources,
            placement=placement_hash(spec.scheduling),
        )

    def canonical_json(self) -> str:
        """The hashed text: fields in `HASH_FIELDS` order, nested keys sorted, no spaces.

        `placement` is omitted when None so hashes from before it existed are unchanged.
        """
        doc: dict[str, Any] = {
            "engine": self.engine.value,
            "model": self.model,
            "digest": self.digest,
            "device": self.device.value,
            "image": self.image,
            "resources": _sorted_tree(self.resources),
        }
        if self.placement is not None:
            doc["placement"] = self.placement
        return _dumps(doc)


def revision_hash(inputs: RevisionInputs) -> str:
    """sha256 of the canonical inputs JSON, first 16 hex."""
    return _sha256_hex(inputs.canonical_json())[:REVISION_HASH_LENGTH]

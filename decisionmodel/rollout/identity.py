"""Revision identity: which spec changes make a new blue-green revision.

A revision is named by a hash over its identity, the fields ``contracts.RevisionIdentity``
declares once (engine, model, digest, device, image, resources and scheduling, hashed as its
placement; REFERENCE.md "Revision identity"). Everything else (replicas, cache, auth, rollout
settings) is applied in place to the running stable and must never change the hash.

Changing the canonical form changes every hash, which starts a rollout of every DecisionModel
on upgrade; the known-answer test in tests/unit/api/test_api_revision.py guards against that.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from decisionmodel.api.spec import SchedulingSpec
from decisionmodel.rollout.contracts import HASHED, RevisionIdentity

REVISION_HASH_LENGTH: Final = 16
PLACEMENT_HASH_LENGTH: Final = 10
# The hashed fields in order: RevisionIdentity's HASHED ones as declared, ``scheduling`` as its
# ``placement``. Part of the hash format: never reorder, only append new fields at the end of
# RevisionIdentity, which are left out while unset so existing hashes stay the same.
HASH_FIELDS: Final = tuple(
    "placement" if name == "scheduling" else name
    for name, info in RevisionIdentity.model_fields.items()
    if HASHED in info.metadata
)
# The fields present in every hash, set or not; every other is left out while unset.
ALWAYS_HASHED: Final = frozenset({"engine", "model", "digest", "device", "image", "resources"})


def _sorted_tree(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _sorted_tree(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted_tree(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
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


def _hashed(revision: RevisionIdentity, field: str) -> Any:
    if field == "placement":
        return placement_hash(revision.scheduling)
    return _sorted_tree(getattr(revision, field))


def canonical_identity(revision: RevisionIdentity) -> str:
    """The hashed text: ``HASH_FIELDS`` in order, nested keys sorted, no spaces; a field
    outside ``ALWAYS_HASHED`` is left out while unset (None), so hashes from before it existed
    are unchanged. ``revision.digest`` is the resolved one."""
    doc: dict[str, Any] = {}
    for field in HASH_FIELDS:
        value = _hashed(revision, field)
        if field in ALWAYS_HASHED or value is not None:
            doc[field] = value
    return _dumps(doc)


def revision_hash(revision: RevisionIdentity) -> str:
    """sha256 of the canonical identity, first 16 hex (``revision`` resolved: its digest and
    the image it runs set)."""
    return _sha256_hex(canonical_identity(revision))[:REVISION_HASH_LENGTH]


def unresolved_hash(revision: RevisionIdentity) -> str:
    """The hash of an identity whose digest is not known yet (prefix ``u``): one workflow ID per
    unresolved spec. ``placement`` is in it even when unset, as it always was."""
    doc = {
        field: _hashed(revision, field)
        for field in HASH_FIELDS
        if field != "digest"
        and (field in ALWAYS_HASHED or field == "placement" or _hashed(revision, field) is not None)
    }
    digest_of = _sha256_hex("unresolved:" + canonical_json(doc))
    return "u" + digest_of[: REVISION_HASH_LENGTH - 1]

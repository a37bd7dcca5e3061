"""What binds a revision's identity to what status records of it (issue 37, item 3).

A stable is rendered from its record in status, never from the spec. A field added to
``RevisionIdentity`` (or to ``RevisionRecord``) but not to the status schema would be dropped on
the way into status and come back as its default: the stable restored after a spec change would
silently run with another value. These tests fail when a field is left out on either side, or
when the way back from status (``record_of``) loses one.
"""

from __future__ import annotations

from typing import Any

import pytest

from decisionmodel.api.status import RevisionStatus
from decisionmodel.rollout.contracts import RevisionIdentity, RevisionRecord
from decisionmodel.rollout.dispatch import record_of
from decisionmodel.vocabulary import Engine

DIGEST = "a" * 64


def _full_record() -> RevisionRecord:
    """A record with every field set to a value that is not its default."""
    return RevisionRecord(
        engine="ollaya",
        model="laya:en",
        digest=DIGEST,
        device="cuda",
        image="ghcr.io/ollaya-dev/ollaya:0.10.0",
        runtime_version="0.10.0",
        resources={"limits": {"memory": "4Gi"}, "requests": {"cpu": "1"}},
        scheduling={
            "nodeSelector": {"gpu": "t4"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        hash="0123456789abcdef",
        precision="Q4_K_M",
        placement="p" * 16,
    )


def test_every_record_field_has_a_status_field_and_no_status_field_is_unbound() -> None:
    record, status = set(RevisionRecord.model_fields), set(RevisionStatus.model_fields)
    assert record - status == set(), "fields status cannot record (add them to RevisionStatus)"
    assert status - record == set(), "status fields no revision carries (add them to the record)"
    assert set(RevisionIdentity.model_fields) <= status


def test_a_record_with_every_field_set_survives_status_unchanged() -> None:
    record = _full_record()
    defaults = RevisionRecord.model_construct(model="", digest="", hash="")
    # The engine has one value yet (the default); a second engine makes it count here.
    single_valued = {"engine"} if len(Engine) == 1 else set()
    unset = [
        name
        for name, info in RevisionRecord.model_fields.items()
        if not info.is_required()
        and name not in single_valued
        and getattr(record, name) == getattr(defaults, name, None)
    ]
    assert unset == [], f"give these a non-default value here: {unset}"
    wire = record.to_status()
    back = record_of(RevisionStatus.model_validate(wire))
    assert back is not None
    assert back.model_dump() == record.model_dump()


@pytest.mark.parametrize("name", sorted(RevisionIdentity.model_fields))
def test_each_identity_field_is_written_to_status(name: str) -> None:
    wire: dict[str, Any] = _full_record().to_status()
    parsed = RevisionStatus.model_validate(wire)
    assert getattr(parsed, name) is not None, f"{name} is not written to status"

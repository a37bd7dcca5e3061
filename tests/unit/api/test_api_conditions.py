"""Conditions: the set_condition helper and the reason constants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from decisionmodel.api import Condition, ConditionStatus
from decisionmodel.api.conditions import (
    condition,
    get_condition,
    is_condition_true,
    remove_condition,
    set_condition,
)
from decisionmodel.vocabulary import PERMANENT_REASONS, ConditionType, Reason

T0 = datetime(2026, 10, 2, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_new_condition_gets_now() -> None:
    out = set_condition([], condition(ConditionType.READY, True, Reason.SERVING), T0)
    assert out == [
        Condition(
            type="Ready", status=ConditionStatus.TRUE, reason="Serving", last_transition_time=T0
        )
    ]


def test_same_status_keeps_transition_time_but_takes_reason_and_message() -> None:
    first = set_condition([], condition("Ready", False, Reason.NO_STABLE_REVISION), T0)
    second = set_condition(
        first,
        condition("Ready", False, Reason.ROLLOUT_IN_PROGRESS, "caching", observed_generation=2),
        T1,
    )
    (ready,) = second
    assert ready.last_transition_time == T0
    assert ready.reason == "RolloutInProgress"
    assert ready.message == "caching"
    assert ready.observed_generation == 2


def test_status_change_moves_transition_time() -> None:
    first = set_condition([], condition("Ready", False, Reason.NO_STABLE_REVISION), T0)
    (ready,) = set_condition(first, condition("Ready", True, Reason.SERVING), T1)
    assert ready.status is ConditionStatus.TRUE
    assert ready.last_transition_time == T1


def test_unknown_to_false_is_a_transition() -> None:
    first = set_condition([], condition("Cached", ConditionStatus.UNKNOWN, Reason.PREFETCHING), T0)
    (cached,) = set_condition(first, condition("Cached", False, Reason.CACHE_TIMEOUT), T1)
    assert cached.last_transition_time == T1


def test_position_and_other_conditions_kept_and_input_untouched() -> None:
    conditions = set_condition([], condition("Resolved", True, Reason.DIGEST_RESOLVED), T0)
    conditions = set_condition(conditions, condition("Ready", False, Reason.NO_STABLE_REVISION), T0)
    before = [c.model_copy() for c in conditions]
    after = set_condition(conditions, condition("Resolved", False, Reason.MODEL_NOT_FOUND), T1)
    assert conditions == before
    assert [c.type for c in after] == ["Resolved", "Ready"]
    assert after[0].last_transition_time == T1
    assert after[1] == conditions[1]


def test_missing_transition_time_on_existing_is_filled() -> None:
    existing = [Condition(type="Ready", status=ConditionStatus.TRUE, reason="Serving")]
    (ready,) = set_condition(existing, condition("Ready", True, Reason.SERVING), T1)
    assert ready.last_transition_time == T1


def test_now_is_truncated_to_utc_seconds() -> None:
    local = datetime(2026, 10, 2, 14, 0, 0, 987654, tzinfo=timezone(timedelta(hours=2)))
    (ready,) = set_condition([], condition("Ready", True, Reason.SERVING), local)
    assert ready.last_transition_time == T0
    assert ready.to_wire()["lastTransitionTime"] == "2026-10-02T12:00:00Z"


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        set_condition([], condition("Ready", True, Reason.SERVING), datetime(2026, 1, 1))


def test_lookup_helpers() -> None:
    conditions = set_condition([], condition("Ready", True, Reason.SERVING), T0)
    conditions = set_condition(conditions, condition("Degraded", False, Reason.AS_EXPECTED), T0)
    assert is_condition_true(conditions, ConditionType.READY)
    assert not is_condition_true(conditions, ConditionType.DEGRADED)
    assert not is_condition_true(conditions, ConditionType.PROMOTED)
    found = get_condition(conditions, ConditionType.DEGRADED)
    assert found is not None and found.reason == "AsExpected"
    assert [c.type for c in remove_condition(conditions, "Ready")] == ["Degraded"]


def test_reason_must_be_camel_case() -> None:
    with pytest.raises(ValidationError):
        condition("Ready", True, "not a reason")
    with pytest.raises(ValidationError):
        condition("Ready", True, "")


def test_condition_types() -> None:
    assert [t.value for t in ConditionType][:7] == [
        "Resolved",
        "Cached",
        "ModelReady",
        "Evaluated",
        "Promoted",
        "Ready",
        "Degraded",
    ]


SEED_001_REASONS = [
    "NoModelReadyPods",
    "ReplicasNotModelReady",
    "DigestMismatch",
    "DeviceMismatch",
    "NotPinned",
    "CacheNotShareable",
    "CacheSpecImmutable",
    "RegistryNotAllowed",
    "ImageOverrideNotAllowed",
    "SecretNotAllowed",
    "InvalidModelName",
    "ModelNotFound",
    "DatasetInvalid",
    "EvaluationFailed",
    "EvaluationTimeout",
    "ResourceConflict",
    "StoreLost",
    "StorePrefetchFailed",
    "StoreTerminating",
]
PROJECT_REASONS = [
    "CacheTimeout",
    "StartTimeout",
    "EvaluationTimeout",
    "PrefetchFailed",
    "RolloutQueued",
    "CandidateRejected",
    "Superseded",
    "APIKeyInvalid",
    "SecretNotAllowed",
    "ProbeError",
]


def test_reasons_cover_the_reference_tables() -> None:
    values = {r.value for r in Reason}
    assert set(SEED_001_REASONS) <= values
    assert set(PROJECT_REASONS) <= values
    assert len(Reason.__members__) == len(values)  # no two names for one reason


def test_every_reason_is_a_valid_condition_reason() -> None:
    for reason in Reason:
        condition("Ready", True, reason)


def test_permanent_reasons() -> None:
    assert Reason.DATASET_INVALID in PERMANENT_REASONS
    assert Reason.REGISTRY_NOT_ALLOWED in PERMANENT_REASONS
    assert Reason.EVALUATION_TIMEOUT not in PERMANENT_REASONS
    assert Reason.REGISTRY_UNAVAILABLE not in PERMANENT_REASONS

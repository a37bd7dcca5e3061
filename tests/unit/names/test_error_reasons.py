"""The typed errors carry the reference's reason names and their retry class."""

from __future__ import annotations

import pytest

from decisionmodel import errors

# Seed 001 "Condition reasons you may see" plus the gate and transport reasons of REFERENCE.md;
# True = permanent (non-retryable ApplicationError).
EXPECTED = {
    "InvalidModelName": True,
    "RegistryNotAllowed": True,
    "ModelNotFound": True,
    "RegistryError": False,
    "RegistryUnavailable": False,
    "DigestMismatch": True,
    "PrefetchFailed": True,
    "DeviceMismatch": True,
    "ModelLoadFailed": True,
    "NotPinned": False,
    "ProbeError": False,
    "QueueFull": False,
    "RuntimeRequestRejected": True,
    "RuntimeAnswerInvalid": True,
    "StartTimeout": True,
    "DatasetInvalid": True,
    "EvaluationFailed": True,
    "EvaluationTimeout": True,
    "ImageOverrideNotAllowed": True,
    "PlacementRefused": True,
    "SecretNotAllowed": False,
    "APIKeyInvalid": False,
    "ResourceConflict": False,
    # References and hand-made inputs (kube.secrets, resolve, evaluate, the renderers' params).
    "DatasetNotFound": False,
    "SecretNotFound": False,
    "SecretReadFailed": False,
    "DecisionRecordUnwritten": False,
    "InvalidDigest": True,
    "InvalidEvaluationPolicy": True,
    "InvalidRevisionParams": True,
    "PolicyMismatch": True,
}


def test_reason_names_and_retry_classes() -> None:
    assert {reason: cls.permanent for reason, cls in errors.ERRORS_BY_REASON.items()} == EXPECTED
    for reason, cls in errors.ERRORS_BY_REASON.items():
        assert cls.__name__ == reason
        assert issubclass(cls, errors.DmrolloutError)


def test_instance_fields_and_override() -> None:
    err = errors.ProbeError("inspect: 401", status=401, code="UNAUTHORIZED")
    assert (str(err), err.message, err.status, err.code) == (
        "inspect: 401",
        "inspect: 401",
        401,
        "UNAUTHORIZED",
    )
    assert err.reason == "ProbeError" and err.permanent is False
    fatal = errors.RegistryError("redirect refused", permanent=True)
    assert fatal.permanent is True
    # The override is per instance; the class default stays.
    assert errors.RegistryError("x").permanent is False


def test_errors_are_catchable_as_the_base() -> None:
    with pytest.raises(errors.DmrolloutError):
        raise errors.QueueFull("queue full")

"""The readiness-gate verdict: a pure function of what /api/ps showed (REFERENCE.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from decisionmodel.engine.runtime_client import GateVerdict, PsModel, device_class, verdict
from decisionmodel.errors import ProbeError
from decisionmodel.vocabulary import Device, Reason

DIGEST = "a" * 64
OTHER = "b" * 64
LATER = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def entry(**overrides: Any) -> PsModel:
    fields: dict[str, Any] = {
        "name": "laya:en",
        "model": "laya:en",
        "digest": DIGEST,
        "details": {"quantization_level": "F32"},
        "expires_at": None,
        "device": "cpu",
    }
    fields.update(overrides)
    return PsModel.model_validate(fields)


def test_full_match_is_model_ready() -> None:
    result = verdict(DIGEST, "cpu", entry(), None)
    assert result == GateVerdict(
        ready=True,
        reason=Reason.MODEL_READY,
        message=f"digest {DIGEST[:12]} loaded on cpu, pinned",
        precision="F32",
    )
    assert result.reason == "ModelReady"


@pytest.mark.parametrize(
    ("seen", "reason"),
    [
        # Everything wrong: digest is reported first.
        (entry(digest=OTHER, device="cuda:0", expires_at=LATER), Reason.DIGEST_MISMATCH),
        # Device and pin wrong: device first.
        (entry(device="cuda:0", expires_at=LATER), Reason.DEVICE_MISMATCH),
        (entry(expires_at=LATER), Reason.NOT_PINNED),
        (entry(digest=OTHER), Reason.DIGEST_MISMATCH),
        (entry(digest=""), Reason.DIGEST_MISMATCH),
    ],
)
def test_reasons_in_reference_order(seen: PsModel, reason: Reason) -> None:
    result = verdict(DIGEST, "cpu", seen, None)
    assert result.ready is False
    assert result.reason is reason
    assert result.precision == "F32"


def test_messages_name_what_differs_and_the_fix() -> None:
    digest = verdict(DIGEST, "cpu", entry(digest=OTHER), None)
    assert "bbbbbbbbbbbb" in digest.message and "aaaaaaaaaaaa" in digest.message
    assert "spec.digest" in digest.message
    device = verdict(DIGEST, "cuda", entry(device="cpu"), None)
    assert "'cpu'" in device.message and "spec.device is 'cuda'" in device.message
    # The spec's enum, as the workflow passes it: its value, never its repr (explorer seed 3524
    # showed "spec.device is <Device.CPU: 'cpu'>").
    fallback = verdict(DIGEST, Device.CPU, entry(device="cpu-fallback"), None)
    assert "spec.device is 'cpu';" in fallback.message, fallback.message
    pin = verdict(DIGEST, "cpu", entry(expires_at=LATER), None)
    assert "2026-01-01T00:05:00+00:00" in pin.message and "keep_alive -1" in pin.message


@pytest.mark.parametrize(
    ("expected", "device", "ready"),
    [
        ("cuda", "cuda:0", True),
        ("cuda", "cuda:12", True),
        ("cuda", "cuda", False),
        ("cuda", "cuda:", False),
        ("cuda", "cuda:x", False),
        ("cuda", "CUDA:0", False),
        ("cuda", " cuda:0", False),
        ("cuda", "cuda:0\n", False),
        ("cuda", "metal", False),
        ("cuda", "cpu", False),
        ("cpu", "cpu", True),
        ("cpu", "cuda:1", False),
        ("cpu", "CPU", False),
        ("cpu", "", False),
        ("cuda:1", "cuda:0", True),
        ("metal", "metal", False),
    ],
)
def test_device_class(expected: str, device: str, ready: bool) -> None:
    result = verdict(DIGEST, expected, entry(device=device), None)
    assert result.ready is ready
    assert result.reason is (Reason.MODEL_READY if ready else Reason.DEVICE_MISMATCH)


@pytest.mark.parametrize(
    ("device", "cls"),
    [("cpu", "cpu"), ("cuda:0", "cuda"), ("cuda:7", "cuda"), ("cuda", None), ("metal", None)],
)
def test_device_class_function(device: str, cls: str | None) -> None:
    assert device_class(device) == cls


def test_probe_error_and_absent_model() -> None:
    failed = verdict(DIGEST, "cpu", None, ProbeError("inspect: 401 UNAUTHORIZED", status=401))
    assert failed.ready is False
    assert failed.reason is Reason.PROBE_ERROR
    assert "401 UNAUTHORIZED" in failed.message
    assert failed.precision is None

    absent = verdict(DIGEST, "cpu", None, None)
    assert absent.reason is Reason.PROBE_ERROR
    assert "not loaded" in absent.message


def test_expected_digest_is_normalised() -> None:
    result = verdict("sha256:" + DIGEST.upper(), "cpu", entry(digest="sha256:" + DIGEST), None)
    assert result.reason is Reason.MODEL_READY


def test_ps_entry_needs_the_fields_the_gate_reads() -> None:
    base = {"name": "laya:en", "digest": DIGEST, "device": "cpu", "expires_at": None}
    assert PsModel.model_validate(base).pinned is True
    for missing in ("digest", "device", "expires_at"):
        partial = {k: v for k, v in base.items() if k != missing}
        with pytest.raises(ValueError, match=missing):
            PsModel.model_validate(partial)

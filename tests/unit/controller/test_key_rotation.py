"""The stable's API key in place (seed 001 "Rotating the API key"): a roll only when the value
or the Secret reference changes; a Deployment from before (the reference operator's, whose
template holds its own checksum or none) only gets dmrollout's checksum recorded, no roll."""

from __future__ import annotations

from typing import Any

from controller.reconciler.steady import RECORD, ROLL, key_rotation

OURS = "hmac-sha256:" + "a" * 64
ROTATED = "hmac-sha256:" + "b" * 64
THEIRS = "sha256:" + "c" * 64
KEY = "decisionmodel.io/apikey-checksum"


def deployment(template: str | None = None, recorded: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {KEY: recorded}} if recorded else {}
    tmeta: dict[str, Any] = {"annotations": {KEY: template}} if template else {}
    return {"metadata": meta, "spec": {"template": {"metadata": tmeta}}}


def test_dmrollouts_own_template_rolls_only_on_a_new_value() -> None:
    assert key_rotation(deployment(OURS), OURS, same_ref=True) is None
    assert key_rotation(deployment(OURS), ROTATED, same_ref=True) == ROLL


def test_a_new_secret_reference_always_rolls() -> None:
    assert key_rotation(deployment(OURS), OURS, same_ref=False) == ROLL
    assert key_rotation(deployment(), None, same_ref=False) == ROLL


def test_an_upgraded_deployment_is_recorded_first_then_rolls_on_a_change() -> None:
    assert key_rotation(deployment(THEIRS), OURS, same_ref=True) == RECORD
    assert key_rotation(deployment(None), OURS, same_ref=True) == RECORD
    assert key_rotation(deployment(THEIRS, recorded=OURS), OURS, same_ref=True) is None
    assert key_rotation(deployment(THEIRS, recorded=OURS), ROTATED, same_ref=True) == ROLL


def test_no_key_nothing_to_do() -> None:
    assert key_rotation(deployment(), None, same_ref=True) is None

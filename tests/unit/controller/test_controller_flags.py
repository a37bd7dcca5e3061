"""The reference operator's flags reach the settings they name."""

from __future__ import annotations

import pytest

from controller.cli.commands import controller_settings, rollout_settings
from controller.cli.main import build_parser


def test_controller_flags_override_the_settings() -> None:
    args = build_parser().parse_args(
        [
            "controller",
            "--max-concurrent-rollouts", "3",
            "--max-concurrent-reconciles", "8",
            "--runtime-version-policy", "FollowOperator",
            "--ollaya-hf-endpoint", "https://hf-mirror.example.com",
        ]
    )  # fmt: skip
    settings = controller_settings(args)
    assert settings.max_concurrent_rollouts == 3
    assert settings.workers == 8
    assert settings.runtime_version_policy == "FollowOperator"
    assert rollout_settings(args).ollaya_hf_endpoint == "https://hf-mirror.example.com"


def test_defaults_without_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("DMROLLOUT_CONTROLLER_RUNTIME_VERSION_POLICY", "DMROLLOUT_CONTROLLER_WORKERS"):
        monkeypatch.delenv(variable, raising=False)
    args = build_parser().parse_args(["controller"])
    assert controller_settings(args).runtime_version_policy == "Pinned"
    assert controller_settings(args).workers == 4


def test_unknown_policy_is_refused_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["controller", "--runtime-version-policy", "Latest"])
    err = capsys.readouterr().err
    assert "--runtime-version-policy" in err and "FollowOperator" in err

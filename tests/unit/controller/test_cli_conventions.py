"""Issue 13, points 1-2: how the CLI phrases failures and where it connects."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from controller.cli.completion import completion_script
from controller.cli.errors import CliError, ExitCode, Where, explain
from controller.cli.main import build_parser
from controller.reconciler.settings import ControllerSettings
from controller.temporal.client import TemporalSettings
from kube.errors import Forbidden, NotFound, Unavailable

WHERE = Where(temporal_address="t:7233", temporal_namespace="ns", kube_server="https://k:6443")


@pytest.mark.parametrize(
    ("error", "code", "names"),
    [
        (RuntimeError("Failed client connect: Connection refused"), ExitCode.UNREACHABLE, "t:7233"),
        (RPCError("x", RPCStatusCode.UNAVAILABLE, b""), ExitCode.UNREACHABLE, "t:7233"),
        # An approval whose answer did not come in time (explorer seed 6013: "internal error").
        (WorkflowUpdateRPCTimeoutOrCancelledError(), ExitCode.UNREACHABLE, "dmrollout status"),
        (RPCError("x", RPCStatusCode.PERMISSION_DENIED, b""), ExitCode.SETUP, "API key"),
        (Unavailable("timed out"), ExitCode.UNREACHABLE, "https://k:6443"),
        (Forbidden("x", status=403, reason="Forbidden"), ExitCode.SETUP, "RBAC"),
        (NotFound("x", status=404, reason="NotFound"), ExitCode.SETUP, "install the CRD"),
        (FileNotFoundError(2, "No such file or directory", "/ca.crt"), ExitCode.SETUP, "/ca.crt"),
        (KeyboardInterrupt(), ExitCode.INTERRUPTED, "interrupted"),
        (ZeroDivisionError("boom"), ExitCode.INTERNAL, "DMROLLOUT_DEBUG=1"),
    ],
)
def test_each_failure_has_its_code_and_names_where(
    error: BaseException, code: ExitCode, names: str
) -> None:
    found = explain(error, WHERE)
    assert found.code == code and names in found.message
    assert "\n" not in found.message


def test_a_settings_error_is_usage_naming_the_field() -> None:
    with pytest.raises(Exception) as raised:
        ControllerSettings(max_concurrent_rollouts=-1)
    found = explain(raised.value, WHERE)
    assert found.code == ExitCode.USAGE and "max_concurrent_rollouts" in found.message


def test_a_cli_error_passes_through() -> None:
    error = CliError(ExitCode.NOT_FOUND, "gone")
    assert explain(error, WHERE) is error


def test_temporal_conventions_and_their_precedence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("DMROLLOUT_TEMPORAL_ADDRESS", "DMROLLOUT_TEMPORAL_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "none.toml"))
    monkeypatch.setenv("TEMPORAL_ADDRESS", "from-temporal-env:1")
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "team")
    assert TemporalSettings.load().address == "from-temporal-env:1"
    assert TemporalSettings.load().namespace == "team"
    monkeypatch.setenv("DMROLLOUT_TEMPORAL_ADDRESS", "from-dmrollout-env:2")
    assert TemporalSettings.load().address == "from-dmrollout-env:2"
    assert TemporalSettings.load(address="from-flag:3").address == "from-flag:3"


def test_a_profile_from_the_temporal_config_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.prod]\naddress = "prod:7233"\nnamespace = "rollouts"\n')
    for name in ("DMROLLOUT_TEMPORAL_ADDRESS", "DMROLLOUT_TEMPORAL_NAMESPACE", "TEMPORAL_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(config))
    loaded = TemporalSettings.load(profile="prod")
    assert (loaded.address, loaded.namespace) == ("prod:7233", "rollouts")
    assert loaded.tls_config() is False


def test_completion_knows_every_verb_and_its_flags() -> None:
    script = completion_script(build_parser(), "bash")
    for verb in ("get", "status", "wait", "abort", "retry", "undo", "history", "promote"):
        assert f"    {verb}) flags=" in script
    assert "--all-namespaces" in script and "--timeout" in script

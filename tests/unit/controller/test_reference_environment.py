"""The reference operator's environment is honoured (seed 001, issue 22 point 10):
OLLAYA_REGISTRY, OLLAYA_HF_ENDPOINT and the standard proxy variables set the worker's settings
(DMROLLOUT_* first), and a credentialed proxy gets one startup warning naming it, never its
value."""

from __future__ import annotations

import logging

import pytest

from controller.worker.run import warn_skipped_proxies
from decisionmodel.rollout.settings import RolloutSettings

SECRET = "s3cr3t-pass"


def test_the_reference_variables_set_the_registry_the_weight_mirror_and_proxies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OLLAYA_REGISTRY", "https://mirror.corp")
    monkeypatch.setenv("OLLAYA_HF_ENDPOINT", "https://hf.corp")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("no_proxy", ".svc,.cluster.local")
    got = RolloutSettings()
    assert got.ollaya_registry == "https://mirror.corp"
    assert got.ollaya_hf_endpoint == "https://hf.corp"
    assert got.https_proxy == "http://proxy.corp:3128"
    assert got.no_proxy == ".svc,.cluster.local"


def test_dmrollout_variables_and_arguments_come_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAYA_REGISTRY", "https://mirror.corp")
    monkeypatch.setenv("DMROLLOUT_OLLAYA_REGISTRY", "https://ours.corp")
    assert RolloutSettings().ollaya_registry == "https://ours.corp"
    assert RolloutSettings(ollaya_registry="https://arg.corp").ollaya_registry == (
        "https://arg.corp"
    )


def test_a_credentialed_proxy_is_named_once_at_start_and_its_value_never(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = RolloutSettings(
        https_proxy=f"http://user:{SECRET}@proxy.corp:3128", http_proxy="http://proxy.corp:3128"
    )
    with caplog.at_level(logging.WARNING):
        assert warn_skipped_proxies(settings) == ["HTTPS_PROXY"]
    assert len(caplog.records) == 1
    assert "HTTPS_PROXY carries credentials" in caplog.text
    assert SECRET not in caplog.text and "user" not in caplog.text


def test_no_warning_without_a_credentialed_proxy(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert warn_skipped_proxies(RolloutSettings(http_proxy="http://proxy.corp:3128")) == []
    assert caplog.records == []

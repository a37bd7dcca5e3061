"""Which proxy URLs may be copied into a tenant's Job (fail closed)."""

from __future__ import annotations

import pytest

from decisionmodel.engine.params import ProxyEnv
from decisionmodel.engine.render.proxy import (
    is_credential_free_proxy,
    prefetch_proxy_env,
    skipped_proxy_variables,
)


@pytest.mark.parametrize(
    "url",
    [
        "http://proxy.corp:3128",
        "https://proxy.corp",
        "proxy.corp:3128",
        "http://10.0.0.1:8080/",
        "socks5://proxy.corp:1080",
        "http://[fd00::1]:3128",
    ],
)
def test_credential_free(url: str) -> None:
    assert is_credential_free_proxy(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://user:pass@proxy.corp:3128",
        "http://user@proxy.corp:3128",
        "user:pass@proxy.corp:3128",
        "http://proxy.corp:3128/?token=x@y",
        "http://proxy.corp:notaport",
        "http://proxy.corp:99999",
        "http://",
        "ftp://proxy.corp",
        "http://proxy corp:3128",
        "http://proxy.corp:3128?auth=secret",
        "http://[fd00::1",
    ],
)
def test_credentialed_or_unparsable_is_refused(url: str) -> None:
    assert not is_credential_free_proxy(url)


def test_skipped_names_never_values() -> None:
    proxy = ProxyEnv(
        http_proxy="http://proxy:3128",
        https_proxy="http://u:secret@proxy:3128",
        no_proxy=".svc",
    )
    assert skipped_proxy_variables(proxy) == ["HTTPS_PROXY"]
    assert prefetch_proxy_env(proxy) == [
        {"name": "HTTP_PROXY", "value": "http://proxy:3128"},
        {"name": "http_proxy", "value": "http://proxy:3128"},
        {"name": "NO_PROXY", "value": ".svc"},
        {"name": "no_proxy", "value": ".svc"},
    ]


def test_empty_values_render_nothing() -> None:
    assert prefetch_proxy_env(ProxyEnv(http_proxy="", no_proxy="")) == []
    assert skipped_proxy_variables(ProxyEnv()) == []

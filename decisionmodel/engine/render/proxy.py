"""Which proxy settings may be copied into a tenant's prefetch Job.

A Job's spec is readable by anyone who can ``get jobs`` in its namespace, so a proxy URL
with credentials must never be copied there (seed 000 §9, seed 001 "Behind an HTTP proxy").
Fail closed: a value containing ``@`` (userinfo) or one that does not parse as a proxy URL is
treated as credentialed and skipped. ``no_proxy`` holds host patterns, not credentials, and is
always copied.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from decisionmodel.engine.params import ProxyEnv

_PROXY_SCHEMES = frozenset({"http", "https", "socks5", "socks5h"})


def is_credential_free_proxy(value: str) -> bool:
    """True when ``value`` is a proxy URL that certainly carries no credentials."""
    if "@" in value or any(c.isspace() or not c.isprintable() for c in value):
        return False
    # Proxy variables are often written without a scheme (``proxy.corp:3128``); clients read
    # that as http://, and so does this check.
    candidate = value if "://" in value else f"http://{value}"
    try:
        parts = urlsplit(candidate)
        _ = parts.port  # raises ValueError on a malformed port
    except ValueError:
        return False
    return (
        parts.scheme.lower() in _PROXY_SCHEMES
        and bool(parts.hostname)
        and parts.username is None
        and parts.password is None
        and parts.query == ""
        and parts.fragment == ""
    )


def _settings(proxy: ProxyEnv) -> list[tuple[str, str | None, bool]]:
    # (lower-case name, value, needs the credential check)
    return [
        ("http_proxy", proxy.http_proxy, True),
        ("https_proxy", proxy.https_proxy, True),
        ("no_proxy", proxy.no_proxy, False),
    ]


def prefetch_proxy_env(proxy: ProxyEnv) -> list[dict[str, str]]:
    """Env entries for the prefetch container, upper- and lower-case for each copied value:
    curl-style clients honour only the lower-case ``http_proxy``, others only upper-case."""
    env: list[dict[str, str]] = []
    for name, value, check in _settings(proxy):
        if not value or (check and not is_credential_free_proxy(value)):
            continue
        env.append({"name": name.upper(), "value": value})
        env.append({"name": name, "value": value})
    return env


def skipped_proxy_variables(proxy: ProxyEnv) -> list[str]:
    """Names (never values) of the variables ``prefetch_proxy_env`` leaves out because they
    look credentialed, so the caller can log one startup warning naming them."""
    return [
        name.upper()
        for name, value, check in _settings(proxy)
        if value and check and not is_credential_free_proxy(value)
    ]

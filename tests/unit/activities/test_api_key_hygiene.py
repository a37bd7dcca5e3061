"""An API key no HTTP header can carry is APIKeyInvalid, permanent, and nothing of it leaks.

Issue 12, point 5: a non-ASCII key passed ``parse_api_key``; httpx then raised
``UnicodeEncodeError ... character '\\xe9' in position 11`` outside the typed-error wrapper, so
a key character and its position reached the failure, status and Events, and the step retried.
"""

from __future__ import annotations

import re

import httpx
import pytest
from temporalio.exceptions import ApplicationError

from activities.typed_errors import typed_errors
from decisionmodel.engine.runtime_client import RuntimeClient
from decisionmodel.errors import APIKeyInvalid, RuntimeRequestRejected
from decisionmodel.rollout.contracts import KeyRef
from kube.secrets import parse_api_key

REF = KeyRef(name="engine-key", key="token")
# Each holds a character httpx or h11 refuses in a header, between two markers.
BAD_KEYS = [
    "zq9-caf\u00e9-zq9",  # the é
    "zq9-\u2603-zq9",  # outside Latin-1
    "zq9-\u00a0-zq9",  # a non-breaking space
    "zq9-\x1b-zq9",  # ESC, a control character
    "zq9\tzq9",
]


def assert_nothing_of_the_key(message: str, key: str) -> None:
    assert "zq9" not in message
    assert "position" not in message and not re.search(r"\\x|\\u", message)
    assert not any(ord(c) > 0x7E or ord(c) < 0x20 for c in message)
    assert not any(c in message for c in key if not c.isalnum() and c not in "-")


@pytest.mark.parametrize("key", BAD_KEYS)
def test_a_key_no_header_can_carry_is_permanent_and_unquoted(key: str) -> None:
    with pytest.raises(APIKeyInvalid) as err:
        parse_api_key(key.encode(), "team-a", REF)
    assert err.value.permanent
    message = str(err.value)
    assert "team-a/engine-key" in message and "'token'" in message
    assert "spec.auth.apiKeySecretRef" in message and "printable ASCII" in message
    assert_nothing_of_the_key(message, key)


def test_undecodable_bytes_are_permanent_while_an_empty_key_stays_transient() -> None:
    """Filling an empty Secret is the fix while the rollout waits, as for a missing key."""
    with pytest.raises(APIKeyInvalid) as err:
        parse_api_key(b"zq9\xff\xfezq9", "team-a", REF)
    assert err.value.permanent and "zq9" not in str(err.value)
    with pytest.raises(APIKeyInvalid) as err:
        parse_api_key(b"\n", "team-a", REF)
    assert not err.value.permanent


@pytest.mark.parametrize("key", BAD_KEYS)
async def test_the_runtime_client_refuses_the_key_before_httpx_sees_it(key: str) -> None:
    """Defence in depth: a caller that skipped parse_api_key gets the typed error too."""
    with pytest.raises(APIKeyInvalid) as err:
        RuntimeClient("http://10.0.0.1:11435", api_key=key)
    assert err.value.permanent
    assert_nothing_of_the_key(str(err.value), key)


async def test_an_unencodable_request_body_is_typed_and_unquoted() -> None:
    """A lone surrogate (legal in a JSON string escape) makes httpx raise UnicodeEncodeError
    quoting it and its position; the client refuses the request instead."""
    sent: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(200, json={}))
    async with RuntimeClient("http://10.0.0.1:11435", transport=transport) as client:
        with pytest.raises(RuntimeRequestRejected) as err:
            await client.decide("laya:en", "zq9 \ud800 zq9", {"q": {"type": "noul"}})
    assert not sent
    assert_nothing_of_the_key(str(err.value), "\ud800")


async def test_an_untyped_encoding_error_leaves_the_activity_without_its_text() -> None:
    with pytest.raises(ApplicationError) as err:
        async with typed_errors():
            "Bearer zq9-caf\u00e9".encode("ascii")
    assert err.value.type == "ActivityFailed"
    assert "UnicodeEncodeError" in err.value.message
    assert_nothing_of_the_key(err.value.message, "\u00e9")
    assert err.value.__cause__ is None

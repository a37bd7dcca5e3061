"""The API key a Secret holds: trimmed for an HTTP header, refused when it cannot be one."""

from __future__ import annotations

import pytest

from decisionmodel.errors import APIKeyInvalid
from decisionmodel.rollout.contracts import KeyRef
from kube.secrets import parse_api_key

REF = KeyRef(name="engine-key", key="token")


def test_trailing_newline_from_a_file_is_not_part_of_the_key() -> None:
    assert parse_api_key(b"s3cret-token\n", "team-a", REF) == "s3cret-token"


@pytest.mark.parametrize(
    "raw", [b"", b"  \n", b"zq9\x00zq9", b"zq9\x7fzq9", b"\xffzq9\xfe", b"zq9\nzq9"]
)
def test_unusable_value_names_the_secret_and_field_but_not_the_value(raw: bytes) -> None:
    with pytest.raises(APIKeyInvalid) as err:
        parse_api_key(raw, "team-a", REF)
    message = str(err.value)
    assert "team-a/engine-key" in message and "spec.auth.apiKeySecretRef" in message
    assert "zq9" not in message

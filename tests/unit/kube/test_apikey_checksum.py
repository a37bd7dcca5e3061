"""The ``decisionmodel.io/apikey-checksum`` annotation rolls Pods on a key change without
publishing a bare hash of the key (issue 12, point 5). Pure."""

from __future__ import annotations

import hashlib

from decisionmodel.rollout.render_params import apikey_checksum

KEY = b"password"  # a guessable key: a bare sha256 of it is in every rainbow table
UID = "0b6c5f4e-5d7a-4c8e-9d51-2f1b0c3a9e77"


def test_the_annotation_is_not_a_bare_hash_of_the_key() -> None:
    value = apikey_checksum(KEY, UID)
    for digest in (hashlib.sha256, hashlib.sha1, hashlib.md5, hashlib.sha512):
        assert digest(KEY).hexdigest() not in value
    assert value.startswith("hmac-sha256:")


def test_it_needs_the_secret_uid_to_be_reproduced() -> None:
    """Who cannot read the Secret (and so its uid) cannot test a guessed key against it."""
    assert apikey_checksum(KEY, UID) != apikey_checksum(KEY, UID.replace("0b6c", "1b6c"))


def test_it_changes_with_the_key_and_only_with_it() -> None:
    """Same key, same Secret: the same value on every reconcile (no roll); a new key: a new
    value (the roll the rotation test in tests/e2e/controller relies on)."""
    assert apikey_checksum(KEY, UID) == apikey_checksum(KEY, UID)
    assert apikey_checksum(KEY, UID) != apikey_checksum(KEY + b"2", UID)

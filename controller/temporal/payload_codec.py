"""The optional payload codec: AES-256-GCM over every payload, keys by ID so they rotate.

Temporal stores workflow inputs, results, heartbeat details, summaries and (with
``DefaultFailureConverterWithEncodedAttributes``) failure messages and stack traces as the
client and worker hand them over; the codec encrypts them before they leave the process, so
Temporal (and anyone who can read its database or the namespace) sees ciphertext only.
Search attributes and workflow IDs are indexed by the server and stay in clear by nature.

Keys come from a directory with one file per key ID (a Kubernetes Secret mounted as a volume,
or a local directory), each holding 32 random bytes in base64. Payloads are encrypted with the
current key and carry its ID in the ``encryption-key-id`` metadata; any key present decrypts, so
a key is rotated by adding the new one, making it current, and removing the old one once no
history that must stay readable uses it (docs/payload-encryption.md).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)

ENCODING: Final = b"binary/encrypted"
KEY_ID_METADATA: Final = "encryption-key-id"
KEY_BYTES: Final = 32  # AES-256
NONCE_BYTES: Final = 12  # the GCM standard nonce; random per payload
KEY_HINT: Final = "32 random bytes, base64-encoded: `head -c 32 /dev/urandom | base64`"


class PayloadKeysInvalid(RuntimeError):
    """The codec's keys cannot be used; the message names the key ID or setting, never a key."""


class PayloadUndecryptable(ValueError):
    """A payload cannot be decrypted: unknown key ID, or altered / encrypted with another key."""


def load_keys(directory: Path) -> dict[str, bytes]:
    """Every key of ``directory``: file name = key ID. Dot-files are skipped (a Secret volume
    holds ``..data`` and timestamped directories next to the key files)."""
    if not directory.is_dir():
        raise PayloadKeysInvalid(f"payload keys directory {directory} does not exist")
    keys: dict[str, bytes] = {}
    for path in sorted(directory.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        keys[path.name] = _parse_key(path.name, path.read_bytes())
    if not keys:
        raise PayloadKeysInvalid(f"payload keys directory {directory} holds no key file")
    return keys


def _parse_key(key_id: str, raw: bytes) -> bytes:
    try:
        key = base64.b64decode(raw.strip(), validate=True)
    except binascii.Error:
        key = b""
    if len(key) != KEY_BYTES:
        raise PayloadKeysInvalid(f"payload key {key_id!r} is not {KEY_HINT}")
    return key


class AesGcmCodec(PayloadCodec):
    """Encrypts with the current key; decrypts with whichever key the payload names.

    The key ID is also the AES-GCM associated data, so a payload whose metadata was changed to
    name another key fails authentication instead of decrypting under the wrong one.
    """

    def __init__(self, keys: Mapping[str, bytes], current_key_id: str) -> None:
        super().__init__()
        if current_key_id not in keys:
            raise PayloadKeysInvalid(
                f"current payload key ID {current_key_id!r} has no key "
                f"(key IDs present: {', '.join(sorted(keys))})"
            )
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self.current_key_id = current_key_id

    @property
    def key_ids(self) -> list[str]:
        return sorted(self._ciphers)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.encrypt_all(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return self.decrypt_all(payloads)

    def encrypt_all(self, payloads: Iterable[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    def decrypt_all(self, payloads: Iterable[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        key_id = self.current_key_id.encode()
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current_key_id].encrypt(
            nonce, payload.SerializeToString(), key_id
        )
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: key_id}, data=nonce + sealed
        )

    def decrypt(self, payload: Payload) -> Payload:
        # Plain payloads pass: histories written before the codec was turned on stay readable
        # (and replayable) after it is.
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        raw_id = payload.metadata.get(KEY_ID_METADATA, b"")
        key_id = raw_id.decode("utf-8", "backslashreplace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise PayloadUndecryptable(
                f"payload encrypted with key ID {key_id!r}, which is not among the keys loaded "
                f"({', '.join(self.key_ids)}): add that key to the payload keys Secret"
            )
        data = payload.data
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], raw_id)
        except InvalidTag:
            raise PayloadUndecryptable(
                f"payload with key ID {key_id!r} fails authentication: altered, or encrypted "
                f"with a different key under that ID"
            ) from None
        return Payload.FromString(plain)


def codec_from_settings(keys_dir: Path | None, current_key_id: str | None) -> AesGcmCodec | None:
    """The codec when a keys directory is configured (the one switch), else None."""
    if keys_dir is None:
        return None
    if not current_key_id:
        raise PayloadKeysInvalid(
            "DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID must name the key to encrypt with when "
            "DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR is set"
        )
    return AesGcmCodec(load_keys(keys_dir), current_key_id)


def data_converter(codec: PayloadCodec | None) -> DataConverter:
    """The pydantic converter, plus the codec and encoded failure attributes when on."""
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )

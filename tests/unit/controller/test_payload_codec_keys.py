"""The AES-GCM payload codec: round trip, rotation, unknown key ID, tampering, key files."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes
from temporalio.exceptions import ApplicationError

from controller.cli import main as cli
from controller.temporal.client import TemporalSettings
from controller.temporal.payload_codec import (
    ENCODING,
    KEY_ID_METADATA,
    AesGcmCodec,
    PayloadKeysInvalid,
    PayloadUndecryptable,
    codec_from_settings,
    data_converter,
    load_keys,
)
from decisionmodel.rollout.contracts import DMRef

KEY_A = os.urandom(32)
KEY_B = os.urandom(32)
PLAIN = Payload(metadata={"encoding": b"json/plain"}, data=b'{"model":"laya:en"}')


def write_keys(directory: Path, **keys: bytes) -> Path:
    directory.mkdir(exist_ok=True)
    for key_id, key in keys.items():
        (directory / key_id).write_bytes(base64.b64encode(key) + b"\n")
    return directory


async def test_round_trip_encrypts_and_names_the_key() -> None:
    codec = AesGcmCodec({"k1": KEY_A}, "k1")
    [sealed] = await codec.encode([PLAIN])
    assert sealed.metadata["encoding"] == ENCODING
    assert sealed.metadata[KEY_ID_METADATA] == b"k1"
    assert b"laya" not in sealed.SerializeToString()
    assert await codec.decode([sealed]) == [PLAIN]


async def test_same_payload_encrypts_differently_each_time() -> None:
    codec = AesGcmCodec({"k1": KEY_A}, "k1")
    first, second = await codec.encode([PLAIN, PLAIN])
    assert first.data != second.data


async def test_rotation_encodes_with_current_and_decodes_with_any() -> None:
    old = AesGcmCodec({"2026-01": KEY_A}, "2026-01")
    [old_payload] = await old.encode([PLAIN])
    rotated = AesGcmCodec({"2026-01": KEY_A, "2026-06": KEY_B}, "2026-06")
    [new_payload] = await rotated.encode([PLAIN])
    assert new_payload.metadata[KEY_ID_METADATA] == b"2026-06"
    assert await rotated.decode([old_payload, new_payload]) == [PLAIN, PLAIN]


async def test_unknown_key_id_names_the_id_never_a_key() -> None:
    [sealed] = await AesGcmCodec({"retired": KEY_A}, "retired").encode([PLAIN])
    current = AesGcmCodec({"current": KEY_B}, "current")
    with pytest.raises(PayloadUndecryptable) as e:
        await current.decode([sealed])
    assert "'retired'" in str(e.value) and "current" in str(e.value)
    for key in (KEY_A, KEY_B):
        assert base64.b64encode(key).decode() not in str(e.value)
        assert key.hex() not in str(e.value)


@pytest.mark.parametrize("where", ["ciphertext", "nonce", "key id"])
async def test_tampering_is_an_error(where: str) -> None:
    codec = AesGcmCodec({"a": KEY_A, "b": KEY_B}, "a")
    [sealed] = await codec.encode([PLAIN])
    data = bytearray(sealed.data)
    if where == "ciphertext":
        data[-20] ^= 1
    elif where == "nonce":
        data[0] ^= 1
    sealed.data = bytes(data)
    if where == "key id":  # swapping the ID to another loaded key must not decrypt
        sealed.metadata[KEY_ID_METADATA] = b"b"
    with pytest.raises(PayloadUndecryptable, match="fails authentication"):
        await codec.decode([sealed])


async def test_plain_payloads_pass_decode() -> None:
    """Histories written before the codec was turned on stay readable."""
    assert await AesGcmCodec({"a": KEY_A}, "a").decode([PLAIN]) == [PLAIN]


def test_current_key_must_be_loaded() -> None:
    with pytest.raises(PayloadKeysInvalid, match="'missing' has no key"):
        AesGcmCodec({"a": KEY_A}, "missing")


def test_load_keys_from_a_secret_volume(tmp_path: Path) -> None:
    keys = write_keys(tmp_path / "keys", k1=KEY_A, k2=KEY_B)
    # What a Secret volume holds besides the keys: ..data and timestamped directories.
    (keys / "..2026_11_30_22_00_00.123").mkdir()
    (keys / "..data").symlink_to(keys / "..2026_11_30_22_00_00.123")
    assert load_keys(keys) == {"k1": KEY_A, "k2": KEY_B}


@pytest.mark.parametrize(
    "content",
    [b"not base64!", base64.b64encode(os.urandom(16)), b"", b"  \n"],
    # Fixed ids: the random key must not name the test (xdist workers collect the same ids).
    ids=["not-base64", "16-bytes", "empty", "blank"],
)
def test_a_bad_key_file_names_the_key_id_not_the_content(tmp_path: Path, content: bytes) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "broken").write_bytes(content)
    with pytest.raises(PayloadKeysInvalid) as e:
        load_keys(keys)
    assert "'broken'" in str(e.value) and "base64" in str(e.value)
    if content.strip():
        assert content.decode().strip() not in str(e.value)


def test_missing_or_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(PayloadKeysInvalid, match="does not exist"):
        load_keys(tmp_path / "absent")
    with pytest.raises(PayloadKeysInvalid, match="holds no key"):
        load_keys(tmp_path)


def test_off_by_default_and_one_setting_turns_it_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR", "DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID"):
        monkeypatch.delenv(var, raising=False)
    assert TemporalSettings().payload_codec() is None
    assert data_converter(None).payload_codec is None
    keys = write_keys(tmp_path / "keys", k1=KEY_A)
    monkeypatch.setenv("DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR", str(keys))
    with pytest.raises(PayloadKeysInvalid, match="DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID"):
        TemporalSettings().payload_codec()
    monkeypatch.setenv("DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID", "k1")
    codec = TemporalSettings().payload_codec()
    assert codec is not None and codec.current_key_id == "k1"
    assert codec_from_settings(None, "k1") is None


async def test_converter_encrypts_values_and_failure_messages() -> None:
    codec = AesGcmCodec({"k1": KEY_A}, "k1")
    converter = data_converter(codec)
    assert converter.failure_converter_class is DefaultFailureConverterWithEncodedAttributes
    ref = DMRef(namespace="team-secret", name="fraud", uid="u-1")
    [payload] = await converter.encode([ref])
    assert b"team-secret" not in payload.SerializeToString()
    assert await converter.decode([payload], [DMRef]) == [ref]

    failure = Failure()
    await converter.encode_failure(
        ApplicationError("model laya:en of team-secret/fraud not found"), failure
    )
    wire = failure.SerializeToString()
    assert b"team-secret" not in wire and b"laya" not in wire
    assert failure.message == "Encoded failure"
    decoded = await converter.decode_failure(failure)
    assert str(decoded) == "model laya:en of team-secret/fraud not found"


@pytest.mark.parametrize("command", [["worker"], ["codec-server"]])
def test_a_bad_setup_refuses_to_start_naming_the_key_id(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before any connection is attempted: exit 3 and the key ID, not the key."""
    keys = write_keys(tmp_path / "keys", k1=KEY_A)
    monkeypatch.setenv("DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR", str(keys))
    monkeypatch.setenv("DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID", "k2")
    assert cli.main(command) == 3
    err = capsys.readouterr().err
    assert "'k2' has no key" in err and "k1" in err
    assert base64.b64encode(KEY_A).decode() not in err

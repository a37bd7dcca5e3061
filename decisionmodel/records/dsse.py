"""DSSE envelopes (the in-toto attestation envelope cosign writes and verifies).

The signature covers the pre-authentication encoding of the payload type and the payload
(``DSSEv1 <len> <type> <len> <body>``), ECDSA P-256 with SHA-256, DER encoded: what
``cosign verify-blob-attestation --key`` checks. ``keyid`` is the sha256 of the public key
(SubjectPublicKeyInfo, DER), so that a record signed by another key is told from an altered
one.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

PAYLOAD_TYPE = "application/vnd.in-toto+json"
KEY_HELP = (
    "an unencrypted EC P-256 private key in PEM (openssl genpkey -algorithm EC -pkeyopt "
    "ec_paramgen_curve:P-256 -out key.pem)"
)


class RecordProblem(Exception):
    """A record that does not verify, or a key that cannot be used; the message names it."""


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def load_signing_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        raise RecordProblem(f"the signing key is not {KEY_HELP}: {str(e)[:120]}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise RecordProblem(f"the signing key is not {KEY_HELP}")
    return key


def load_public_key(pem: bytes) -> ec.EllipticCurvePublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as e:
        raise RecordProblem(f"the public key is not a PEM public key: {str(e)[:120]}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise RecordProblem("the public key is not an EC P-256 key (the signing key's pair)")
    return key


def key_id(key: ec.EllipticCurvePublicKey) -> str:
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def seal(key: ec.EllipticCurvePrivateKey, payload: bytes) -> bytes:
    """The envelope's JSON bytes (stored as they are: the chain hashes these bytes)."""
    sig = key.sign(pae(PAYLOAD_TYPE, payload), ec.ECDSA(hashes.SHA256()))
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": key_id(key.public_key()), "sig": base64.b64encode(sig).decode()}],
    }
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()


def open_envelope(envelope: bytes, key: ec.EllipticCurvePublicKey) -> bytes:
    """The payload, once a signature of ``key`` verifies over it; else RecordProblem saying
    whether the record was signed by another key or altered."""
    try:
        body: dict[str, Any] = json.loads(envelope)
        payload = base64.b64decode(body["payload"], validate=True)
        signatures = list(body["signatures"])
        kind = str(body["payloadType"])
    except (ValueError, KeyError, TypeError):
        raise RecordProblem("altered: not a DSSE envelope any more") from None
    if kind != PAYLOAD_TYPE:
        raise RecordProblem(f"altered: payload type {kind[:60]!r}, not {PAYLOAD_TYPE}")
    wanted = key_id(key)
    others = []
    for s in signatures:
        if not isinstance(s, dict):
            continue
        keyid = str(s.get("keyid") or "")
        if keyid and keyid != wanted:
            others.append(keyid)
            continue
        try:
            key.verify(base64.b64decode(s["sig"]), pae(kind, payload), ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, KeyError, ValueError, TypeError):
            continue
        return payload
    if others and len(others) == len(signatures):
        raise RecordProblem(
            f"signed by another key (keyid {others[0][:16]}…, the given key is {wanted[:16]}…)"
        )
    raise RecordProblem("altered: the signature does not match the record's content")

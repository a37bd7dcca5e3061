"""Signed decision records: signature, subject and chain (decisionmodel/records)."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from harness.decision_records import DIGEST, predicate

from decisionmodel.records.chain import StoredRecord, envelope_digest, verify_chain
from decisionmodel.records.dsse import (
    RecordProblem,
    load_public_key,
    load_signing_key,
    open_envelope,
    public_pem,
    seal,
)
from decisionmodel.records.statement import read_statement, statement_bytes


def chain(key: ec.EllipticCurvePrivateKey, n: int) -> list[StoredRecord]:
    stored: list[StoredRecord] = []
    previous = None
    for i in range(1, n + 1):
        envelope = seal(key, statement_bytes(predicate(i, previous)))
        stored.append(StoredRecord(f"decision-dm-{i}", envelope))
        previous = envelope_digest(envelope)
    return stored


@pytest.fixture
def key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def test_a_chain_verifies_and_reads_back(key: ec.EllipticCurvePrivateKey) -> None:
    stored = chain(key, 3)
    report = verify_chain(stored, key.public_key(), head=(3, envelope_digest(stored[2].envelope)))
    assert report.ok, report.problems
    assert [r.predicate.sequence for r in report.records] == [1, 2, 3]
    assert report.records[0].predicate.revision.digest == DIGEST


def test_one_byte_altered_is_named(key: ec.EllipticCurvePrivateKey) -> None:
    stored = chain(key, 2)
    body = json.loads(stored[1].envelope)
    payload = base64.b64decode(body["payload"]).replace(b"evaluation Passed", b"evaluation Pbssed")
    body["payload"] = base64.b64encode(payload).decode()
    stored[1] = StoredRecord(stored[1].name, json.dumps(body).encode())
    report = verify_chain(stored, key.public_key())
    assert not report.ok
    assert any("decision-dm-2: altered" in p for p in report.problems), report.problems


def test_another_key_is_named(key: ec.EllipticCurvePrivateKey) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    report = verify_chain(chain(other, 1), key.public_key())
    assert report.problems and "signed by another key" in report.problems[0]


def test_a_record_removed_from_the_middle_or_the_end_is_seen(
    key: ec.EllipticCurvePrivateKey,
) -> None:
    stored = chain(key, 4)
    middle = verify_chain([stored[0], stored[2], stored[3]], key.public_key())
    assert any("#2 to #2 are missing" in p for p in middle.problems), middle.problems
    first = verify_chain(stored[1:], key.public_key())
    assert any("#1 to #1 are missing" in p for p in first.problems), first.problems
    head = (4, envelope_digest(stored[3].envelope))
    newest = verify_chain(stored[:3], key.public_key(), head=head)
    assert any("the newest record, #4" in p for p in newest.problems), newest.problems
    # Without the head (the DecisionModel deleted), a removed newest record cannot be seen.
    assert verify_chain(stored[:3], key.public_key()).ok


def test_a_replaced_record_breaks_the_link(key: ec.EllipticCurvePrivateKey) -> None:
    stored = chain(key, 3)
    forged = seal(key, statement_bytes(predicate(2, stored[1].name)))  # wrong previous
    report = verify_chain([stored[0], StoredRecord("x", forged), stored[2]], key.public_key())
    assert any("names previous" in p for p in report.problems), report.problems


def test_the_subject_must_be_the_digest_the_record_names(key: ec.EllipticCurvePrivateKey) -> None:
    body = json.loads(statement_bytes(predicate(1, None)))
    body["subject"][0]["digest"]["sha256"] = "cd" * 32
    payload = json.dumps(body).encode()
    with pytest.raises(RecordProblem, match="subject"):
        read_statement(open_envelope(seal(key, payload), key.public_key()))


def test_keys_that_cannot_sign_or_verify_say_what_is_wanted() -> None:
    with pytest.raises(RecordProblem, match="P-256"):
        load_signing_key(b"not a key")
    rsa_like = ec.generate_private_key(ec.SECP384R1())
    with pytest.raises(RecordProblem, match="P-256"):
        load_public_key(public_pem(rsa_like))

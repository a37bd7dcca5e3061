"""A decision record verifies with cosign as well as with ``dmrollout verify`` (issue 38, item
6): the envelope dmrollout writes is the DSSE in-toto attestation cosign reads, its subject the
model digest (``--digest``, no blob needed: the model is in the registry), its predicate type
dmrollout's. Offline, with the public key, inside the network namespace (as hack/sign.sh).
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec
from harness.cosign import cosign_verifies
from harness.decision_records import DIGEST, predicate

from decisionmodel.records.dsse import public_pem, seal
from decisionmodel.records.statement import statement_bytes


def test_cosign_verifies_a_decision_record_by_its_model_digest(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pub = tmp_path / "records.pub"
    pub.write_bytes(public_pem(key))
    envelope = tmp_path / "record.json"
    envelope.write_bytes(seal(key, statement_bytes(predicate(1, None))))
    ok = cosign_verifies(pub, envelope, DIGEST)
    assert ok.returncode == 0, ok.stderr
    wrong = cosign_verifies(pub, envelope, "cd" * 32)
    assert wrong.returncode != 0
    other = tmp_path / "other.pub"
    other.write_bytes(public_pem(ec.generate_private_key(ec.SECP256R1())))
    assert cosign_verifies(other, envelope, DIGEST).returncode != 0

"""cosign, built from Go modules (hack/cosign.sh), for the signing tests."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from decisionmodel.records.statement import PREDICATE_TYPE

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def cosign() -> str:
    return subprocess.run(
        ["bash", str(REPO / "hack" / "cosign.sh"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def cosign_verifies(pub: Path, envelope: Path, digest: str) -> subprocess.CompletedProcess[str]:
    """``cosign verify-blob-attestation`` of a decision record against the model digest (its
    subject; no blob: the model is in the registry), offline with the public key."""
    return subprocess.run(
        [cosign(), "verify-blob-attestation", "--key", str(pub), "--signature", str(envelope),
         "--type", PREDICATE_TYPE, "--digest", digest, "--digestAlg", "sha256",
         "--insecure-ignore-tlog=true"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

"""Signed release artifacts with their provenance, verified offline (issue 38 item 5).

hack/sign.sh signs each artifact with cosign (built from Go modules, hack/cosign.sh) and
attests its SLSA v1 provenance, without a transparency log; this runs it inside the network
namespace, where nothing outside answers, and verifies as a user would with the public key:
the artifacts pass, and an altered artifact, another key, or a signature moved to another
artifact fail.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from harness.cosign import cosign

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "pw-not-in-any-output"


def key_pair(where: Path) -> tuple[Path, Path]:
    where.mkdir()
    env = {**os.environ, "COSIGN_PASSWORD": PASSWORD}
    subprocess.run([cosign(), "generate-key-pair"], cwd=where, env=env, check=True, timeout=60,
                   capture_output=True)  # fmt: skip
    return where / "cosign.key", where / "cosign.pub"


def verify(pub: Path, artifact: Path, signature: Path | None = None) -> tuple[bool, bool]:
    """(signature verifies, provenance verifies)"""
    sig = subprocess.run(
        [cosign(), "verify-blob", "--key", str(pub), "--signature",
         str(signature or Path(f"{artifact}.sig")), "--insecure-ignore-tlog=true", str(artifact)],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    att = subprocess.run(
        [cosign(), "verify-blob-attestation", "--key", str(pub), "--signature",
         f"{artifact}.provenance.json", "--type", "slsaprovenance1",
         "--insecure-ignore-tlog=true", str(artifact)],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    return sig.returncode == 0, att.returncode == 0


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, list[Path]]:
    key, pub = key_pair(tmp_path / "keys")
    artifacts = [tmp_path / "dmrollout-0.1.0.tgz", tmp_path / "dm.yaml"]
    artifacts[0].write_bytes(os.urandom(4096))
    artifacts[1].write_text("kind: Plugin\n")
    env = {
        **os.environ,
        "COSIGN_KEY": str(key),
        "COSIGN_PUB": str(pub),
        "COSIGN_PASSWORD": PASSWORD,
    }
    done = subprocess.run(
        ["bash", str(REPO / "hack" / "sign.sh"), *map(str, artifacts)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    return pub, artifacts


def test_each_artifact_verifies_with_the_public_key_offline(
    signed: tuple[Path, list[Path]],
) -> None:
    pub, artifacts = signed
    for a in artifacts:
        assert verify(pub, a) == (True, True), a
        assert PASSWORD not in Path(f"{a}.provenance.json").read_text()


def test_the_provenance_names_the_artifact_and_the_source_it_was_built_from(
    signed: tuple[Path, list[Path]],
) -> None:
    _, artifacts = signed
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    for a in artifacts:
        envelope = json.loads(Path(f"{a}.provenance.json").read_text())
        assert envelope["payloadType"] == "application/vnd.in-toto+json"
        statement = json.loads(base64.b64decode(envelope["payload"]))
        assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
        [subject] = statement["subject"]
        assert subject["digest"]["sha256"] == hashlib.sha256(a.read_bytes()).hexdigest()
        build = statement["predicate"]["buildDefinition"]
        assert build["externalParameters"]["source"]["digest"]["gitCommit"] == head
        uris = {d["uri"] for d in build["resolvedDependencies"]}
        assert {"file:Dockerfile", "file:pyproject.toml", "file:charts/dmrollout"} <= uris


def test_an_altered_artifact_another_key_or_a_moved_signature_fails(
    signed: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    pub, (chart, manifest) = signed
    _, other = key_pair(tmp_path / "other")
    assert verify(other, chart) == (False, False)
    assert verify(pub, manifest, signature=Path(f"{chart}.sig"))[0] is False
    chart.write_bytes(chart.read_bytes() + b"\0")
    assert verify(pub, chart) == (False, False)

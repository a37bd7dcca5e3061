"""The prefetch script, run by /bin/sh against a fake ``ollaya`` that writes (or fails to
write) the manifest: exit codes and termination messages are what dmrollout classifies."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from decisionmodel.engine.params import PrefetchParams
from decisionmodel.engine.render import render_prefetch_job
from decisionmodel.engine.render.prefetch_job import PREFETCH_SCRIPT

MANIFEST = b'{"schemaVersion":2,"config":{},"layers":[]}'
MANIFEST_DIGEST = hashlib.sha256(MANIFEST).hexdigest()
OTHER_DIGEST = "0" * 64

# The fake CLI: `ollaya pull MODEL` writes $FAKE_MANIFEST into $STORE_MANIFEST, or fails the
# way the real CLI does (message on stderr, non-zero exit).
FAKE_OLLAYA = """#!/bin/sh
[ "$1" = pull ] || exit 64
echo "pulling manifest"
case "$FAKE_MODE" in
  notfound) echo "Error: pull model manifest: model '$2' not found in registry" >&2; exit 1 ;;
  unreachable) echo "Error: registry error: connection refused" >&2; exit 1 ;;
  nowrite) echo "success"; exit 0 ;;
esac
mkdir -p "$(dirname "$STORE_MANIFEST")"
cat "$FAKE_MANIFEST" > "$STORE_MANIFEST"
echo "success"
"""


@dataclass
class Run:
    code: int
    termination: str
    stdout: str


RunScript = Callable[..., Run]


@pytest.fixture
def run_script(tmp_path: Path) -> RunScript:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ollaya"
    fake.write_text(FAKE_OLLAYA)
    fake.chmod(0o755)
    (tmp_path / "manifest.json").write_bytes(MANIFEST)
    term = tmp_path / "termination-log"
    # The real path is written by the kubelet's bind mount; point the script at a file here.
    script = PREFETCH_SCRIPT.replace("/dev/termination-log", str(term))

    def run(mode: str, expected: str, pinned: bool, model: str = "laya:en") -> Run:
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(tmp_path / "home"),
            "MODEL": model,
            "EXPECTED_DIGEST": expected,
            "DIGEST_PINNED": "true" if pinned else "false",
            "STORE_MANIFEST": str(tmp_path / "models/manifests/ollaya.dev/library/laya/en"),
            "FAKE_MODE": mode,
            "FAKE_MANIFEST": str(tmp_path / "manifest.json"),
        }
        proc = subprocess.run(
            ["/bin/sh", "-c", script],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
        )
        text = term.read_text() if term.exists() else ""
        return Run(proc.returncode, text, proc.stdout)

    return run


def test_matching_digest_succeeds(run_script: RunScript) -> None:
    r = run_script("ok", MANIFEST_DIGEST, pinned=True)
    assert r.code == 0
    assert r.termination == ""
    assert f"verified laya:en sha256:{MANIFEST_DIGEST}" in r.stdout
    assert "pulling manifest" in r.stdout  # the pull's progress reaches the Pod log


def test_missing_tag_is_model_not_found_exit_3(run_script: RunScript) -> None:
    r = run_script("notfound", MANIFEST_DIGEST, pinned=False, model="laya:nope")
    assert (r.code, r.termination) == (3, "ModelNotFound: laya:nope not found in registry\n")


def test_pinned_digest_mismatch_exit_4(run_script: RunScript) -> None:
    r = run_script("ok", OTHER_DIGEST, pinned=True)
    assert r.code == 4
    assert r.termination == f"DigestMismatch: expected {OTHER_DIGEST} got {MANIFEST_DIGEST}\n"


def test_resolved_digest_mismatch_is_tag_moved_exit_5(run_script: RunScript) -> None:
    r = run_script("ok", OTHER_DIGEST, pinned=False)
    assert r.code == 5
    assert r.termination == (
        f"TagMoved: laya:en now has digest {MANIFEST_DIGEST}, resolved {OTHER_DIGEST}\n"
    )


def test_other_pull_failure_is_transient_exit_1(run_script: RunScript) -> None:
    r = run_script("unreachable", MANIFEST_DIGEST, pinned=True)
    assert r.code == 1
    assert r.termination == (
        "PullFailed: ollaya pull exited 1: Error: registry error: connection refused\n"
    )


def test_manifest_not_written_is_transient_exit_1(run_script: RunScript) -> None:
    r = run_script("nowrite", MANIFEST_DIGEST, pinned=True)
    assert r.code == 1
    assert r.termination.startswith("ManifestMissing: ")


def test_model_name_is_data_not_code(run_script: RunScript, tmp_path: Path) -> None:
    # The name travels in env, quoted in the script: shell syntax in it is not executed.
    r = run_script("notfound", MANIFEST_DIGEST, pinned=False, model="x;$(touch pwned)")
    assert r.code == 3
    assert r.termination == "ModelNotFound: x;$(touch pwned) not found in registry\n"
    assert not (tmp_path / "pwned").exists()


def test_job_runs_exactly_this_script(default_prefetch: PrefetchParams) -> None:
    container = render_prefetch_job(default_prefetch)["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    assert container["args"] == [PREFETCH_SCRIPT]

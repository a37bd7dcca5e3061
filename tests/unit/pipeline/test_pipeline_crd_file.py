"""The committed DecisionModelPipeline CRD is the generator's output (never edited by hand)."""

from __future__ import annotations

from pathlib import Path

from decisionmodel.api.pipeline_crd import PIPELINE_CRD_FILE, render_pipeline_crd_yaml

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_crd_is_current() -> None:
    committed = (ROOT / PIPELINE_CRD_FILE).read_text()
    assert committed == render_pipeline_crd_yaml(), (
        "regenerate: python -m decisionmodel.api.pipeline_crd > " + PIPELINE_CRD_FILE
    )

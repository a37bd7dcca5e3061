"""The reference operator's revision hash, row by row against known answers its own Go code
computed (testdata/reference_revision_hashes.json names the file, commit and method), and the
recognition that keeps a reference-recorded stable from rolling on migration (issue 34)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decisionmodel.api import DecisionModelSpec
from decisionmodel.rollout.contracts import RevisionSpec
from decisionmodel.rollout.identity import revision_hash
from decisionmodel.rollout.reference_identity import (
    canonical_quantity,
    is_reference_revision,
    reference_canonical,
    reference_placement,
    reference_revision_hash,
)
from decisionmodel.rollout.spec_mapping import record_for

ANSWERS = json.loads(
    (Path(__file__).parent / "testdata" / "reference_revision_hashes.json").read_text()
)["cases"]
IDS = [case["name"] for case in ANSWERS]


def resolved(case: dict[str, Any]) -> RevisionSpec:
    """The case's spec as dmrollout reads it, resolved to the case's digest and image."""
    spec = DecisionModelSpec.model_validate(case["spec"])
    return RevisionSpec(
        engine=spec.engine,
        model=spec.model,
        device=spec.device,
        resources=spec.resources,
        scheduling=spec.scheduling.to_wire(),
        digest=case["digest"],
        image=case["image"],
    )


@pytest.mark.parametrize("case", ANSWERS, ids=IDS)
def test_the_reference_hash_equals_the_reference_operators_own(case: dict[str, Any]) -> None:
    revision = resolved(case)
    assert reference_canonical(revision) == case["canonical"]
    assert reference_placement(revision.scheduling) == (case["placement"] or None)
    assert reference_revision_hash(revision) == case["hash"]
    assert reference_revision_hash(revision, placement=False)[:10] == case["legacyHash"]


@pytest.mark.parametrize("case", ANSWERS, ids=IDS)
def test_a_reference_recorded_revision_is_recognised(case: dict[str, Any]) -> None:
    """Under its 16-hex name, its older 10-hex one, and (recorded before placement, so with no
    placement in status) the hash without placement."""
    revision = resolved(case)
    placement = case["placement"] or "none"
    assert is_reference_revision(case["hash"], revision, placement)
    assert is_reference_revision(case["hash10"], revision, placement)
    assert is_reference_revision(case["legacyHash"], revision, None)


def test_another_revision_is_not_recognised() -> None:
    case = next(c for c in ANSWERS if c["placement"])
    revision = resolved(case)
    other = revision.model_copy(update={"digest": "0" * 64})
    assert not is_reference_revision(case["hash"], other, case["placement"])
    # A stable that recorded its placement is not matched by the hash without it: a scheduling
    # change must roll out.
    assert not is_reference_revision(case["legacyHash"], revision, case["placement"])
    # dmrollout's own extension cannot be a reference revision.
    extended = revision.model_copy(
        update={"scheduling": {**revision.scheduling, "priorityClassName": "high"}}
    )
    assert not is_reference_revision(case["hash"], extended, case["placement"])


# Where dmrollout's own hash is the same bytes as the reference's: quantities written as
# Kubernetes prints them and no scheduling (or one whose keys sort as Go declares them).
# Everywhere else dmrollout keeps its own hash (changing it would roll its own DecisionModels
# on upgrade) and recognises the reference's.
AGREEING = {
    "minimal: no resources, no scheduling",
    "resources as the reference's own test",
    "other digest",
    "cuda device and image",
    "digest-pinned default image",
    "spec.image override",
    "model on another registry",
    "quantities exponent and large",
    "empty scheduling",
    # one key, so sorted and declared order agree
    "nodeSelector",
    "runtimeClassName",
    "tolerate every taint",
    "affinity with an empty term list",
}


def test_where_dmrollouts_own_hash_is_the_references() -> None:
    same = {c["name"] for c in ANSWERS if revision_hash(resolved(c)) == c["hash"]}
    assert same == AGREEING
    for case in ANSWERS:
        if case["name"] in AGREEING:
            revision = resolved(case)
            assert record_for(revision, case["digest"], case["image"]).hash == case["hash"]


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("1", "1"),
        (1, "1"),
        (2.5, "2500m"),
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("0.5Ki", "512"),
        ("2000M", "2G"),
        ("1e3", "1e3"),
        ("12e2", "1200"),
        ("0.0000000001", "1n"),
        ("0", "0"),
        ("0Gi", "0"),
        ("128974848", "128974848"),
    ],
)
def test_quantities_print_as_kubernetes_prints_them(written: Any, canonical: str) -> None:
    assert canonical_quantity(written) == canonical

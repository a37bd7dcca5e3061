"""The one mapping from a DecisionModel: revision identity, in-place settings, and the steady
state's objects input (the stable as recorded, today's replicas, cache and auth)."""

from __future__ import annotations

from typing import Any

import pytest
from harness.helpers import spec_hash

from decisionmodel.api import DecisionModel
from decisionmodel.engine.params import default_image
from decisionmodel.rollout.contracts import CachePolicy, DMRef, KeyRef, RevisionRecord, RevisionSpec
from decisionmodel.rollout.identity import placement_hash
from decisionmodel.rollout.spec_mapping import (
    record_for,
    revision_spec,
    stable_objects_input,
)

DIGEST = "c" * 64
NODE_SELECTOR = {"nodeSelector": {"pool": "gpu"}}


def dm(spec: dict[str, Any]) -> DecisionModel:
    return DecisionModel.from_k8s(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 4},
            "spec": spec,
        }
    )


def stable(**overrides: Any) -> RevisionRecord:
    fields: dict[str, Any] = {
        "hash": "0123456789abcdef",
        "model": "laya:en",
        "digest": DIGEST,
        "image": default_image("0.10.0", "cpu"),
        "runtime_version": "0.10.0",
        "resources": {"limits": {"cpu": "2"}},
    }
    return RevisionRecord(**(fields | overrides))


def test_record_for_the_spec_equals_the_identity_built_from_the_crd_types() -> None:
    model = dm({"model": "laya:en", "device": "cuda", "scheduling": NODE_SELECTOR})
    revision = revision_spec(model, DIGEST, "0.10.0")
    image = default_image("0.10.0", "cuda")
    expected = spec_hash(model.spec, DIGEST, image)
    assert record_for(revision, DIGEST).hash == expected
    assert record_for(revision, "sha256:" + DIGEST.upper(), image).hash == expected


def test_revision_spec_leaves_the_runtime_to_an_image_override() -> None:
    model = dm({"model": "laya:en", "image": "registry.local/ollaya:custom"})
    revision = revision_spec(model, None, "0.10.0")
    assert (revision.image, revision.runtime_version) == ("registry.local/ollaya:custom", None)
    assert revision.digest_pinned is False


def test_stable_input_takes_the_recorded_identity_and_todays_in_place_settings() -> None:
    model = dm(
        {
            "model": "laya:v2",  # the spec moved on: the stable still serves laya:en
            "replicas": 3,
            "cache": {
                "size": "20Gi",
                "accessModes": ["ReadWriteMany"],
                "downloadTokenSecretRef": {"name": "hf", "key": "token"},
            },
            "auth": {"apiKeySecretRef": {"name": "router-key", "key": "key"}},
        }
    )
    inp = stable_objects_input(model, stable(), "0.10.0")
    assert inp.dm == DMRef(namespace="ns", name="m", uid="u1", generation=4)
    assert inp.record == stable()
    assert inp.revision == RevisionSpec(
        model="laya:en",
        digest=DIGEST,
        runtime_version="0.10.0",
        resources={"limits": {"cpu": "2"}},
    )
    assert inp.replicas == 3
    # The serving Deployment never mounts the download token: only prefetch Jobs do.
    assert inp.cache == CachePolicy(size="20Gi", access_modes=["ReadWriteMany"])
    assert inp.api_key == KeyRef(name="router-key", key="key")


def test_stable_input_defaults_match_the_crd_defaults() -> None:
    inp = stable_objects_input(dm({"model": "laya:en"}), stable(), "0.10.0")
    assert (inp.replicas, inp.cache, inp.api_key) == (1, CachePolicy(), None)


@pytest.mark.parametrize(
    ("spec_scheduling", "recorded", "kept"),
    [
        (NODE_SELECTOR, placement_hash(NODE_SELECTOR), NODE_SELECTOR),
        # The spec's placement changed since the stable was promoted: the recorded hash cannot
        # be inverted, so nothing is applied rather than the new placement.
        ({"nodeSelector": {"pool": "cpu"}}, placement_hash(NODE_SELECTOR), {}),
        ({}, None, {}),
    ],
)
def test_stable_input_keeps_placement_only_when_it_is_the_recorded_one(
    spec_scheduling: dict[str, Any], recorded: str | None, kept: dict[str, Any]
) -> None:
    model = dm({"model": "laya:en", "scheduling": spec_scheduling})
    inp = stable_objects_input(model, stable(placement=recorded), "0.10.0")
    assert inp.revision.scheduling == kept


@pytest.mark.parametrize(
    ("image", "override"),
    [
        (default_image("0.10.0", "cpu"), None),
        ("registry.local/ollaya:custom", "registry.local/ollaya:custom"),
    ],
)
def test_stable_input_marks_only_a_non_default_image_as_an_override(
    image: str, override: str | None
) -> None:
    inp = stable_objects_input(dm({"model": "laya:en"}), stable(image=image), "0.11.0")
    assert inp.revision.image == override

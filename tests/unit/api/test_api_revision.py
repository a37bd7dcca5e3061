"""Revision identity: deterministic, sensitive to exactly the identity fields, pinned."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decisionmodel.api import DecisionModel, DecisionModelSpec, SchedulingSpec
from decisionmodel.rollout.contracts import RevisionIdentity, RevisionSpec
from decisionmodel.rollout.identity import (
    HASH_FIELDS,
    canonical_identity,
    canonical_json,
    placement_hash,
    revision_hash,
)
from decisionmodel.rollout.spec_mapping import record_for, revision_spec

DIGEST = "c305bd41e2f5f0b4d1b2dcb5f9a1e3c7a4d6e8f0b2c4d6e8f0a2c4e6a8b0c2d4"
OTHER_DIGEST = "0" * 64
IMAGE = "ghcr.io/ollaya-dev/ollaya:0.10.0"
RESOURCES = {"requests": {"memory": "3500Mi", "cpu": "1"}, "limits": {"memory": "4Gi"}}
SCHEDULING = {
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "nodeSelector": {"gpu": "t4"},
}

# Known answers, computed once (cross-checked with `printf '%s' '<json>' | sha256sum`). If one
# of these changes, every DecisionModel in every cluster would roll on upgrade: don't.
KNOWN_CANONICAL = (
    '{"engine":"ollaya","model":"laya:en","digest":"' + DIGEST + '","device":"cpu",'
    '"image":"ghcr.io/ollaya-dev/ollaya:0.10.0",'
    '"resources":{"limits":{"memory":"4Gi"},"requests":{"cpu":"1","memory":"3500Mi"}}}'
)
KNOWN_HASH = "6330705458964183"
KNOWN_PLACEMENT_JSON = (
    '{"nodeSelector":{"gpu":"t4"},'
    '"tolerations":[{"effect":"NoSchedule","key":"nvidia.com/gpu","operator":"Exists"}]}'
)
KNOWN_PLACEMENT = "a8ff5af475"
KNOWN_HASH_WITH_PLACEMENT = "6c1735de78ff390b"


def _inputs(**changes: Any) -> RevisionSpec:
    fields: dict[str, Any] = {
        "engine": "ollaya",
        "model": "laya:en",
        "digest": DIGEST,
        "device": "cpu",
        "image": IMAGE,
        "resources": RESOURCES,
    }
    fields.update(changes)
    return RevisionSpec(**fields)


def test_known_answer() -> None:
    inputs = _inputs()
    assert canonical_identity(inputs) == KNOWN_CANONICAL
    assert revision_hash(inputs) == KNOWN_HASH


def test_known_answer_with_placement() -> None:
    assert canonical_json(SCHEDULING) == KNOWN_PLACEMENT_JSON
    assert placement_hash(SCHEDULING) == KNOWN_PLACEMENT
    assert placement_hash(SchedulingSpec.model_validate(SCHEDULING)) == KNOWN_PLACEMENT
    inputs = _inputs(scheduling=SCHEDULING)
    assert canonical_identity(inputs) == KNOWN_CANONICAL[:-1] + ',"placement":"a8ff5af475"}'
    assert revision_hash(inputs) == KNOWN_HASH_WITH_PLACEMENT


def test_hash_shape() -> None:
    value = revision_hash(_inputs())
    assert len(value) == 16 and all(c in "0123456789abcdef" for c in value)
    placement = placement_hash(SCHEDULING)
    assert placement is not None and len(placement) == 10


def test_field_order_is_the_declared_order() -> None:
    # The hash format: these seven in this order, whatever is appended after them.
    assert HASH_FIELDS[:7] == (
        "engine", "model", "digest", "device", "image", "resources", "placement"
    )  # fmt: skip
    assert set(HASH_FIELDS) - {"placement"} < set(RevisionIdentity.model_fields)
    text = canonical_identity(_inputs(scheduling=SCHEDULING))
    positions = [text.index(f'"{name}":') for name in HASH_FIELDS]
    assert positions == sorted(positions)


def test_deterministic() -> None:
    assert revision_hash(_inputs()) == revision_hash(_inputs())


@pytest.mark.parametrize(
    "change",
    [
        {"model": "laya:multilingual"},
        {"digest": OTHER_DIGEST},
        {"device": "cuda"},
        {"image": "ghcr.io/ollaya-dev/ollaya:0.10.0-cuda"},
        {"resources": {"requests": {"memory": "3500Mi", "cpu": "2"}, "limits": {"memory": "4Gi"}}},
        {"resources": {}},
        {"scheduling": SCHEDULING},
    ],
    ids=lambda c: next(iter(c)),
)
def test_each_identity_field_changes_the_hash(change: dict[str, Any]) -> None:
    assert revision_hash(_inputs(**change)) != KNOWN_HASH


def _spec(**changes: Any) -> DecisionModelSpec:
    wire: dict[str, Any] = {"model": "laya:en", "resources": RESOURCES}
    wire.update(changes)
    return DecisionModelSpec.model_validate(wire)


def _spec_hash(spec: DecisionModelSpec, image: str = IMAGE, digest: str = DIGEST) -> str:
    dm = DecisionModel.model_validate(
        {"metadata": {"name": "m", "namespace": "ns"}, "spec": spec.to_wire()}
    )
    return record_for(revision_spec(dm, None, "0.10.0"), digest, image).hash


def test_from_spec_matches_the_known_answer() -> None:
    assert _spec_hash(_spec()) == KNOWN_HASH
    assert _spec_hash(_spec(scheduling=SCHEDULING)) == KNOWN_HASH_WITH_PLACEMENT


@pytest.mark.parametrize(
    "change",
    [
        {"replicas": 5},
        {"cache": {"size": "50Gi", "accessModes": ["ReadWriteMany"], "storageClassName": "x"}},
        {"auth": {"apiKeySecretRef": {"name": "key", "key": "token"}}},
        {
            "rollout": {
                "evaluation": {
                    "datasetRef": {"configMapRef": {"name": "g", "key": "c"}},
                    "minAccuracy": "0.9",
                },
                "promotion": "Manual",
                "timeouts": {"caching": "1h"},
            }
        },
        {"scheduling": {}},
        {"scheduling": {"nodeSelector": {}, "tolerations": []}},
        {"runtimeVersion": "0.10.0"},  # enters only through the image it selects
    ],
    ids=lambda c: next(iter(c)),
)
def test_in_place_fields_do_not_change_the_hash(change: dict[str, Any]) -> None:
    assert _spec_hash(_spec(**change)) == KNOWN_HASH


@pytest.mark.parametrize(
    "change",
    [
        {"model": "nli:latest"},
        {"device": "cuda"},
        {"resources": {}},
        {"scheduling": {"runtimeClassName": "nvidia"}},
        {"scheduling": {"affinity": {"nodeAffinity": {}}}},
    ],
    ids=lambda c: next(iter(c)),
)
def test_spec_identity_fields_change_the_hash(change: dict[str, Any]) -> None:
    assert _spec_hash(_spec(**change)) != KNOWN_HASH


def test_image_and_digest_arguments_change_the_hash() -> None:
    spec = _spec()
    assert _spec_hash(spec, image=IMAGE + "-cuda") != KNOWN_HASH
    assert _spec_hash(spec, digest=OTHER_DIGEST) != KNOWN_HASH


def test_placement_of_empty_scheduling_is_none() -> None:
    assert placement_hash(None) is None
    assert placement_hash({}) is None
    assert placement_hash(SchedulingSpec()) is None
    assert placement_hash({"nodeSelector": {}, "tolerations": [], "runtimeClassName": ""}) is None


def test_toleration_order_is_significant() -> None:
    # A list is ordered in the PodSpec; only object keys are canonicalised.
    a = {"key": "a", "operator": "Exists"}
    b = {"key": "b", "operator": "Exists"}
    assert placement_hash({"tolerations": [a, b]}) != placement_hash({"tolerations": [b, a]})


def test_a_record_refuses_a_bad_digest() -> None:
    with pytest.raises(ValueError):
        record_for(_inputs(), "sha256:abc", IMAGE)
    assert record_for(_inputs(), "sha256:" + DIGEST, IMAGE).hash == KNOWN_HASH


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


_leaf = st.one_of(st.text(max_size=8), st.integers(-(10**6), 10**6), st.booleans(), st.none())
_tree = st.recursive(
    _leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=6), children, max_size=4),
    ),
    max_leaves=12,
)
_objects = st.dictionaries(st.text(min_size=1, max_size=8), _tree, max_size=4)


@settings(max_examples=150, deadline=None)
@given(resources=_objects, scheduling=_objects, seed=st.integers(0, 2**32 - 1))
def test_key_order_does_not_matter(
    resources: dict[str, Any], scheduling: dict[str, Any], seed: int
) -> None:
    rng = random.Random(seed)
    original = _inputs(resources=resources, scheduling=scheduling)
    shuffled = _inputs(resources=_shuffled(resources, rng), scheduling=_shuffled(scheduling, rng))
    assert revision_hash(original) == revision_hash(shuffled)
    assert canonical_json(resources) == canonical_json(_shuffled(resources, rng))

"""Serving Pods are never BestEffort: built-in requests per measured model, overridable, recorded
in the revision but not in its hash."""

from __future__ import annotations

import pytest

from decisionmodel.engine.params import default_image
from decisionmodel.engine.sizing import DEFAULT_REQUESTS, default_requests, effective_resources
from decisionmodel.rollout.contracts import RevisionSpec
from decisionmodel.rollout.identity import revision_hash
from decisionmodel.rollout.spec_mapping import record_for

DIGEST = "d" * 64


@pytest.mark.parametrize(
    ("model", "memory"),
    [
        ("laya:en", "3456Mi"),
        ("127.0.0.1:5000/library/laya:multilingual", "2176Mi"),
        ("nli:latest", "3968Mi"),
        ("somebody/unmeasured:v1", DEFAULT_REQUESTS["memory"]),
        ("not a name", DEFAULT_REQUESTS["memory"]),
    ],
)
def test_every_model_gets_requests(model: str, memory: str) -> None:
    assert default_requests(model)["memory"] == memory
    assert "cpu" in default_requests(model)


def test_spec_requests_override_the_defaults_whole() -> None:
    own = {"requests": {"memory": "1Gi"}, "limits": {"memory": "2Gi"}}
    assert effective_resources("laya:en", own) == own
    limits_only = {"limits": {"cpu": "4"}}
    assert effective_resources("laya:en", limits_only) == {
        "limits": {"cpu": "4"},
        "requests": {"cpu": "1", "memory": "3456Mi"},
    }


def test_the_revision_records_the_defaults_but_its_hash_is_over_the_spec() -> None:
    revision = RevisionSpec(model="laya:en", runtime_version="0.10.0")
    record = record_for(revision, DIGEST)
    assert record.resources == {"requests": {"cpu": "1", "memory": "3456Mi"}}
    inputs = RevisionSpec(
        engine="ollaya",
        model="laya:en",
        digest=DIGEST,
        device="cpu",
        image=default_image("0.10.0", "cpu"),
        resources={},
    )
    assert record.hash == revision_hash(inputs)

"""A stable revision the reference operator recorded is the spec's revision: no rollout starts on
migration (docs/migration.md, issue 34). The hashes are the reference's own known answers
(tests/unit/api/testdata/reference_revision_hashes.json), recorded as the reference records a
stable: its 16-hex hash (10 hex in older releases), the image it ran (the tag, or the tag pinned
by digest), the placement hash or "none"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.reconciler.decide import decide
from decisionmodel.api import DecisionModel
from decisionmodel.engine.params import default_image
from decisionmodel.rollout.contracts import RevisionIdentity
from decisionmodel.rollout.dispatch import DispatchSettings, desired_revision
from decisionmodel.rollout.reference_identity import reference_revision_hash
from decisionmodel.vocabulary import Device

ANSWERS = json.loads(
    (Path(__file__).parents[1] / "api" / "testdata" / "reference_revision_hashes.json").read_text()
)["cases"]


def runs_default_image(case: dict[str, Any]) -> bool:
    tag = default_image("0.10.0", Device(case["spec"].get("device", "cpu")))
    return case["image"].partition("@")[0] == tag


# The reference's own spec.image override needs --allow-image-override in both; every other case
# runs the default image of the runtime release both default to.
CASES = [c for c in ANSWERS if runs_default_image(c)]


def reference_dm(
    case: dict[str, Any], hash_: str, placement: str | None, **spec: Any
) -> DecisionModel:
    stable = {
        "hash": hash_,
        "engine": "ollaya",
        "model": case["spec"]["model"],
        "digest": case["digest"],
        "device": case["spec"].get("device", "cpu"),
        "image": case["image"],
        "resources": case["spec"].get("resources", {}),
        "precision": "F32",
    }
    if placement is not None:
        stable["placement"] = placement
    return DecisionModel.from_k8s(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 1},
            "spec": {**case["spec"], **spec},
            "status": {"phase": "Ready", "stableRevision": stable},
        }
    )


def at_stable(obj: DecisionModel) -> bool:
    return decide(obj, desired_revision(obj, DispatchSettings()), []).at_stable


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_reference_stable_is_the_specs_revision(case: dict[str, Any]) -> None:
    placement = case["placement"] or "none"
    assert at_stable(reference_dm(case, case["hash"], placement))
    assert at_stable(reference_dm(case, case["hash10"], placement))
    # Recorded before placement was (none in status): the hash without it, at 10 hex.
    assert at_stable(reference_dm(case, case["legacyHash"], None))
    # With the digest pinned in the spec as well.
    assert at_stable(reference_dm(case, case["hash"], placement, digest=case["digest"]))


@pytest.mark.parametrize("case", CASES[:3] + [c for c in CASES if c["placement"]][:2])
def test_a_changed_spec_is_a_new_revision(case: dict[str, Any]) -> None:
    placement = case["placement"] or "none"
    assert not at_stable(reference_dm(case, case["hash"], placement, model="laya:v2"))
    assert not at_stable(reference_dm(case, case["hash"], placement, device="cuda"))
    assert not at_stable(reference_dm(case, case["hash"], placement, digest="0" * 64))
    changed = {"scheduling": {"nodeSelector": {"pool": "other"}}}
    assert not at_stable(reference_dm(case, case["hash"], placement, **changed))


@pytest.mark.parametrize("pin", ["", "@sha256:" + "5e" * 32])
def test_a_reference_stable_on_an_older_runtime_keeps_it(pin: str) -> None:
    """Recorded with the image of another runtime release and no runtimeVersion: under the
    default policy (Pinned) the spec's revision is that runtime's, so nothing rolls."""
    case = next(c for c in ANSWERS if c["name"] == "tolerations")
    image = "ghcr.io/ollaya-dev/ollaya:0.9.1" + pin
    revision = RevisionIdentity.model_validate(
        {**case["spec"], "digest": case["digest"], "image": image}
    )
    hash_ = reference_revision_hash(revision)
    obj = reference_dm({**case, "image": image}, hash_, case["placement"])
    assert at_stable(obj)
    follow = DispatchSettings(runtime_version_policy="FollowOperator")
    assert not decide(obj, desired_revision(obj, follow), []).at_stable

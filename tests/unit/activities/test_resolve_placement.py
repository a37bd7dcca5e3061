"""The resolve activity refuses a placement outside the operator's policy before anything leaves
the process: a hand-started workflow cannot get past the controller's check through the input."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.resolve import ResolveActivities
from decisionmodel.rollout.contracts import DMRef, ResolveInput, RevisionSpec

DIGEST = "ab" * 32


async def test_a_control_plane_toleration_in_the_input_is_refused_for_good() -> None:
    from decisionmodel.rollout.settings import RolloutSettings

    def no_registry(_: RolloutSettings) -> object:
        raise AssertionError("the registry must not be asked")

    acts = ResolveActivities(
        RolloutSettings(placement_profile="Strict"), resolver_factory=no_registry
    )  # type: ignore[arg-type]
    toleration = {"key": "node-role.kubernetes.io/master", "operator": "Exists"}
    inp = ResolveInput(
        dm=DMRef(namespace="n", name="m", uid="u"),
        revision=RevisionSpec(model="laya:en", scheduling={"tolerations": [toleration]}),
    )
    with pytest.raises(ApplicationError) as excinfo:
        await ActivityEnvironment().run(acts.resolve, inp)
    err = excinfo.value
    assert err.type == "PlacementRefused" and err.non_retryable
    assert "spec.scheduling.tolerations[0].key" in str(err)
    assert "DMROLLOUT_ALLOWED_TOLERATION_KEYS" in str(err)

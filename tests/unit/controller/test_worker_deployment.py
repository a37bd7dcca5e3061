"""The rollouts' worker as a build of a Worker Deployment (controller/worker/deployment.py)."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from pydantic import ValidationError
from temporalio.common import VersioningBehavior

from controller.worker.deployment import build_id, deployment_config
from decisionmodel.rollout.settings import RolloutSettings


def test_unversioned_unless_a_deployment_is_named() -> None:
    assert deployment_config(RolloutSettings()) is None


def test_versioned_worker_auto_upgrades_its_rollouts_by_default() -> None:
    """Issue 34: a plain upgrade that stops the old build must not strand a rollout."""
    config = deployment_config(
        RolloutSettings(worker_deployment_name="dmrollout", worker_build_id="1.5.0")
    )
    assert config is not None and config.use_worker_versioning
    assert (config.version.deployment_name, config.version.build_id) == ("dmrollout", "1.5.0")
    assert config.default_versioning_behavior == VersioningBehavior.AUTO_UPGRADE


def test_pinned_behavior_keeps_every_rollout_on_its_build() -> None:
    config = deployment_config(
        RolloutSettings(
            worker_deployment_name="dmrollout",
            worker_build_id="1.5.0",
            worker_versioning_behavior="Pinned",
        )
    )
    assert config is not None
    assert config.default_versioning_behavior == VersioningBehavior.PINNED


def test_build_id_defaults_to_the_installed_package_version() -> None:
    assert build_id(RolloutSettings()) == version("dmrollout")


def test_deployment_name_with_a_dot_is_refused_naming_the_setting() -> None:
    # Temporal joins deployment and build with a separator; a dot in the name is refused there.
    with pytest.raises(ValidationError, match="worker_deployment_name"):
        RolloutSettings(worker_deployment_name="dm.rollout")

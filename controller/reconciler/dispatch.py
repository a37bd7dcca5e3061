"""From a DecisionModel to the rollout it asks for: desired revision and workflow input.

Pure functions of the object and the operator settings, so the controller's decisions are
unit-testable and the same mapping serves the tests, the CLI and the controller.

Digest: ``spec.digest`` if set; else unknown until the workflow resolves the tag. The reference
reused the digest recorded on the stable or candidate for the same model, which pinned a new
revision to a tag's old bytes after the tag moved (issue 22); a recorded revision is still
recognised as the one a spec asks for (``DesiredRevision.is_revision``). With the digest known,
the requested revision is the real revision hash; without, it is the hash of the unresolved
identity (prefix ``u``), and the workflow reports the resolved hash. Either way a spec maps to
one workflow ID, so dispatch is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from decisionmodel.api import DecisionModel
from decisionmodel.api.status import RevisionStatus
from decisionmodel.engine.params import default_image
from decisionmodel.rollout.contracts import (
    RevisionRecord,
    RevisionSpec,
    RolloutInput,
    RolloutTuning,
)
from decisionmodel.rollout.identity import unresolved_hash
from decisionmodel.rollout.spec_mapping import (
    dm_ref,
    in_place,
    phase_timeouts,
    record_for,
    revision_spec,
    rollout_policy,
)


@dataclass(frozen=True)
class DispatchSettings:
    """The operator settings the mapping depends on."""

    runtime_version: str = "0.10.0"
    runtime_version_policy: Literal["Pinned", "FollowOperator"] = "Pinned"


@dataclass(frozen=True)
class DesiredRevision:
    revision: RevisionSpec
    requested_hash: str
    resolved: bool  # the hash is the real revision hash (digest known)
    image: str = ""

    def is_revision(self, recorded: RevisionStatus | None) -> bool:
        """True when ``recorded`` is the revision this spec asks for: the same hash, or, while
        the digest is unknown, the hash this spec has with the digest ``recorded`` resolved
        (a failed revision is recognised without reusing its digest)."""
        if recorded is None:
            return False
        if recorded.hash == self.requested_hash:
            return True
        if self.resolved or not recorded.digest or recorded.model != self.revision.model:
            return False
        return record_for(self.revision, recorded.digest, self.image).hash == recorded.hash


def _runtime_version(dm: DecisionModel, settings: DispatchSettings) -> str:
    # Policy Pinned (reference default): an unset runtimeVersion keeps the stable's runtime,
    # so an operator upgrade with a newer default image starts no rollout. FollowOperator: the
    # operator's default, so an upgrade rolls every DecisionModel that leaves it unset.
    if dm.spec.runtime_version:
        return dm.spec.runtime_version
    stable = dm.status.stable_revision if dm.status else None
    pinned = settings.runtime_version_policy == "Pinned"
    if pinned and stable is not None and stable.runtime_version:
        return stable.runtime_version
    return settings.runtime_version


def runtime_update_available(dm: DecisionModel, settings: DispatchSettings) -> str | None:
    """The newer default runtime a Pinned DecisionModel is not on, or None.

    Only for a DecisionModel that leaves both spec.runtimeVersion and spec.image unset (the
    others chose their runtime) and whose stable revision recorded another runtime version.
    """
    if settings.runtime_version_policy != "Pinned" or dm.spec.runtime_version or dm.spec.image:
        return None
    stable = dm.status.stable_revision if dm.status else None
    if stable is None or not stable.runtime_version:
        return None
    if stable.runtime_version == settings.runtime_version:
        return None
    return settings.runtime_version


def image_for(dm: DecisionModel, settings: DispatchSettings) -> str:
    if dm.spec.image:
        return dm.spec.image
    return default_image(_runtime_version(dm, settings), dm.spec.device)


def desired_revision(dm: DecisionModel, settings: DispatchSettings) -> DesiredRevision:
    spec = dm.spec
    # Only a pinned digest is known at dispatch (issue 22): a new revision of a tag-named model
    # resolves the tag again, so a tag re-published upstream is followed, and a retry after
    # DigestMismatch asks the registry instead of failing on the same digest. The stable is
    # still recognised without a resolve (``DesiredRevision.is_revision``), so an unchanged
    # spec starts nothing.
    digest = spec.digest
    revision = revision_spec(dm, digest, _runtime_version(dm, settings))
    image = image_for(dm, settings)
    if digest is not None:
        requested = record_for(revision, digest, image).hash
        return DesiredRevision(revision, requested, resolved=True, image=image)
    unresolved = unresolved_hash(revision.model_copy(update={"image": image}))
    return DesiredRevision(revision, unresolved, resolved=False, image=image)


def rollout_input(
    dm: DecisionModel,
    settings: DispatchSettings,
    tuning: RolloutTuning | None = None,
    retry_token: str | None = None,
) -> RolloutInput:
    """The workflow's argument: references only (Secret/ConfigMap names), never values."""
    desired = desired_revision(dm, settings)
    spec = dm.spec
    stable = dm.status.stable_revision if dm.status else None
    policy = rollout_policy(dm)  # the activities compare it with the live spec's again
    return RolloutInput(
        dm=dm_ref(dm),
        requested_revision=desired.requested_hash,
        revision=desired.revision,
        **in_place(dm),
        evaluation=policy.evaluation,
        promotion=policy.promotion,
        timeouts=phase_timeouts(spec.rollout.timeouts),
        stable=record_of(stable),
        retry_token=retry_token,
        tuning=tuning or RolloutTuning(),
        post_promotion_watch_seconds=spec.rollout.post_promotion_watch_seconds,
    )


def record_of(rev: RevisionStatus | None) -> RevisionRecord | None:
    """A recorded revision from status, as the rollout contracts carry it (None if incomplete):
    every identity field by name."""
    if rev is None or not rev.digest or not rev.model:
        return None
    recorded = rev.model_dump(mode="json", exclude_none=True)
    recorded["scheduling"] = rev.scheduling.to_wire() if rev.scheduling else {}
    return RevisionRecord.model_validate(recorded)

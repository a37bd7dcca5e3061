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

import functools
import re
from dataclasses import dataclass
from itertools import product
from typing import Literal

from decisionmodel.api import DecisionModel
from decisionmodel.api.status import RevisionStatus
from decisionmodel.engine.params import DEFAULT_IMAGE_REPOSITORY, default_image
from decisionmodel.engine.render.labels import ANNOTATION_ROLLBACK_TO
from decisionmodel.rollout.contracts import (
    RevisionRecord,
    RevisionSpec,
    RolloutInput,
    RolloutTuning,
)
from decisionmodel.rollout.identity import unresolved_hash
from decisionmodel.rollout.reference_identity import is_reference_revision, same_serving_image
from decisionmodel.rollout.rollback_to import named, rollback_plan
from decisionmodel.rollout.settings import package_version
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
    # DMROLLOUT_DECISION_RECORDS_NAMESPACE is set: each rollout writes signed records.
    decision_records: bool = False


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
        if not recorded.digest or recorded.model != self.revision.model:
            return False
        if self.resolved:
            return recorded.digest == self.revision.digest and self._is_reference(recorded)
        if record_for(self.revision, recorded.digest, self.image).hash == recorded.hash:
            return True
        return self._is_reference(recorded)

    def _is_reference(self, recorded: RevisionStatus) -> bool:
        """True when the reference operator recorded this spec's revision (docs/migration.md):
        its hash over the recorded digest and the image this spec runs, or the image it
        recorded when that is the same tag pinned to a digest (the reference's own
        sameServingImage: older releases recorded the tag, newer ones the tag and its digest)."""
        images = [self.image]
        if recorded.image and same_serving_image(recorded.image, self.image):
            images.append(recorded.image)
        return any(
            is_reference_revision(
                recorded.hash,
                self.revision.model_copy(update={"digest": recorded.digest, "image": image}),
                recorded.placement,
            )
            for image in images
        )


def _runtime_version(dm: DecisionModel, settings: DispatchSettings) -> str:
    # Policy Pinned (reference default): an unset runtimeVersion keeps the stable's runtime,
    # so an operator upgrade with a newer default image starts no rollout. FollowOperator: the
    # operator's default, so an upgrade rolls every DecisionModel that leaves it unset.
    if dm.spec.runtime_version:
        return dm.spec.runtime_version
    stable = dm.status.stable_revision if dm.status else None
    pinned = settings.runtime_version_policy == "Pinned"
    if pinned and stable is not None:
        recorded = stable.runtime_version or _default_image_version(stable.image)
        if recorded:
            return recorded
    return settings.runtime_version


_DEFAULT_IMAGE = re.compile(
    re.escape(DEFAULT_IMAGE_REPOSITORY)
    + r":([0-9]+\.[0-9]+\.[0-9]+)(-cuda)?(@sha256:[a-f0-9]{64})?"
)


def _default_image_version(image: str | None) -> str | None:
    """The runtime release of a recorded default image (tag, or tag pinned by digest): a stable
    the reference operator recorded without runtimeVersion keeps its runtime too (issue 34)."""
    match = _DEFAULT_IMAGE.fullmatch(image or "")
    return match[1] if match else None


def runtime_update_available(dm: DecisionModel, settings: DispatchSettings) -> str | None:
    """The newer default runtime a Pinned DecisionModel is not on, or None.

    Only for a DecisionModel that leaves both spec.runtimeVersion and spec.image unset (the
    others chose their runtime) and whose stable revision recorded another runtime version.
    """
    if settings.runtime_version_policy != "Pinned" or dm.spec.runtime_version or dm.spec.image:
        return None
    stable = dm.status.stable_revision if dm.status else None
    recorded = stable and (stable.runtime_version or _default_image_version(stable.image))
    if not recorded or recorded == settings.runtime_version:
        return None
    return settings.runtime_version


def image_for(dm: DecisionModel, settings: DispatchSettings) -> str:
    if dm.spec.image:
        return dm.spec.image
    return default_image(_runtime_version(dm, settings), dm.spec.device)


def rollback_target(dm: DecisionModel) -> RevisionStatus | None:
    """The revision a ``decisionmodel.io/rollback-to`` in force asks for in place of the spec
    (decisionmodel.rollout.rollback_to: taken into status.rollbackTo, ended by the next spec
    change), or None: the spec's revision is desired."""
    rollback = rollback_plan(dm).in_force
    return rollback.target if rollback is not None else None


def rollback_refusal(dm: DecisionModel) -> str | None:
    """Why ``decisionmodel.io/rollback-to`` is not followed (None: unset or followed)."""
    wanted = (dm.metadata.annotations or {}).get(ANNOTATION_ROLLBACK_TO)
    if not wanted or named(dm.status, wanted) is not None:
        return None
    status = dm.status
    known = (
        [r.hash for r in (status.stable_revision, status.previous_revision) if r] if status else []
    )
    return (
        f"{ANNOTATION_ROLLBACK_TO}={wanted} names no successful revision this DecisionModel "
        f"records (only the stable or the previous one may be named: {', '.join(known) or 'none'}"
        f"); it is not followed: fix or remove the annotation"
    )


def _recorded_revision(rev: RevisionStatus) -> DesiredRevision:
    """The rollback target's whole recorded identity (model, digest, device, resources, image,
    placement), as a pinned request: a normal, gated rollout brings it back under its own hash.

    Status records what the Pods ran (the built-in requests when the spec set none; the image
    the runtime version selects), while the hash is over what the spec asked; so the request is
    the one of the few spellings that gives the recorded hash back, checked, never guessed."""
    record = record_of(rev)
    assert record is not None  # rollback_target checked digest and model
    fields = record.identity()
    for resources, image in product((record.resources, {}), (None, record.image)):
        revision = RevisionSpec(
            **{**fields, "resources": resources, "image": image}, digest_pinned=True
        )
        if record_for(revision, record.digest, record.image).hash == record.hash:
            return DesiredRevision(revision, record.hash, resolved=True, image=record.image or "")
    # No spelling gives the hash back (a record from another version of the hash): roll the
    # recorded identity out as it ran; it serves the same bytes under a new hash.
    revision = RevisionSpec(**fields, digest_pinned=True)
    again = record_for(revision, record.digest, record.image).hash
    return DesiredRevision(revision, again, resolved=True, image=record.image or "")


def desired_revision(dm: DecisionModel, settings: DispatchSettings) -> DesiredRevision:
    target = rollback_target(dm)
    if target is not None:
        return _recorded_revision(target)
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
        controller_build=controller_build(),
        decision_records=settings.decision_records,
    )


@functools.cache
def controller_build() -> str:
    """This controller's build (the installed package's version), for the decision records."""
    return package_version()


def record_of(rev: RevisionStatus | None) -> RevisionRecord | None:
    """A recorded revision from status, as the rollout contracts carry it (None if incomplete):
    every identity field by name."""
    if rev is None or not rev.digest or not rev.model:
        return None
    recorded = rev.model_dump(mode="json", exclude_none=True)
    recorded["scheduling"] = rev.scheduling.to_wire() if rev.scheduling else {}
    return RevisionRecord.model_validate(recorded)

"""The one mapping from a DecisionModel to what a rollout and the renderers are given.

- :func:`revision_spec`: the identity inputs of the revision the spec asks for;
- :func:`record_for`: the revision's identity once its digest is known (the hash in the
  workflow ID, status and object names) — dispatch computes the requested hash with it, the
  resolve activity the resolved one, so both always agree;
- :func:`cache_policy`, :func:`api_key_ref`, :func:`evaluation_policy`, :func:`phase_timeouts`:
  the in-place settings and the policy, as references (never a Secret value);
- :func:`rollout_policy`: the policy that decides whether a revision may be promoted, whose
  digest the controller and the activities compare with a running rollout's;
- :func:`stable_objects_input`: the stable revision as recorded with today's in-place settings,
  what the controller's steady state renders.

Every copy between the shapes goes by the names ``contracts.RevisionIdentity`` and
``contracts.InPlace`` declare, so a new spec field is declared there, not copied here
(CONTRIBUTING.md "Where to add a spec field"); only ``in_place`` names the in-place ones. Pure
functions.
"""

from __future__ import annotations

from typing import Any

from decisionmodel.api import DecisionModel
from decisionmodel.api.spec import (
    CacheSpec,
    DecisionModelSpec,
    EvaluationSpec,
    SecretKeySelector,
    WireModel,
)
from decisionmodel.api.spec import Timeouts as TimeoutsSpec
from decisionmodel.engine.params import DEFAULT_RUNTIME_VERSION, default_image
from decisionmodel.engine.sizing import effective_resources
from decisionmodel.rollout.contracts import (
    CachePolicy,
    DMRef,
    EvaluationPolicy,
    KeyRef,
    PhaseTimeouts,
    RevisionIdentity,
    RevisionObjectsInput,
    RevisionRecord,
    RevisionSpec,
    RolloutPolicy,
    SliceGates,
)
from decisionmodel.rollout.identity import placement_hash, revision_hash
from decisionmodel.rollout.reference_identity import reference_placement


def dm_ref(dm: DecisionModel) -> DMRef:
    meta = dm.metadata
    return DMRef(
        namespace=meta.namespace or "default",
        name=meta.name,
        uid=meta.uid or "",
        generation=meta.generation or 0,
    )


def revision_spec(dm: DecisionModel, digest: str | None, runtime_version: str) -> RevisionSpec:
    """The identity inputs of the spec's revision: every identity field the spec has, by name.
    ``digest`` is spec.digest or one reused from status (None: resolve finds it);
    ``runtime_version`` is the one the policy chose (ignored with spec.image, which names the
    runtime itself)."""
    spec = dm.spec
    given = {
        name: _wire(getattr(spec, name))
        for name in RevisionIdentity.model_fields
        if name in DecisionModelSpec.model_fields
    }
    return RevisionSpec(
        **{
            **given,
            "digest": digest,
            "runtime_version": runtime_version if not spec.image else None,
        },
        digest_pinned=spec.digest is not None,
    )


def _wire(value: Any) -> Any:
    return value.to_wire() if isinstance(value, WireModel) else value


def digest_hex(digest: str) -> str:
    return digest.strip().lower().removeprefix("sha256:")


def effective_image(
    revision: RevisionSpec, default_runtime_version: str = DEFAULT_RUNTIME_VERSION
) -> tuple[str, str | None]:
    """(image the revision runs, runtime version recorded). ``spec.image`` wins; else the
    engine's image of ``spec.runtimeVersion`` or the operator's default runtime version."""
    if revision.image:
        return revision.image, revision.runtime_version
    version = revision.runtime_version or default_runtime_version
    return default_image(version, revision.device), version


def record_for(
    revision: RevisionSpec,
    digest: str,
    image: str | None = None,
    *,
    default_runtime_version: str = DEFAULT_RUNTIME_VERSION,
) -> RevisionRecord:
    """The RevisionRecord of ``revision`` once its digest is known: the one construction of a
    revision's identity. ``image`` None derives it (:func:`effective_image`). The hash is
    ``revision_hash`` over {engine, model, digest, device, image, resources, placement}
    (``scheduling`` in ``RevisionSpec`` is the wire form, as ``SchedulingSpec.to_wire()``)."""
    bare = digest_hex(digest)
    if image is None:
        image, runtime_version = effective_image(revision, default_runtime_version)
    else:
        runtime_version = revision.runtime_version
    resolved = revision.model_copy(update={"digest": bare, "image": image})
    placement = placement_hash(revision.scheduling)
    return RevisionRecord(
        **{
            **resolved.identity(),
            "runtime_version": runtime_version,
            # What the Pods run (built-in requests when the spec sets none), recorded so the
            # stable keeps them; the hash is over the spec's resources only.
            "resources": effective_resources(revision.model, revision.resources),
            "scheduling": dict(revision.scheduling) if placement else {},
        },
        hash=revision_hash(resolved),
        placement=placement,
    )


def _key_ref(ref: SecretKeySelector | None) -> KeyRef | None:
    return KeyRef(name=ref.name, key=ref.key) if ref else None


def api_key_ref(dm: DecisionModel) -> KeyRef | None:
    return _key_ref(dm.spec.auth.api_key_secret_ref)


def cache_policy(cache: CacheSpec) -> CachePolicy:
    return CachePolicy(
        size=str(cache.size),
        storage_class_name=cache.storage_class_name,
        access_modes=[m.value for m in cache.access_modes],
        download_token=_key_ref(cache.download_token_secret_ref),
    )


def in_place(dm: DecisionModel) -> dict[str, Any]:
    """The spec's in-place settings (``contracts.InPlace``): what every rollout step that renders
    or probes the Pods is given, and what the steady state applies to the stable."""
    spec = dm.spec
    return {
        "replicas": spec.replicas,
        "cache": cache_policy(spec.cache),
        "api_key": api_key_ref(dm),
    }


def evaluation_policy(ev: EvaluationSpec | None) -> EvaluationPolicy | None:
    if ev is None:
        return None
    ref = ev.dataset_ref
    if ref.config_map_ref is not None:
        cm = ref.config_map_ref
        dataset = KeyRef(kind="ConfigMap", name=cm.name, key=cm.key)
    else:
        assert ref.secret_ref is not None  # exactly one source: validated by the model
        dataset = KeyRef(kind="Secret", name=ref.secret_ref.name, key=ref.secret_ref.key)
    return EvaluationPolicy(
        dataset=dataset,
        min_accuracy=str(ev.min_accuracy),
        max_accuracy_drop=str(ev.max_accuracy_drop) if ev.max_accuracy_drop else None,
        max_ece=str(ev.max_ece) if ev.max_ece else None,
        max_ece_increase=str(ev.max_ece_increase) if ev.max_ece_increase else None,
        max_cases=ev.max_cases,
        max_negative_flip_rate=ev.max_negative_flip_rate,
        confidence=ev.confidence,
        on_inconclusive=ev.on_inconclusive.value if ev.on_inconclusive else None,
        slices=(
            SliceGates(
                min_accuracy=ev.slices.min_accuracy,
                max_accuracy_drop=ev.slices.max_accuracy_drop,
                min_cases=ev.slices.min_cases,
            )
            if ev.slices is not None
            else None
        ),
        sequential=ev.sequential or None,
    )


def rollout_policy(dm: DecisionModel) -> RolloutPolicy:
    """The live policy of ``dm``: what a rollout dispatched now would enforce (the same two
    fields ``decisionmodel.rollout.dispatch.rollout_input`` puts into the workflow input)."""
    rollout = dm.spec.rollout
    return RolloutPolicy(
        evaluation=evaluation_policy(rollout.evaluation),
        promotion=rollout.effective_promotion.value,
    )


def phase_timeouts(timeouts: TimeoutsSpec) -> PhaseTimeouts:
    return PhaseTimeouts(
        caching=int(timeouts.caching_duration.total_seconds()),
        starting=int(timeouts.starting_duration.total_seconds()),
        evaluating=int(timeouts.evaluating_duration.total_seconds()),
        decision=int(timeouts.decision_duration.total_seconds()),
    )


def stable_objects_input(
    dm: DecisionModel, stable: RevisionRecord, default_runtime_version: str
) -> RevisionObjectsInput:
    """The stable revision as recorded, with today's in-place settings (replicas, cache, auth)
    from the spec: never the live identity fields."""
    spec = dm.spec
    # The recorded constraints (revisions recorded before they were); else today's spec when it
    # still hashes to the recorded placement (the hash cannot be inverted), by dmrollout's hash
    # or by the reference operator's (a stable it recorded, docs/migration.md).
    scheduling = dict(stable.scheduling) or spec.scheduling.to_wire()
    if stable.placement not in (placement_hash(scheduling), reference_placement(scheduling)):
        scheduling = {}
    recorded = RevisionSpec(
        model=stable.model, device=stable.device, runtime_version=stable.runtime_version
    )
    default, _ = effective_image(recorded, default_runtime_version)
    revision = RevisionSpec(
        **{
            **stable.identity(),
            # A recorded image other than the runtime's default was an override.
            "image": stable.image if stable.image and stable.image != default else None,
            "scheduling": scheduling,
        }
    )
    settings = in_place(dm)
    settings["cache"] = settings["cache"].model_copy(update={"download_token": None})
    return RevisionObjectsInput(dm=dm_ref(dm), record=stable, revision=revision, **settings)

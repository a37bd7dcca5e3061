"""The resolve activity: guards, tag → digest, and the revision's recorded identity.

Order, each step before anything leaves the process: parse ``spec.model`` (explicit tag
required, InvalidModelName), the allowed-registries and insecure-registry guard
(RegistryNotAllowed), the image-override guard (ImageOverrideNotAllowed), the placement guard
(PlacementRefused, decisionmodel.engine.placement) — all permanent — then
the digest: the input's digest when given (``spec.digest``, or the one the controller reused
from status for the same model), else the registry's (ModelNotFound permanent; RegistryUnavailable
and RegistryError transient: Temporal retries them, and each failed attempt shows
Resolved=False with the reason and the fix at once, so a rollout held by its registry says why
instead of sitting in Resolving).

The record is built by ``decisionmodel.rollout.spec_mapping.record_for``, the one construction of a
revision's identity, which the controller's dispatch uses too: both always agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from temporalio import activity

from activities import step_status
from activities.step_status import writes_step_status
from activities.typed_errors import OnGuard, show_guards, typed_errors
from decisionmodel.engine.names import ModelRef, check_registry_allowed, parse_model_name
from decisionmodel.engine.placement import guard_placement
from decisionmodel.engine.resolver import RegistryResolver
from decisionmodel.errors import ImageOverrideNotAllowed, InvalidDigest
from decisionmodel.rollout.contracts import (
    RESOLVE,
    ResolveInput,
    ResolveResult,
    RevisionSpec,
)
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.rollout.spec_mapping import digest_hex, record_for
from decisionmodel.vocabulary import ConditionType
from kube.client import Kube

ResolverFactory = Callable[[RolloutSettings], RegistryResolver]


def parse_and_guard(revision: RevisionSpec, settings: RolloutSettings) -> ModelRef:
    """The permanent checks of resolve, in order; returns the parsed model name."""
    ref = parse_model_name(revision.model, default_registry=settings.ollaya_registry)
    check_registry_allowed(ref, settings.allowed_registries, settings.allow_insecure_registries)
    if revision.image and not settings.allow_image_override:
        raise ImageOverrideNotAllowed(
            f"spec.image {revision.image!r} is set but the operator runs without "
            "--allow-image-override; remove spec.image (use spec.runtimeVersion) or enable "
            "the flag (Helm manager.allowImageOverride)"
        )
    # Placement first checked here, before anything exists (replicas: by start, the step that
    # applies them); the controller checked the live spec before it started this rollout.
    guard_placement(revision.scheduling, None, settings.placement_policy())
    return ref


def _default_resolver(settings: RolloutSettings) -> RegistryResolver:
    return RegistryResolver(
        allowed_registries=settings.allowed_registries,
        allow_insecure=settings.allow_insecure_registries,
    )


class ResolveActivities:
    def __init__(
        self,
        settings: RolloutSettings,
        resolver_factory: ResolverFactory = _default_resolver,
        on_resolve_duration: Callable[[float], None] | None = None,
        kube: Kube | None = None,
    ) -> None:
        self.settings = settings
        # Where a registry that holds the step is shown (Resolved=False); None: not shown
        # (tests that run the activity without a cluster).
        self.kube = kube
        # decisionmodel_registry_resolve_duration_seconds (seed 004): observed only on a real
        # registry call, where the call happens — in the worker.
        self.on_resolve_duration = on_resolve_duration
        # One resolver (one HTTP connection pool) per call: the activity may run on another
        # event loop than the one a long-lived client was created on (tests, worker restarts),
        # and a resolve is one request, so pooling across calls gains nothing.
        self.resolver_factory = resolver_factory

    def _on_guard(self, inp: ResolveInput) -> OnGuard | None:
        if self.kube is None:
            return None
        return show_guards(self.kube, inp.dm, ConditionType.RESOLVED, inp.status)

    @activity.defn(name=RESOLVE)
    @writes_step_status(step_status.resolved)
    async def resolve(self, inp: ResolveInput) -> ResolveResult:
        async with typed_errors(self._on_guard(inp)):
            revision = inp.revision
            ref = parse_and_guard(revision, self.settings)
            if revision.digest:
                digest = digest_hex(revision.digest)
                if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                    # The CRD pattern refuses this; a hand-made workflow input may not.
                    raise InvalidDigest(
                        "spec.digest must be 64 lowercase hex characters (sha256 of the "
                        "registry manifest bytes)"
                    )
                from_registry = False
            else:
                began = time.monotonic()
                async with self.resolver_factory(self.settings) as resolver:
                    digest = (await resolver.resolve(ref)).digest
                if self.on_resolve_duration is not None:
                    self.on_resolve_duration(time.monotonic() - began)
                from_registry = True
            record = record_for(
                revision, digest, default_runtime_version=self.settings.runtime_version
            )
            return ResolveResult(
                record=record,
                canonical=ref.canonical,
                store_manifest_path=ref.store_manifest_path,
                resolved_from_registry=from_registry,
            )

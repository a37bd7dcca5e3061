"""The resolve activity: guards, tag → digest, and the revision's recorded identity.

Order, each step before anything leaves the process: parse ``spec.model`` (explicit tag
required, InvalidModelName), the allowed-registries and insecure-registry guard
(RegistryNotAllowed), the image-override guard (ImageOverrideNotAllowed) — all permanent — then
the digest: the input's digest when given (``spec.digest``, or the one the controller reused
from status for the same model), else the registry's (ModelNotFound permanent, RegistryError
transient: Temporal retries it).

:func:`record_for` is pure and is the one construction of a revision's identity: the controller
imports it to compute the hash it starts a workflow under, so both always agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from temporalio import activity

from activities.errors import typed_errors
from activities.settings import RolloutSettings
from decisionmodel.engine_params import DEFAULT_RUNTIME_VERSION, default_image
from decisionmodel.errors import DmrolloutError, ImageOverrideNotAllowed
from decisionmodel.names import ModelRef, check_registry_allowed, parse_model_name
from decisionmodel.resolver import RegistryResolver
from decisionmodel.revision import RevisionInputs, placement_hash, revision_hash
from workflows.contracts import RESOLVE, ResolveInput, ResolveResult, RevisionRecord, RevisionSpec

ResolverFactory = Callable[[RolloutSettings], RegistryResolver]


class InvalidDigest(DmrolloutError):
    """A digest in the workflow input is not 64 hex (the CRD refuses it; a hand-made input
    may not)."""

    reason = "InvalidDigest"
    permanent = True


def _digest_hex(digest: str) -> str:
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
    """The RevisionRecord of ``revision`` once its digest is known. Pure.

    ``image`` is the runtime image the revision runs; None derives it (see
    :func:`effective_image`). The hash is ``revision_hash`` over {engine, model, digest,
    device, image, resources, placement}, exactly as ``RevisionInputs.from_spec`` builds it, so
    it equals the hash of the same spec computed from the CRD types (``scheduling`` in
    ``RevisionSpec`` is the wire form, camelCase, as ``SchedulingSpec.to_wire()`` gives it).
    """
    bare = _digest_hex(digest)
    if image is None:
        image, runtime_version = effective_image(revision, default_runtime_version)
    else:
        runtime_version = revision.runtime_version
    inputs = RevisionInputs(
        engine=revision.engine,
        model=revision.model,
        digest=bare,
        device=revision.device,
        image=image,
        resources=dict(revision.resources),
        placement=placement_hash(revision.scheduling),
    )
    return RevisionRecord(
        hash=revision_hash(inputs),
        engine=revision.engine,
        model=revision.model,
        digest=bare,
        device=revision.device,
        image=image,
        runtime_version=runtime_version,
        resources=dict(revision.resources),
        placement=inputs.placement,
    )


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
    ) -> None:
        self.settings = settings
        # decisionmodel_registry_resolve_duration_seconds (seed 004): observed only on a real
        # registry call, where the call happens — in the worker.
        self.on_resolve_duration = on_resolve_duration
        # One resolver (one HTTP connection pool) per call: the activity may run on another
        # event loop than the one a long-lived client was created on (tests, worker restarts),
        # and a resolve is one request, so pooling across calls gains nothing.
        self.resolver_factory = resolver_factory

    @activity.defn(name=RESOLVE)
    async def resolve(self, inp: ResolveInput) -> ResolveResult:
        async with typed_errors():
            revision = inp.revision
            ref = parse_and_guard(revision, self.settings)
            if revision.digest:
                digest = _digest_hex(revision.digest)
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

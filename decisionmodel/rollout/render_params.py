"""Activity inputs + operator settings → the engine renderers' params.

The renderers (``decisionmodel.engine.render``) never see the CRD nor the operator's settings; this
module is where the two meet: the image (spec image only with ``--allow-image-override``, else
the default image of the runtime version), the registry mirror (``OLLAYA_REGISTRY`` only for
host-less model names), the proxy environment and the weights mirror (prefetch Jobs only).
Pure functions: no I/O, so every activity renders the same objects from the same inputs.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import TypeVar

from decisionmodel.engine.names import parse_model_name
from decisionmodel.engine.params import (
    OwnerRef,
    PrefetchParams,
    ProxyEnv,
    RevisionParams,
    Scheduling,
    SecretKeyRef,
    ServiceParams,
    ServingParams,
    StoreParams,
    default_image,
)
from decisionmodel.engine.placement import guard_placement
from decisionmodel.engine.render.labels import store_pvc_name
from decisionmodel.engine.sizing import effective_resources
from decisionmodel.errors import ImageOverrideNotAllowed, InvalidRevisionParams
from decisionmodel.rollout.contracts import DMRef, KeyRef, RevisionObjectsInput, RevisionSpec
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import Device

P = TypeVar("P")


def owner_ref(dm: DMRef) -> OwnerRef:
    return OwnerRef(name=dm.name, uid=dm.uid)


def serving_image(revision: RevisionSpec, settings: RolloutSettings) -> str:
    """spec.image when the operator allows overrides (ImageOverrideNotAllowed otherwise), else
    the default image of spec.runtimeVersion or the operator's runtime version."""
    if revision.image:
        if not settings.allow_image_override:
            raise ImageOverrideNotAllowed(
                f"spec.image {revision.image!r} is set but the operator runs without "
                "--allow-image-override; remove spec.image (or use spec.runtimeVersion)"
            )
        return revision.image
    return default_image(revision.runtime_version or settings.runtime_version, revision.device)


def prefetch_image(revision: RevisionSpec, settings: RolloutSettings) -> str:
    """The pull needs no GPU and the ``-cuda`` images are amd64-only (render.prefetch_job):
    the CPU build of the same runtime version, or the user's image when overrides are on."""
    if revision.image:
        return serving_image(revision, settings)
    return default_image(revision.runtime_version or settings.runtime_version, Device.CPU)


def model_has_host(model: str) -> bool:
    """True when ``spec.model`` names its registry (``http(s)://…``, or a first segment that
    reads as a host), following decisionmodel.engine.names' grammar."""
    lowered = model.strip().lower()
    if lowered.startswith(("http://", "https://")):
        return True
    segments = lowered.split("/")
    first = segments[0]
    return len(segments) >= 2 and ("." in first or ":" in first or first == "localhost")


def registry_url(model: str, settings: RolloutSettings) -> str | None:
    """``OLLAYA_REGISTRY`` for Pods: the operator's registry for host-less names only; a name
    with a host pulls from that host whatever the mirror."""
    if model_has_host(model):
        return None
    return settings.ollaya_registry.rstrip("/")


def store_manifest_path(inp: RevisionObjectsInput, settings: RolloutSettings) -> str:
    """From the resolve result when the workflow passed it, else recomputed the same way."""
    if inp.store_manifest_path:
        return inp.store_manifest_path
    ref = parse_model_name(inp.revision.model, default_registry=settings.ollaya_registry)
    return ref.store_manifest_path


def proxy_env(settings: RolloutSettings) -> ProxyEnv:
    return ProxyEnv(
        http_proxy=settings.http_proxy,
        https_proxy=settings.https_proxy,
        no_proxy=settings.no_proxy,
    )


def secret_key_ref(ref: KeyRef | None) -> SecretKeyRef | None:
    return None if ref is None else SecretKeyRef(name=ref.name, key=ref.key)


APIKEY_CHECKSUM_PREFIX = "hmac-sha256:"


def apikey_checksum(value: bytes, secret_uid: str) -> str:
    """The ``decisionmodel.io/apikey-checksum`` annotation: it changes when the key's bytes
    change (so the Pods roll), and publishes no bare hash of the key.

    An HMAC-SHA256 of the value keyed by the Secret's uid: anyone who can read the Deployment
    can read the annotation, but testing a guessed key against it needs the uid, which only a
    reader of the Secret (who can read the key itself) sees. A re-created Secret has a new uid
    and rolls the Pods once, which is harmless. The controller's in-place rotation must compute
    the same value, so this is the one place."""
    key = f"dmrollout/apikey-checksum/{secret_uid}".encode()
    return APIKEY_CHECKSUM_PREFIX + hmac.new(key, value, hashlib.sha256).hexdigest()


def _validated(build: Callable[[], P]) -> P:
    try:
        return build()
    except ValueError as e:  # pydantic's ValidationError, default_image's version check
        # pydantic lists the offending fields and values; none of them is a secret (only
        # Secret names and keys reach the params).
        raise InvalidRevisionParams(f"the revision cannot be rendered: {e}") from None


def store_params(inp: RevisionObjectsInput) -> StoreParams:
    return _validated(
        lambda: StoreParams(
            owner=owner_ref(inp.dm),
            namespace=inp.dm.namespace,
            revision=inp.record.hash,
            store_size=inp.cache.size,
            access_modes=tuple(inp.cache.access_modes),
            storage_class_name=inp.cache.storage_class_name,
        )
    )


def prefetch_params(inp: RevisionObjectsInput, settings: RolloutSettings) -> PrefetchParams:
    # The workflow input is not trusted for policy: the placement is checked again here, before
    # anything is created (PlacementRefused, permanent).
    guard_placement(inp.revision.scheduling, None, settings.placement_policy())
    manifest = store_manifest_path(inp, settings)
    return _validated(
        lambda: PrefetchParams(
            owner=owner_ref(inp.dm),
            namespace=inp.dm.namespace,
            revision=inp.record.hash,
            model=inp.revision.model,
            digest=inp.record.digest,
            device=inp.revision.device,
            image=prefetch_image(inp.revision, settings),
            scheduling=Scheduling.model_validate(inp.revision.scheduling),
            store_claim_name=store_pvc_name(inp.dm.name, inp.record.hash),
            registry_url=registry_url(inp.revision.model, settings),
            digest_pinned=inp.revision.digest_pinned,
            store_manifest_path=manifest,
            caching_timeout_seconds=inp.caching_timeout_seconds,
            hf_endpoint=settings.ollaya_hf_endpoint,
            proxy=proxy_env(settings),
            download_token_secret_ref=secret_key_ref(inp.cache.download_token),
            scratch_size_limit=settings.scratch_size_limit,
        )
    )


def serving_params(
    inp: RevisionObjectsInput,
    settings: RolloutSettings,
    checksum: str | None = None,
    *,
    recorded: bool = False,
) -> ServingParams:
    """``recorded``: the stable revision restored from status, whose placement passed the policy
    when it rolled out (the controller bounds its replicas itself); anything else is checked
    against the placement policy first (PlacementRefused)."""
    if not recorded:
        guard_placement(inp.revision.scheduling, inp.replicas, settings.placement_policy())
    derived = {
        "owner": owner_ref(inp.dm),
        "namespace": inp.dm.namespace,
        "revision": inp.record.hash,
        "digest": inp.record.digest,
        "image": serving_image(inp.revision, settings),
        "scheduling": Scheduling.model_validate(inp.revision.scheduling),
        "store_claim_name": store_pvc_name(inp.dm.name, inp.record.hash),
        "registry_url": registry_url(inp.revision.model, settings),
        "resources": effective_resources(inp.revision.model, inp.revision.resources),
        "access_modes": tuple(inp.cache.access_modes),
        "api_key_secret_ref": secret_key_ref(inp.api_key),
        "apikey_checksum": checksum,
        "scratch_size_limit": settings.scratch_size_limit,
    }
    # The identity and in-place fields the params name alike (model, device, replicas, and any
    # added later) pass through as they are.
    given = {**inp.revision.identity(), **inp.in_place()}
    same = {k: v for k, v in given.items() if k in ServingParams.model_fields}
    return _validated(lambda: ServingParams(**{**same, **derived}))


def revision_params(dm: DMRef, revision: str) -> RevisionParams:
    return _validated(
        lambda: RevisionParams(owner=owner_ref(dm), namespace=dm.namespace, revision=revision)
    )


def service_params(dm: DMRef, stable_revision: str) -> ServiceParams:
    return _validated(
        lambda: ServiceParams(
            owner=owner_ref(dm), namespace=dm.namespace, stable_revision=stable_revision
        )
    )

"""Parameters of the ollaya engine's renderers: everything they need, and nothing of the CRD.

As in the Go reference's ``internal/engine/engine.go``, the caller maps a DecisionModel (its
spec, or a revision recorded in status) onto these objects and the renderers in
``decisionmodel.engine.render`` map them onto Kubernetes objects. The renderers never see the CRD,
so the stable revision can be rendered from its recorded identity without touching the live
spec (REFERENCE "Revision identity").

One model per rendered object family; they share field names so a caller can fill several of
them from the same mapping. All are frozen: a params object is a value.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from decisionmodel.vocabulary import Device

API_VERSION: Final = "decisionmodel.io/v1alpha1"
KIND: Final = "DecisionModel"

DEFAULT_IMAGE_REPOSITORY = "ghcr.io/ollaya-dev/ollaya"
# The runtime release the engine defaults to (seed 000 §2: ollaya 0.10.0, spikes 001/006).
DEFAULT_RUNTIME_VERSION = "0.10.0"
DEFAULT_STORE_SIZE = "10Gi"
# sizeLimit of the /tmp and $HOME emptyDirs: the runtime keeps small state there (keys, the
# pull log) while the model lives in the store PVC; a Pod writing more is evicted by the
# kubelet instead of filling the node's disk (issue 12, point 3).
DEFAULT_SCRATCH_SIZE_LIMIT = "1Gi"
# spec.rollout.timeouts.caching default, 30m (REFERENCE "API").
DEFAULT_CACHING_TIMEOUT_SECONDS = 30 * 60

# ReadOnlyMany is not a valid store mode: the prefetch Job must write the store (seed 001,
# "Scaling").
AccessMode = Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"]

_DM_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DM_NAME_MAX = 43
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_REVISION_RE = re.compile(r"^[a-z0-9]{1,16}$")
_DIGEST_RE = re.compile(r"^[a-f0-9]{64}$")
_RUNTIME_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_STORE_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_URL_RE = re.compile(r"^https?://[^\s/@]+(/[^\s@]*)?$")


def default_image(
    runtime_version: str = DEFAULT_RUNTIME_VERSION, device: Device = Device.CPU
) -> str:
    """The engine's image for a runtime version and device: ``-cuda`` images for GPUs
    (seed 000 §2: ``:0.10.0-cuda`` is a separate, amd64-only build). The ghcr tag has no
    ``v`` prefix."""
    if not _RUNTIME_VERSION_RE.match(runtime_version):
        raise ValueError(f"runtime version must be x.y.z, got {runtime_version!r}")
    suffix = "-cuda" if device == Device.CUDA else ""
    return f"{DEFAULT_IMAGE_REPOSITORY}:{runtime_version}{suffix}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _CamelFrozen(BaseModel):
    """Frozen, and also accepts the CRD's camelCase names, so a caller can validate a spec
    fragment (``spec.scheduling``, ``apiKeySecretRef``) straight into it."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
    )


class OwnerRef(_Frozen):
    """The DecisionModel that controls every rendered object."""

    name: str
    uid: str = Field(min_length=1)
    api_version: Literal["decisionmodel.io/v1alpha1"] = API_VERSION
    kind: Literal["DecisionModel"] = KIND

    @field_validator("name")
    @classmethod
    def _dm_name(cls, v: str) -> str:
        # 43 leaves room for the -pf-<16 hex> Job suffix within 63 (REFERENCE "API").
        if len(v) > _DM_NAME_MAX or not _DM_NAME_RE.match(v):
            raise ValueError(f"DecisionModel name must be a DNS-1035 label of <= 43 chars: {v!r}")
        return v


class SecretKeyRef(_CamelFrozen):
    """A key in a Secret of the DM's namespace. Only the reference travels; the value is
    read by the kubelet."""

    name: str = Field(min_length=1)
    key: str = Field(min_length=1)


class Scheduling(_CamelFrozen):
    """``spec.scheduling``, passed through to the Pod spec (seed 000 §8)."""

    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    affinity: dict[str, Any] | None = None
    runtime_class_name: str | None = None
    priority_class_name: str | None = None


class ProxyEnv(_Frozen):
    """The operator's proxy environment, offered to the prefetch Job. The renderer copies
    only credential-free proxy URLs (seed 001, "Behind an HTTP proxy")."""

    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: str | None = None


class ObjectParams(_Frozen):
    """What every rendered object needs: its owner and namespace. The DM name is the
    owner's name."""

    owner: OwnerRef
    namespace: str

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        if len(v) > 63 or not _DNS_LABEL_RE.match(v):
            raise ValueError(f"namespace must be a DNS-1123 label: {v!r}")
        return v

    @property
    def dm_name(self) -> str:
        return self.owner.name


class ServiceParams(ObjectParams):
    """The DM's Service selects the stable revision."""

    stable_revision: str

    @field_validator("stable_revision")
    @classmethod
    def _rev(cls, v: str) -> str:
        return _check_revision(v)


class RevisionParams(ObjectParams):
    """Objects that belong to one revision. ``render_pdb`` needs no more than this."""

    revision: str

    @field_validator("revision")
    @classmethod
    def _rev(cls, v: str) -> str:
        return _check_revision(v)


class StoreParams(RevisionParams):
    """The per-revision model store PVC (seed 000 §7)."""

    store_size: str = DEFAULT_STORE_SIZE
    access_modes: tuple[AccessMode, ...] = Field(default=("ReadWriteOnce",), min_length=1)
    storage_class_name: str | None = None


class _ModelParams(RevisionParams):
    """Fields shared by the serving Deployment and the prefetch Job."""

    model: str
    """Pull name as written in spec.model, e.g. ``laya:en``."""
    digest: str
    device: Device = Device.CPU
    image: str = Field(min_length=1)
    """Resolved by the caller (``default_image`` unless spec.image / runtimeVersion)."""
    scheduling: Scheduling = Field(default_factory=Scheduling)
    store_claim_name: str = Field(min_length=1)
    registry_url: str | None = None
    """Base URL of a mirror registry (``OLLAYA_REGISTRY``); None for the runtime default."""
    scratch_size_limit: str = Field(default=DEFAULT_SCRATCH_SIZE_LIMIT, min_length=1)
    """sizeLimit of the /tmp and $HOME emptyDirs (the operator's ``scratch_size_limit``)."""

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        # The name reaches `ollaya pull` as an argument: refuse anything that could read as
        # a flag or split into words, whatever validation the caller did before.
        if not v or v.startswith("-") or any(c.isspace() for c in v):
            raise ValueError(f"invalid model name: {v!r}")
        return v

    @field_validator("digest")
    @classmethod
    def _digest(cls, v: str) -> str:
        if not _DIGEST_RE.match(v):
            raise ValueError("digest must be 64 lowercase hex characters")
        return v

    @field_validator("registry_url")
    @classmethod
    def _registry(cls, v: str | None) -> str | None:
        return _check_url(v, "registry_url")


class ServingParams(_ModelParams):
    """The serving Deployment of one revision."""

    replicas: int = Field(default=1, ge=0)
    resources: dict[str, Any] = Field(default_factory=dict)
    """Container ``resources`` passthrough (requests/limits/claims)."""
    access_modes: tuple[AccessMode, ...] = Field(default=("ReadWriteOnce",), min_length=1)
    """The store's access modes; they choose the Deployment strategy."""
    api_key_secret_ref: SecretKeyRef | None = None
    apikey_checksum: str | None = None

    @field_validator("resources")
    @classmethod
    def _resources(cls, v: dict[str, Any]) -> dict[str, Any]:
        unknown = set(v) - {"requests", "limits", "claims"}
        if unknown:
            raise ValueError(f"unknown resources fields: {sorted(unknown)}")
        return v


class PrefetchParams(_ModelParams):
    """The prefetch Job of one revision (seed 000 §7, seed 001 "Prefetch failures")."""

    digest_pinned: bool
    """True when spec.digest pinned the digest (a mismatch is DigestMismatch, exit 4); False
    when dmrollout resolved it from the tag (a mismatch means the tag moved, exit 5)."""
    store_manifest_path: str
    """Manifest file inside the store, relative, e.g. ``manifests/ollaya.dev/library/laya/en``."""
    caching_timeout_seconds: int = Field(default=DEFAULT_CACHING_TIMEOUT_SECONDS, ge=60, le=86400)
    hf_endpoint: str | None = None
    proxy: ProxyEnv = Field(default_factory=ProxyEnv)
    download_token_secret_ref: SecretKeyRef | None = None

    @field_validator("store_manifest_path")
    @classmethod
    def _manifest_path(cls, v: str) -> str:
        parts = v.split("/")
        if (
            len(parts) < 2
            or parts[0] != "manifests"
            or not all(_STORE_SEGMENT_RE.match(p) and p not in (".", "..") for p in parts)
        ):
            raise ValueError(f"store_manifest_path must be a relative manifests/... path: {v!r}")
        return v

    @field_validator("hf_endpoint")
    @classmethod
    def _hf(cls, v: str | None) -> str | None:
        return _check_url(v, "hf_endpoint")


def _check_revision(v: str) -> str:
    if not _REVISION_RE.match(v):
        raise ValueError(f"revision must be 1-16 lowercase alphanumerics: {v!r}")
    return v


def _check_url(v: str | None, field: str) -> str | None:
    # No userinfo: these values are rendered in plain text into Pod specs.
    if v is not None and not _URL_RE.match(v):
        raise ValueError(f"{field} must be an http(s) URL without credentials: {v!r}")
    return v

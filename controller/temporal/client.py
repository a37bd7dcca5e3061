"""Connecting to Temporal: address, namespace, TLS / mTLS, API key; and the namespace checks.

Platform teams bring their own Temporal cluster (self-hosted with mTLS, or Temporal Cloud with an
API key); the local environment uses the dev server on loopback without TLS.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from pydantic import Field, PrivateAttr
from pydantic_settings import BaseSettings, SettingsConfigDict
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, Interceptor, TLSConfig
from temporalio.common import SearchAttributeKey
from temporalio.envconfig import ClientConfigProfile
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from controller.temporal.payload_codec import AesGcmCodec, codec_from_settings, data_converter
from decisionmodel.vocabulary import Reason
from workflows import search_attributes as sa

log = logging.getLogger("dmrollout.controller.temporal")

SETUP_COMMAND = "dmrollout temporal setup"
TLS_FIELDS = frozenset(
    {"tls", "server_ca_file", "client_cert_file", "client_key_file", "server_name"}
)


class TemporalSettings(BaseSettings):
    """How to reach Temporal. Environment: ``DMROLLOUT_TEMPORAL_*``."""

    model_config = SettingsConfigDict(env_prefix="DMROLLOUT_TEMPORAL_", extra="ignore")

    address: str = Field(default="127.0.0.1:7233", description="Frontend host:port.")
    namespace: str = Field(default="default", description="Temporal namespace of the rollouts.")
    task_queue: str = Field(default="dmrollout-rollouts", description="Task queue of workers.")
    pipelines_namespace: str = Field(
        default="",
        description="Temporal namespace of DecisionModelPipelines (docs/pipelines.md), shared by "
        "the hub and every stage cluster; each cluster's rollouts stay in its own namespace. "
        "Empty: the rollouts' namespace (pipelines within one cluster's namespace only).",
    )
    tls: bool = Field(
        default=False, description="Use TLS (implied by a CA, a client cert or an API key)."
    )
    server_ca_file: Path | None = Field(default=None, description="CA bundle of the frontend.")
    client_cert_file: Path | None = Field(default=None, description="mTLS client certificate.")
    client_key_file: Path | None = Field(default=None, description="mTLS client key.")
    server_name: str | None = Field(default=None, description="TLS server name override.")
    api_key: str | None = Field(
        default=None,
        description="API key (Temporal Cloud); from a Secret through the environment, never "
        "logged.",
        repr=False,
    )
    api_key_file: Path | None = Field(
        default=None,
        description="A file holding the API key (a mounted Secret), instead of api_key: read at "
        "start, and again when Temporal refuses the key, so a rotated key is taken without a "
        "restart (the kubelet updates a mounted Secret within about a minute).",
    )
    ui_url: str = Field(
        default="http://127.0.0.1:8233",
        description="Base URL of the Temporal Web UI, for links printed by the CLI.",
    )
    metrics_bind_address: str | None = Field(
        default=None, description="host:port for the SDK's Prometheus metrics (worker)."
    )
    profile: str | None = Field(
        default=None,
        description="Profile of the Temporal CLI's config file (temporal.toml); default: "
        "TEMPORAL_PROFILE, else `default`.",
    )
    payload_keys_dir: Path | None = Field(
        default=None,
        description="Turns the payload codec on (controller, worker, CLI and codec server "
        "alike): a directory with one file per key ID, each 32 random bytes in base64 (the "
        "payload keys Secret, mounted). Payloads and failure messages are then AES-256-GCM "
        "encrypted before they reach Temporal. Unset: off.",
    )
    payload_key_id: str | None = Field(
        default=None,
        description="The key ID payloads are encrypted with (a file of payload_keys_dir); every "
        "key in the directory decrypts, so keys rotate.",
    )
    min_retention_days: int = Field(
        default=7,
        description="Minimum history retention `temporal setup` accepts: the history is the "
        "audit trail (the dev server keeps closed workflows 24 h).",
    )

    # TLS from the Temporal CLI's conventions (TEMPORAL_TLS*, a profile), when no
    # DMROLLOUT_TEMPORAL_* TLS field is set: see ``load``.
    _profile_tls: TLSConfig | bool | None = PrivateAttr(default=None)

    @classmethod
    def load(cls, **overrides: Any) -> TemporalSettings:
        """The settings as every dmrollout process uses them. Precedence: flags (``overrides``,
        None = not given), then ``DMROLLOUT_TEMPORAL_*``, then the Temporal CLI's own
        conventions (``temporalio.envconfig``: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
        TEMPORAL_API_KEY, TEMPORAL_TLS*, profiles of temporal.toml), then the defaults. A
        profile that does not exist raises the SDK's ConfigError."""
        explicit = cls(**{k: v for k, v in overrides.items() if v is not None})
        profile = ClientConfigProfile.load(profile=explicit.profile)
        given = explicit.model_fields_set
        conventions = {
            "address": profile.address,
            "namespace": profile.namespace,
            "api_key": profile.api_key,
        }
        updates = {k: v for k, v in conventions.items() if v and k not in given}
        resolved = explicit.model_copy(update=updates)
        if profile.tls is not None and not (TLS_FIELDS & given):
            resolved._profile_tls = profile.tls.to_connect_tls_config()
        return resolved

    def for_pipelines(self) -> TemporalSettings:
        """The same connection, in the pipelines' namespace."""
        return self.model_copy(update={"namespace": self.pipelines_namespace or self.namespace})

    def tls_config(self) -> TLSConfig | bool:
        if self._profile_tls is not None:
            return self._profile_tls
        wants = (
            self.tls
            or self.server_ca_file
            or self.client_cert_file
            or self.api_key
            or self.api_key_file
        )
        if not wants:
            return False
        return TLSConfig(
            server_root_ca_cert=self.server_ca_file.read_bytes() if self.server_ca_file else None,
            client_cert=self.client_cert_file.read_bytes() if self.client_cert_file else None,
            client_private_key=self.client_key_file.read_bytes() if self.client_key_file else None,
            domain=self.server_name,
        )

    def current_api_key(self) -> str | None:
        """The API key: the file's content as it is now when ``api_key_file`` is set (None while
        the file is absent or empty), else ``api_key``."""
        if self.api_key_file is None:
            return self.api_key
        try:
            return self.api_key_file.read_text().strip() or None
        except OSError:
            return None

    def client_cert_digest(self) -> bytes:
        """The mTLS client certificate and key as they are on disk now (b"" without mTLS). The
        SDK keeps the TLS material it connected with, so a renewed certificate is taken only by
        a new process: the controller compares this with the one it started with."""
        files = [f for f in (self.client_cert_file, self.client_key_file) if f is not None]
        if not files:
            return b""
        digest = hashlib.sha256()
        for f in files:
            try:
                digest.update(f.read_bytes())
            except OSError:
                digest.update(b"\0")  # not mounted (yet): a change when it appears
        return digest.digest()

    def payload_codec(self) -> AesGcmCodec | None:
        """The codec when payload_keys_dir is set; PayloadKeysInvalid names what is wrong."""
        return codec_from_settings(self.payload_keys_dir, self.payload_key_id)


def make_runtime(settings: TemporalSettings) -> Runtime | None:
    if not settings.metrics_bind_address:
        return None
    # Prometheus' conventions, as dmrollout's own series follow them (docs/operations.md
    # "Metrics"): durations in seconds with the unit in the name, counters ending in _total.
    # The SDK's defaults are milliseconds without a unit suffix and counters without _total.
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(
                bind_address=settings.metrics_bind_address,
                counters_total_suffix=True,
                unit_suffix=True,
                durations_as_seconds=True,
            )
        )
    )


async def connect(
    settings: TemporalSettings,
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
    lazy: bool = False,
    identity: str | None = None,
) -> Client:
    """``lazy``: connect on the first call (the controller starts, and looks after the stable,
    while Temporal is away). ``identity``: what Temporal records as the caller of each
    request (default: pid@host)."""
    return await Client.connect(
        settings.address,
        namespace=settings.namespace,
        tls=settings.tls_config(),
        api_key=settings.current_api_key(),
        data_converter=data_converter(settings.payload_codec()),
        runtime=runtime or Runtime.default(),
        interceptors=interceptors,
        lazy=lazy,
        identity=identity,
    )


# Temporal refuses every call while the key is wrong: the file is read again at most this often.
API_KEY_RELOAD_SECONDS: Final = 30.0


class ApiKeyReload:
    """Called when Temporal refuses the controller's credential: reads ``api_key_file`` again
    (at most once per ``every`` seconds) and hands a changed key to the live client, so rotating
    the Secret is all it takes. Without a file the key came from the environment, which a
    running process cannot see change: the condition then says to restart."""

    def __init__(
        self,
        settings: TemporalSettings,
        client: Client,
        every: float = API_KEY_RELOAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.client = client
        self.every = every
        self.clock = clock
        self._last = -every

    def __call__(self, reason: str) -> None:
        if reason != Reason.TEMPORAL_UNAUTHORIZED or self.settings.api_key_file is None:
            return
        now = self.clock()
        if now - self._last < self.every:
            return
        self._last = now
        key = self.settings.current_api_key()
        if key and key != self.client.api_key:
            self.client.api_key = key  # the SDK sends it on every call from now on
            log.warning(
                "Temporal refused the API key; read %s again: a new key is in use",
                self.settings.api_key_file,
            )


class NamespaceNotReady(RuntimeError):
    """The namespace lacks what rollouts need; the message names the command that fixes it."""


async def missing_search_attributes(
    client: Client, namespace: str, keys: tuple[SearchAttributeKey[Any], ...] = sa.ALL
) -> list[SearchAttributeKey[Any]]:
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return [k for k in keys if k.name not in resp.custom_attributes]


async def check_namespace(
    client: Client, namespace: str, keys: tuple[SearchAttributeKey[Any], ...] = sa.ALL
) -> None:
    """Fail fast (a worker would otherwise leave workflow tasks retrying forever)."""
    missing = [k.name for k in await missing_search_attributes(client, namespace, keys)]
    if missing:
        raise NamespaceNotReady(
            f"Temporal namespace {namespace!r} lacks the search attributes {', '.join(missing)}: "
            f"run `{SETUP_COMMAND}` once (or enable the Helm chart's temporalSetup hook)"
        )


async def _register(
    client: Client, namespace: str, keys: tuple[SearchAttributeKey[Any], ...]
) -> str:
    missing = await missing_search_attributes(client, namespace, keys)
    if not missing:
        return f"search attributes already registered in {namespace!r}"
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=namespace,
            # The SDK's enum carries the proto's numbers.
            search_attributes={
                k.name: IndexedValueType.ValueType(k.indexed_value_type.value) for k in missing
            },
        )
    )
    return f"registered search attributes in {namespace!r}: {', '.join(k.name for k in missing)}"


async def setup_namespace(client: Client, settings: TemporalSettings) -> list[str]:
    """Register the search attributes; check retention. Returns what it did, line by line."""
    done = [await _register(client, settings.namespace, sa.ALL)]
    pipelines = settings.for_pipelines().namespace
    # The pipelines' own (issue 25), where the pipeline runs live; registering them costs
    # three attributes, and a run that upserts one not registered would fail its tasks.
    done.append(await _register(client, pipelines, sa.registered(pipelines=True)))
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=settings.namespace)
    )
    retention = described.config.workflow_execution_retention_ttl.ToTimedelta()
    minimum = timedelta(days=settings.min_retention_days)
    if retention < minimum:
        done.append(
            f"WARNING: namespace {settings.namespace!r} keeps closed workflows for {retention}; "
            f"the rollout audit trail needs at least {minimum} "
            f"(temporal operator namespace update --retention {settings.min_retention_days}d "
            f"{settings.namespace})"
        )
    else:
        done.append(f"retention {retention} ≥ {minimum}")
    return done

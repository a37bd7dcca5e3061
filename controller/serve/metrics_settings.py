"""Settings of the metrics endpoint of ``dmrollout controller`` and ``dmrollout worker``.

Environment ``DMROLLOUT_METRICS_*``. The default is controller-runtime's: HTTPS on :8443, every
scrape authenticated (TokenReview) and authorized (SubjectAccessReview, ``get`` on the
non-resource URL ``/metrics``). ``secure: false`` is the explicit opt-in to plain HTTP without
authentication: ``/metrics`` is then served next to the probes on the health port, as before.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class MetricsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DMROLLOUT_METRICS_", extra="ignore")

    secure: bool = Field(
        default=True,
        description="HTTPS with TokenReview + SubjectAccessReview on `port`. False: plain "
        "HTTP, no authentication, /metrics on the health port (an explicit opt-in).",
    )
    bind: str = Field(default="0.0.0.0", description="Address of the HTTPS metrics server.")
    port: int = Field(default=8443, ge=0, le=65535, description="Port of the HTTPS /metrics.")
    cert_dir: str = Field(
        default="",
        description="Directory with tls.crt and tls.key (e.g. a mounted cert-manager Secret; "
        "re-read when they change). Empty: a self-signed certificate made at start.",
    )
    auth_cache_ttl_seconds: float = Field(
        default=10.0,
        ge=0,
        description="How long an allow/deny verdict per token is reused, so scrapes do not "
        "send two reviews each to the API server.",
    )
    auth_cache_entries: int = Field(
        default=1024, ge=0, description="Most verdicts remembered at once (oldest dropped)."
    )
    review_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Bound of each TokenReview / SubjectAccessReview call; no verdict = 500.",
    )

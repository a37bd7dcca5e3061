"""Leader election of the hub's pipeline controller: one replica starts and aborts runs.

Two pipeline controllers acting at once would race on every pipeline: both start the revision's
run (harmless, the workflow ID dedupes), but each also aborts what it takes for a superseded
run and rewrites the conditions from its own view, so a replica still catching up after a
restart could abort the run the other just started for a newer revision. The main controller's
election (controller/machinery/leader.py, client-go's rules) is reused on a Lease of its own:
sharing the controller's Lease would make the two controllers exclude each other. The CLI
builds the elector (``controller.cli.pipeline``): the hub and the reconciler are independent
rooms (.importlinter), so the hub knows it only as a ``controller.machinery.lifecycle.
Elector``. The start/stop lifecycle (a lost Lease exits 1, SIGTERM releases it and exits 0)
is the main controller's too: controller/machinery/lifecycle.py.
"""

from __future__ import annotations

import os
import socket
from typing import Final

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PIPELINE_LEASE_NAME: Final = "dmrollout-pipeline-controller"


class PipelineControllerSettings(BaseSettings):
    """Settings of ``dmrollout pipeline-controller`` (environment
    ``DMROLLOUT_PIPELINE_CONTROLLER_*``); the durations are client-go's defaults, as the main
    controller's."""

    model_config = SettingsConfigDict(env_prefix="DMROLLOUT_PIPELINE_CONTROLLER_", extra="ignore")

    leader_election: bool = Field(
        default=True, description="Hold a Lease so two replicas never both start or abort runs."
    )
    lease_namespace: str = Field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "default"),
        description="Namespace of the Lease.",
    )
    lease_name: str = Field(
        default=PIPELINE_LEASE_NAME,
        description="The Lease's name: not the controller's (dmrollout-controller), or the "
        "two controllers would exclude each other.",
    )
    identity: str = Field(
        default_factory=lambda: (
            os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
        ),
        description="This replica's identity in the Lease.",
    )
    lease_duration_seconds: float = Field(default=15.0, description="client-go default.")
    renew_deadline_seconds: float = Field(default=10.0, description="client-go default.")
    retry_period_seconds: float = Field(default=2.0, description="client-go default.")
    health_port: int = Field(
        default=8082,
        ge=0,
        le=65535,
        description="Port of /healthz and /readyz (0: an ephemeral one). Not the "
        "controller's 8080, so both run side by side on one machine.",
    )


__all__ = ["PIPELINE_LEASE_NAME", "PipelineControllerSettings"]

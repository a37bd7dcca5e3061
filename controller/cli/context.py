"""Where a CLI command connects, from flags and the conventions of kubectl and the Temporal CLI.

Kubernetes: ``--kubeconfig`` (else KUBECONFIG, else ~/.kube/config), ``--context``, and the
namespace from ``-n``, else the context's namespace, else ``default`` (as kubectl does).
Temporal: ``--address`` / ``--temporal-namespace`` / ``--profile``, else DMROLLOUT_TEMPORAL_*,
else TEMPORAL_* and temporal.toml (``TemporalSettings.load``). Every connection is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import dataclass
from typing import Final

from controller.cli.errors import CliError, ExitCode, Where
from controller.temporal.client import TemporalSettings, connect
from controller.temporal.runs import TemporalClient
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube, context_namespace
from kube.timeouts import KubeTimeouts

CONNECT_TIMEOUT_SECONDS: Final = 10.0
DEFAULT_NAMESPACE: Final = "default"


def add_kube_flags(p: argparse.ArgumentParser, all_namespaces: bool = False) -> None:
    p.add_argument("-n", "--namespace", default=None, help="default: the context's namespace")
    p.add_argument("--kubeconfig", default=None, help="default: KUBECONFIG, else ~/.kube/config")
    p.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    if all_namespaces:
        p.add_argument(
            "-A", "--all-namespaces", action="store_true", help="every namespace you can read"
        )


def add_temporal_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", default=None, help="Temporal frontend host:port")
    p.add_argument("--temporal-namespace", default=None, help="Temporal namespace")
    p.add_argument("--profile", default=None, help="profile of the Temporal CLI's temporal.toml")


# A person waits for the CLI: up to this many 429s (each after its Retry-After, about a second)
# before it gives up, as kubectl does.
CLI_THROTTLED_RETRIES = 8


@dataclass
class CliContext:
    args: argparse.Namespace
    where: Where

    def kubeconfig(self) -> str | None:
        """``--kubeconfig``, else DMROLLOUT_KUBECONFIG; None lets the client find it."""
        return getattr(self.args, "kubeconfig", None) or RolloutSettings().kubeconfig

    def kube(self) -> Kube:
        kubeconfig = self.kubeconfig()
        context = getattr(self.args, "context", None)
        self.where.kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        self.where.kube_context = context
        settings = RolloutSettings()
        timeouts = KubeTimeouts(
            connect=settings.kube_connect_timeout_seconds,
            read=settings.kube_read_timeout_seconds,
            throttled_retries=CLI_THROTTLED_RETRIES,
        )
        kube = Kube.from_config(kubeconfig, timeouts, context=context)
        self.where.kube_server = kube.api_client.configuration.host
        return kube

    def namespace(self) -> str:
        """``-n``, else the kubeconfig context's namespace, else ``default``."""
        given = getattr(self.args, "namespace", None)
        if given:
            return str(given)
        # In a Pod, or with no kubeconfig, kubectl says default too.
        found = context_namespace(self.kubeconfig(), getattr(self.args, "context", None))
        return found or DEFAULT_NAMESPACE

    def temporal_settings(self) -> TemporalSettings:
        args = self.args
        settings = TemporalSettings.load(
            address=getattr(args, "address", None),
            namespace=getattr(args, "temporal_namespace", None),
            profile=getattr(args, "profile", None),
        )
        self.where.temporal_address = settings.address
        self.where.temporal_namespace = settings.namespace
        return settings

    async def temporal(
        self, pipelines: bool = False, identity: str | None = None
    ) -> tuple[TemporalClient, TemporalSettings]:
        """``pipelines``: in the pipelines' namespace unless --temporal-namespace names one;
        ``identity``: what Temporal records as the caller (an approval's approver)."""
        settings = self.temporal_settings()
        if pipelines and not getattr(self.args, "temporal_namespace", None):
            settings = settings.for_pipelines()
            self.where.temporal_namespace = settings.namespace
        try:
            client = await asyncio.wait_for(
                connect(settings, identity=identity), CONNECT_TIMEOUT_SECONDS
            )
        except TimeoutError:
            raise CliError(
                ExitCode.UNREACHABLE,
                f"{self.where.temporal()} did not answer within {CONNECT_TIMEOUT_SECONDS:.0f} s; "
                "set TEMPORAL_ADDRESS (or --address) and check that the server runs",
            ) from None
        return client, settings

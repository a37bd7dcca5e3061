"""start: the candidate's Deployment ``<dm>-<rev>``, without traffic, and wait for its Pods.

The Deployment's Pods carry the readiness gate ``decisionmodel.io/model-ready``, so they join
no Service until warmup_inspect has proven the model; this step only waits until the desired
number of Pods runs with a Pod IP and ContainersReady (what warmup_inspect needs to probe them,
REFERENCE "Readiness gate"). Scheduling or image problems keep it waiting, heartbeating what it
sees, until the workflow's starting deadline ends it (StartTimeout); the Promoted condition says
so from the first look that sees them (activities.held_pods: PodsUnschedulable,
PodsNotStarting), and the step goes on by itself once the cluster starts the Pods.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.held_pods import HeldPods
from activities.step_status import enters_step
from activities.typed_errors import show_guards, step_phase, typed_errors
from decisionmodel.engine.render import render_serving_deployment
from decisionmodel.engine.render.labels import selector_labels
from decisionmodel.rollout import render_params
from decisionmodel.rollout.contracts import START, RevisionObjectsInput, StartResult
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.vocabulary import ConditionType, Phase, Reason
from kube.client import Kube
from kube.pod_gate import condition_true
from kube.rollout_status import show_guard
from kube.secrets import SecretCapability, SecretReader, parse_api_key
from kube.wait import wait_until
from kube.watch import source


def pod_started(pod: dict[str, Any]) -> bool:
    """Running, with a Pod IP, ContainersReady, not being deleted."""
    status = pod.get("status") or {}
    return (
        not pod["metadata"].get("deletionTimestamp")
        and status.get("phase") == "Running"
        and bool(status.get("podIP"))
        and condition_true(pod, "ContainersReady")
    )


def pods_summary(pods: list[dict[str, Any]]) -> dict[str, int]:
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return {
        "pods": len(live),
        "running": sum(1 for p in live if (p.get("status") or {}).get("phase") == "Running"),
        "started": sum(1 for p in live if pod_started(p)),
    }


class StartActivities:
    def __init__(self, kube: Kube, settings: RolloutSettings) -> None:
        self.kube = kube
        self.settings = settings
        self.secrets = SecretReader(kube)

    async def _apikey_checksum(self, inp: RevisionObjectsInput) -> str | None:
        if inp.api_key is None:
            return None
        found = await self.secrets.read_entry(
            inp.dm.namespace, inp.api_key, SecretCapability.API_KEY
        )
        # Refused here, before any Pod is created with a key no request can carry.
        parse_api_key(found.value, inp.dm.namespace, inp.api_key)
        # Only the checksum leaves this function: it rolls the Pods when the key changes.
        return render_params.apikey_checksum(found.value, found.uid)

    @activity.defn(name=START)
    @enters_step  # phase Starting; warmup_inspect reports the Pods model-ready
    async def start(self, inp: RevisionObjectsInput) -> StartResult:
        """Create or adopt the Deployment, then wait until ``inp.replicas`` of its Pods run
        with an IP and ContainersReady."""
        guard = show_guards(self.kube, inp.dm, ConditionType.PROMOTED, inp.status)
        async with typed_errors(guard):
            checksum = await self._apikey_checksum(inp)
            deployment = render_serving_deployment(
                render_params.serving_params(inp, self.settings, checksum)
            )
            name = deployment["metadata"]["name"]
            await self.kube.ensure_owned(
                deployment, inp.dm.uid, self.settings.poll_interval_seconds, activity.heartbeat
            )
            if activity.info().attempt > 1:
                # A guard may have held an earlier attempt (its condition is still shown): the
                # cause is fixed, say the rollout goes on.
                await show_guard(
                    self.kube,
                    inp.dm,
                    ConditionType.PROMOTED,
                    Reason.PODS_STARTING,
                    f"Deployment {name} created; its Pods are starting",
                    first=False,
                    phase=step_phase(inp.status),
                )
            # Also on the first attempt of a new window (workflows.rollout._still_held): the
            # guard's reason and phase, still shown from the last window, go now.
            await guard.passed()
            selector = selector_labels(inp.dm.name, inp.record.hash)
            held = HeldPods(
                self.kube,
                inp.dm,
                ConditionType.PROMOTED,
                Phase.STARTING,
                what=f"the candidate's Pods (Deployment {name}) cannot start",
                deadline="spec.rollout.timeouts.starting (StartTimeout)",
                going_on=(Reason.PODS_STARTING, f"Deployment {name}: its Pods are starting"),
            )

            async def started(pods: list[dict[str, Any]]) -> StartResult | None:
                summary = pods_summary(pods)
                # Every look is progress, the last one too (it shows how the Pods ended up).
                activity.heartbeat({"deployment": name, "replicas": inp.replicas, **summary})
                if summary["started"] >= inp.replicas:
                    return StartResult(deployment=name)
                await held.look(pods)  # not on the look that ends the step (a surge Pod)
                return None

            # Woken by the Pods' watch events (kube.wait), not a poll.
            src = source("Pod", inp.dm.namespace, labels=selector)
            return await wait_until(
                self.kube, src, started, idle=self.settings.poll_interval_seconds
            )

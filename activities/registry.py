"""Every rollout activity, bound to its dependencies: what a worker registers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.client import Client

from activities.decision_record import DecisionRecordActivities
from activities.delete_revision import DeleteRevisionActivities
from activities.evaluate import EvaluateActivities
from activities.evaluation_design import EvaluationDesignActivities
from activities.pipeline_hub import PipelineHubActivities
from activities.pipeline_stage import StageActivities
from activities.prefetch import PrefetchActivities
from activities.promote import PromoteActivities
from activities.recover_store import StoreRecoveryActivities
from activities.resolve import ResolveActivities
from activities.start import StartActivities
from activities.status import StatusActivities
from activities.warmup_inspect import WarmupActivities
from activities.watch_promoted import WatchActivities
from decisionmodel.rollout.settings import RolloutSettings
from kube.client import Kube


def _store_recovery(kube: Kube, settings: RolloutSettings) -> list[Callable[..., Any]]:
    recovery = StoreRecoveryActivities(kube, settings)
    return [recovery.begin, recovery.end]


def _promote(kube: Kube, settings: RolloutSettings) -> list[Callable[..., Any]]:
    promote = PromoteActivities(kube, settings)
    return [promote.promote, promote.check_candidate]


def build_activities(
    kube: Kube,
    settings: RolloutSettings,
    on_resolve_duration: Callable[[float], None] | None = None,
    on_probe_transition: Callable[[str, str, str], None] | None = None,
    client: Client | None = None,
) -> list[Callable[..., Any]]:
    """``client``: the rollouts' Temporal client, from which a decision record reads who
    approved (the identity the run's history recorded)."""
    return [
        ResolveActivities(settings, on_resolve_duration=on_resolve_duration, kube=kube).resolve,
        PrefetchActivities(kube, settings).prefetch,
        StartActivities(kube, settings).start,
        WarmupActivities(kube, settings, on_probe_transition=on_probe_transition).warmup_inspect,
        EvaluateActivities(kube, settings).evaluate,
        EvaluationDesignActivities(kube, settings).check_evaluation_design,
        *_promote(kube, settings),
        DeleteRevisionActivities(kube, settings).delete_revision,
        WatchActivities(kube, settings).watch_promoted,
        StatusActivities(kube, settings).record_status,
        *_store_recovery(kube, settings),
        DecisionRecordActivities(kube, settings, client).write_decision_record,
    ]


def build_stage_activities(
    kube: Kube, settings: RolloutSettings, rollouts: Client | None = None
) -> list[Callable[..., Any]]:
    """A cluster's part of the pipelines (issue 25): on its ``dmrollout-stage-<cluster>``;
    ``rollouts``: the client of this cluster's rollouts' namespace."""
    stage = StageActivities(kube, settings, rollouts)
    return [stage.apply, stage.await_rollout, stage.await_verdict, stage.abort_rollout, stage.check]


def build_hub_activities(kube: Kube, settings: RolloutSettings) -> list[Callable[..., Any]]:
    """The hub's part of the pipelines: freight and the pipeline's status."""
    hub = PipelineHubActivities(kube, settings)
    return [hub.resolve_freight, hub.record_status]

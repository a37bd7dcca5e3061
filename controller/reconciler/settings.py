"""Settings of ``dmrollout controller``: each field with its default and why.

Environment ``DMROLLOUT_CONTROLLER_*``; the CLI flags of the reference operator
(``--watch-namespaces``, ``--max-concurrent-rollouts``, …) override them.
"""

from __future__ import annotations

import os
import socket
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The default fleet budget, derived from one worker's default concurrency
# (decisionmodel/rollout/settings.py): a rollout in flight holds at most one activity slot at a
# time (its waiting step), and of a worker's 64 slots about a fifth stays free for what runs
# beside the rollouts in flight (the cleanup of promoted and rolled-back ones, post-promotion
# watches, store recoveries): 64 * 0.8 ~ 50. Measured (issue 14): 1,000 DecisionModels at once
# under 50 on 2 cores, all Ready, 0 workflow-task timeouts, worker 177 MiB; unbudgeted, 600 at
# once left 106 histories with workflow-task timeouts. More workers: raise it by ~50 each.
DEFAULT_ROLLOUT_BUDGET = 50


class ControllerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DMROLLOUT_CONTROLLER_", extra="ignore")

    watch_namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces to watch; empty = all. Objects elsewhere are refused.",
    )
    max_concurrent_rollouts: int = Field(
        default=DEFAULT_ROLLOUT_BUDGET,
        ge=0,
        description="Rollouts in flight at once across the watched scope; 0 = unlimited. "
        "Others wait in Pending (RolloutQueued, with their place in line), FIFO. The default "
        "fits one worker with its default concurrency (see DEFAULT_ROLLOUT_BUDGET).",
    )
    runtime_version_policy: Literal["Pinned", "FollowOperator"] = Field(
        default="Pinned",
        description="How an unset spec.runtimeVersion resolves. Pinned: the stable revision's "
        "recorded runtime (an operator upgrade starts no rollout; the RuntimeUpdateAvailable "
        "condition says a newer default exists). FollowOperator: the operator's default (an "
        "upgrade rolls every such DecisionModel; bound it with --max-concurrent-rollouts).",
    )
    workers: int = Field(
        default=4, ge=1, description="DecisionModels reconciled at once (reference default 4)."
    )
    worker_poll_stale_seconds: float = Field(
        default=120.0,
        gt=0,
        description="A rollout whose run no worker has polled for this long (its pinned "
        "build's, or any on its task queue) is stranded: Stalled=True/RolloutStranded. A live "
        "worker polls again within Temporal's long poll (~60 s).",
    )
    reinspect_seconds: float = Field(
        default=60.0,
        description="Re-inspection of the stable revision's Pods (reference: every 60 s).",
    )
    unready_reinspect_seconds: float = Field(
        default=10.0,
        gt=0,
        description="Re-inspection while the stable has fewer model-ready replicas than it "
        "should: a runtime that recovered is noticed within this, not a whole reinspect period.",
    )
    probe_error_window_seconds: float = Field(
        default=180.0,
        ge=0,
        description="How long a serving Pod's runtime may keep failing to answer (transport "
        "errors, 401) before its gate flips False, measured in time, not probes: Pod events "
        "add probes, and an API-key rotation's roll takes ~3 min (seed 001). The post-promotion "
        "watch tolerates the same window.",
    )
    queued_recheck_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How often a queued DecisionModel re-checks the budget: a safety net, as "
        "the first in line are woken when a slot frees (one of this controller's rollouts "
        "promotes or closes, or the visibility re-count finds one free).",
    )
    budget_resync_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How often the fleet budget's in-memory count is replaced by a visibility "
        "list (also when this replica starts leading): corrects for other controllers' starts "
        "and for rollouts that closed without this controller seeing it.",
    )
    health_bind: str = Field(default="0.0.0.0", description="Address of /metrics, /healthz.")
    health_port: int = Field(default=8080, description="Port of /metrics, /healthz, /readyz.")
    leader_election: bool = Field(
        default=True, description="Hold a Lease so two replicas never both dispatch."
    )
    lease_namespace: str = Field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "default"),
        description="Namespace of the leader-election Lease.",
    )
    lease_name: str = Field(default="dmrollout-controller", description="The Lease's name.")
    identity: str = Field(
        default_factory=lambda: (
            os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
        ),
        description="This replica's identity in the Lease.",
    )
    lease_duration_seconds: float = Field(default=15.0, description="client-go default.")
    renew_deadline_seconds: float = Field(default=10.0, description="client-go default.")
    retry_period_seconds: float = Field(default=2.0, description="client-go default.")
    heartbeat_timeout_seconds: int = Field(
        default=30,
        description="Heartbeat timeout of rollout activities (a crashed worker's "
        "activity is retried after it).",
    )
    promotion_grace_seconds: int = Field(
        default=30, description="The previous revision keeps running this long after a switch."
    )
    cleanup_round_seconds: int = Field(
        default=600,
        ge=10,
        description="One round of a cleanup step's retries; after each round the DecisionModel "
        "shows CleanupPending and the step is retried (never given up).",
    )
    cleanup_pause_seconds: int = Field(
        default=30, ge=1, le=3600, description="The pause between two rounds of a cleanup step."
    )
    post_promotion_watch_period_seconds: int = Field(
        default=10,
        ge=1,
        le=300,
        description="How often a post-promotion watch inspects the new stable's Pods.",
    )

    max_rollout_restarts: int = Field(
        default=3,
        ge=0,
        description="How often a rollout that ended without a verdict (terminated, timed out, "
        "failed) is started again, with backoff, before its revision is recorded as failed "
        "(RolloutRestartsExhausted; decisionmodel.io/retry starts a fresh count).",
    )
    restart_backoff_seconds: float = Field(
        default=30.0, gt=0, description="First wait before such a restart; doubles each time."
    )
    re_resolve_backoff_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A revision that failed with ModelNotFound is resolved again this long "
        "after the failure, then after twice as long as the wait before, up to "
        "re_resolve_max_backoff_seconds (seed 001: requeued and re-resolved).",
    )
    re_resolve_max_backoff_seconds: float = Field(
        default=600.0, gt=0, description="The longest wait between two such re-resolves."
    )
    reap_grace_seconds: float = Field(
        default=300.0,
        ge=0,
        description="Age an object of a revision no rollout owns must reach before the reaper "
        "deletes it (so a rollout starting right now is never raced).",
    )
    liveness_stall_seconds: float = Field(
        default=300.0,
        gt=0,
        description="/healthz fails when reconciles are in flight or waiting and none has "
        "finished for this long (every Kubernetes call is bounded, so a reconcile is too).",
    )

    def watches(self, namespace: str) -> bool:
        return not self.watch_namespaces or namespace in self.watch_namespaces

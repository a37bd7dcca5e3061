"""Operator settings the activities apply: guards, registry, runtime defaults, tempo.

One object, read from the environment (``DMROLLOUT_*``) by the worker and the controller, each
field documented with its default and why. The Helm chart's values feed the same variables.
Tempo that is part of a workflow's input (heartbeat timeout, promotion grace) is not here: the
controller copies it from ``controller/reconciler/settings.py`` into each rollout when it starts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from decisionmodel.api.spec import QUANTITY_PATTERN
from decisionmodel.engine.params import DEFAULT_RUNTIME_VERSION as _DEFAULT_RUNTIME_VERSION
from decisionmodel.engine.params import DEFAULT_SCRATCH_SIZE_LIMIT
from decisionmodel.engine.placement import DEFAULT_MAX_REPLICAS, PlacementPolicy


class RolloutSettings(BaseSettings):
    # populate_by_name: the fields below that also answer to the reference's variable names
    # (OLLAYA_REGISTRY, HTTP_PROXY, ...) keep their field names as keyword arguments.
    model_config = SettingsConfigDict(
        env_prefix="DMROLLOUT_", extra="ignore", populate_by_name=True
    )

    log_format: Literal["text", "json"] = Field(
        default="text",
        description="Log lines of the worker and the controller: text, or json (one object "
        "per line naming the DecisionModel, revision and workflow ID).",
    )
    kubeconfig: str | None = Field(
        default=None, description="Kubeconfig file; unset = in-cluster config, else ~/.kube/config."
    )
    allowed_registries: list[str] = Field(
        default_factory=lambda: ["ollaya.dev"],
        description="Registry hosts a spec.model may resolve from (SSRF guard; reference default).",
    )
    allow_insecure_registries: bool = Field(
        default=False, description="Permit http:// registries (dev only)."
    )
    allow_image_override: bool = Field(default=False, description="Permit spec.image.")
    # Each of these answers to DMROLLOUT_<NAME> first, then to the reference operator's own
    # variable (seed 001: OLLAYA_REGISTRY, OLLAYA_HF_ENDPOINT, HTTP(S)_PROXY, NO_PROXY).
    ollaya_registry: str = Field(
        default="https://ollaya.dev",
        validation_alias=AliasChoices("DMROLLOUT_OLLAYA_REGISTRY", "OLLAYA_REGISTRY"),
        description="Registry base URL for host-less model names (a mirror in air-gapped sites).",
    )
    ollaya_hf_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DMROLLOUT_OLLAYA_HF_ENDPOINT", "OLLAYA_HF_ENDPOINT"),
        description="Weight-download mirror, given to prefetch Jobs only.",
    )
    http_proxy: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DMROLLOUT_HTTP_PROXY", "HTTP_PROXY", "http_proxy"),
        description="Copied to prefetch Jobs if credential-free.",
    )
    https_proxy: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DMROLLOUT_HTTPS_PROXY", "HTTPS_PROXY", "https_proxy"),
        description="Same as http_proxy.",
    )
    no_proxy: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DMROLLOUT_NO_PROXY", "NO_PROXY", "no_proxy"),
        description="Always copied to prefetch Jobs.",
    )
    runtime_version: str = Field(
        default=_DEFAULT_RUNTIME_VERSION,
        description="Ollaya release of the default image when spec.runtimeVersion is unset.",
    )
    poll_interval_seconds: float = Field(
        default=1.0,
        description="How often waiting activities heartbeat (and a held warm-up probes its Pods "
        "again). They wake on watch events of the objects they wait for (kube/wait.py), not on "
        "this period.",
    )
    kube_connect_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Connect timeout of every Kubernetes API request (client side).",
    )
    kube_read_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Read timeout of every Kubernetes API request; a watch waits its own "
        "server-side timeout plus 30 s. A silent or half-open API server fails the call "
        "(retried) instead of hanging it.",
    )
    # Worker concurrency (controller/worker/run.py; docs/operations.md "Scaling"). Bounded so that
    # under load work waits in Temporal's task queues instead of in the process: a workflow task
    # the worker has taken must finish within its 10 s timeout, and on 2 cores 600 rollouts at
    # once with the SDK defaults (100 workflow tasks, 1,000 cached workflows) left workflows
    # 45-375 s between steps with workflow-task timeouts (issue 14).
    worker_max_concurrent_activities: int = Field(
        default=64,
        ge=1,
        description="Activities one worker runs at once (each a thread of the pool for the "
        "blocking Kubernetes client). A waiting step holds one for its phase.",
    )
    worker_max_concurrent_workflow_tasks: int = Field(
        default=8,
        ge=2,
        description="Workflow tasks one worker processes at once; more wait in the task queue, "
        "where no timeout runs, instead of timing out in a busy process.",
    )
    worker_max_cached_workflows: int = Field(
        default=1000,
        ge=0,
        description="Workflows kept in memory between tasks (sticky); an evicted one is replayed "
        "from its history on its next task.",
    )
    worker_workflow_task_pollers: int = Field(
        default=2, ge=1, description="Concurrent polls of the workflow task queue."
    )
    worker_activity_task_pollers: int = Field(
        default=4, ge=1, description="Concurrent polls of the activity task queue."
    )
    # 60 s, a trade-off (docs/operations.md "Scaling"): a large unbudgeted wave times some tasks
    # out (600 at once on 2 cores: 106 of 600 histories; none at 120 s), and a longer one keeps a
    # SIGKILLed worker's workflows waiting longer (at 120 s, past the durability tests' 2 min).
    worker_sticky_schedule_to_start_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How long a task for a cached workflow waits for this worker before the "
        "server hands it to any worker (recorded as a workflow-task timeout). A stopped worker "
        "hands its workflows back at shutdown; one killed outright keeps the tasks already "
        "sent to it until this ends.",
    )
    # Worker Deployment versioning (controller/worker/deployment.py; docs/operations.md
    # "Upgrades and workflow versioning"): the current build takes new rollouts; the rollouts in
    # flight move to it (AutoUpgrade, the default) or stay on their own build (Pinned).
    worker_deployment_name: str = Field(
        default="",
        max_length=200,
        pattern=r"^[^.]*$",
        description="Temporal Worker Deployment the rollouts' worker belongs to (the chart: "
        "dmrollout). Set: rollouts follow worker_versioning_behavior. Empty: an "
        "unversioned worker (every build takes every task; upgrade only with no rollout open).",
    )
    worker_build_id: str = Field(
        default="",
        max_length=255,
        description="This worker's build in the Worker Deployment (the chart: the image tag). "
        "Empty: the installed dmrollout package's version.",
    )
    worker_promote_on_start: bool = Field(
        default=True,
        description="On start, make this build the Worker Deployment's current version, so new "
        "rollouts go to it; the chart's draining builds set false and only finish their own.",
    )
    worker_versioning_behavior: Literal["AutoUpgrade", "Pinned"] = Field(
        default="AutoUpgrade",
        description="How a versioned worker's rollouts follow builds. AutoUpgrade: a rollout "
        "moves to the current build at its next workflow task, so an upgrade that stops the old "
        "build never strands it (workflow changes go behind workflow.patched; the replay test "
        "guards them). Pinned: a rollout stays on the build that started it, which must keep "
        "running until it is drained (the chart's worker.versioning.draining).",
    )
    worker_drain_check_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How often a draining build asks Temporal whether it is drained (one "
        "describe); drained, it stops polling.",
    )
    stage_cluster: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="This cluster's name in DecisionModelPipelines: the worker also polls "
        "dmrollout-stage-<name> and does the stages that name it (unset: none).",
    )
    pipeline_hub: bool = Field(
        default=False,
        description="This worker runs the pipelines of the hub (task queue "
        "dmrollout-pipelines): resolves their freight and writes their status.",
    )
    worker_series_check_seconds: float = Field(
        default=300.0,
        gt=0,
        description="How often the worker checks that the DecisionModels of its probe series "
        "still exist (only those idle this long; one GET each); a deleted one's series go.",
    )
    worker_liveness_stall_seconds: float = Field(
        default=600.0,
        gt=0,
        description="The worker's /healthz fails when activities are in flight and none has "
        "heartbeated or finished for this long (a wedged worker is restarted; Temporal retries "
        "its activities elsewhere).",
    )
    queue_full_attempts: int = Field(
        default=20, description="Attempts per evaluation case on 503 QUEUE_FULL."
    )
    # --- decision records (issue 38, docs/audit.md) --
    decision_records_namespace: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="Namespace of the signed decision records (the chart: the release "
        "namespace when decisionRecords.enabled). Unset: no records are written.",
    )
    decision_records_key_secret: str = Field(
        default="dmrollout-decision-record-key",
        description="Secret in the records namespace whose key key.pem holds the EC P-256 "
        "private key (PEM) the records are signed with.",
    )
    # --- placement guard (decisionmodel.engine.placement): what a DecisionModel may ask of the
    # Pods --
    placement_profile: Literal["Passthrough", "Strict"] = Field(
        default="Passthrough",
        description="Passthrough (the reference's behaviour): spec.scheduling and spec.replicas "
        "reach the Pods as written, no allow-list and no replicas cap. Strict: the allow-lists "
        "and max_replicas below apply (a multi-tenant cluster where a DecisionModel editor "
        "must not reach control-plane nodes or run unbounded replicas).",
    )
    allowed_toleration_keys: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Taint keys spec.scheduling.tolerations may name: exact keys or prefix* "
        "patterns. Patterns never match the control-plane/master, unschedulable, uninitialized "
        'and CriticalAddonsOnly keys nor "" (tolerate everything): only an exact entry does.',
    )
    allowed_node_selector_keys: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Node label keys spec.scheduling.nodeSelector may use (patterns as above; "
        "the control-plane/master role labels only by an exact entry).",
    )
    allowed_affinity_keys: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Node label keys (and matchFields keys) spec.scheduling.affinity's node "
        "affinity may use (as the node selector keys).",
    )
    allowed_runtime_classes: list[str] = Field(
        default_factory=list,
        description="RuntimeClass names spec.scheduling.runtimeClassName may name; none by "
        "default (a RuntimeClass brings its own handler and its own tolerations).",
    )
    allowed_priority_classes: list[str] = Field(
        default_factory=list,
        description="PriorityClass names spec.scheduling.priorityClassName may name; none by "
        "default (the cluster's default priority applies).",
    )
    max_replicas: int = Field(
        default=DEFAULT_MAX_REPLICAS,
        ge=1,
        description="Strict profile only: largest spec.replicas a rollout starts with or the "
        "stable is scaled to.",
    )
    scratch_size_limit: str = Field(
        default=DEFAULT_SCRATCH_SIZE_LIMIT,
        pattern=QUANTITY_PATTERN,
        description="sizeLimit of every emptyDir dmrollout renders (/tmp and $HOME of the "
        "serving and prefetch Pods): a Pod writing more is evicted, not the node's disk filled.",
    )

    def placement_policy(self) -> PlacementPolicy:
        return PlacementPolicy(
            toleration_keys=tuple(self.allowed_toleration_keys),
            node_selector_keys=tuple(self.allowed_node_selector_keys),
            affinity_keys=tuple(self.allowed_affinity_keys),
            runtime_classes=tuple(self.allowed_runtime_classes),
            priority_classes=tuple(self.allowed_priority_classes),
            max_replicas=self.max_replicas,
            enforced=self.placement_profile == "Strict",
        )

    @property
    def replicas_cap(self) -> int | None:
        """The largest spec.replicas the stable is scaled to; None: no cap (Passthrough)."""
        return self.max_replicas if self.placement_profile == "Strict" else None

    @property
    def default_registry_host(self) -> str:
        return self.ollaya_registry.split("://", 1)[-1].rstrip("/")


def package_version() -> str:
    """The installed dmrollout's version ("dev" in a source tree run without installing): the
    build a worker and a controller report when nothing names one."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dmrollout")
    except PackageNotFoundError:
        return "dev"


def worker_build(settings: RolloutSettings) -> str:
    """This worker's build: the setting (the chart passes the image tag), else the package's."""
    return settings.worker_build_id or package_version()

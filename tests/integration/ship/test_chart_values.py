"""The Helm chart against the programs it configures.

- values.yaml defaults equal the pydantic settings defaults, field by field (MAPPING), and every
  settings field is either mapped or deliberately left out (UNMAPPED), so a new setting forces a
  decision here;
- the environment the chart renders, fed to the real settings classes, yields the values it was
  given (defaults and ci/all-on-values.yaml), and names no DMROLLOUT_* variable that no field
  reads (pydantic-settings ignores unknown variables silently, so a typo would go unnoticed);
- the schema is strict; the chart's CRDs are the generated ones byte for byte; versions agree;
- on a hub (pipelines.hub, ci/hub-values.yaml over all-on), the pipeline controller's
  environment yields its values too and reaches Temporal as the controller does
  (test_pipeline_hub_chart.py checks its Deployment, grants and CRD);
- the PrometheusRule, ServiceMonitor and dashboard query series that exist, and every alert
  links a runbook that exists.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.shipped import (
    ALL_ON_VALUES,
    CHART,
    HUB_VALUES,
    NAMESPACE,
    ROOT,
    helm,
    helm_template,
    kustomize,
    render_chart,
)
from pydantic_settings import BaseSettings

from controller.hub.leadership import PipelineControllerSettings
from controller.reconciler.settings import ControllerSettings
from controller.serve.metrics import ControllerMetrics
from controller.serve.metrics_settings import MetricsSettings
from controller.serve.reconcile_metrics import ReconcileMetrics
from controller.temporal.client import TemporalSettings
from decisionmodel.api.pipeline_crd import PIPELINE_CRD_FILE
from decisionmodel.rollout.settings import RolloutSettings

VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
ALL_ON = yaml.safe_load(ALL_ON_VALUES.read_text())
HUB_ON = yaml.safe_load(HUB_VALUES.read_text())
RELEASE = "dmrollout"  # fullname == "dmrollout", as the program defaults assume
SETTINGS: dict[str, type[BaseSettings]] = {
    "controller": ControllerSettings,
    "rollout": RolloutSettings,
    "temporal": TemporalSettings,
    "metrics": MetricsSettings,
    "pipeline_controller": PipelineControllerSettings,
}
# The hub's pipeline controller (pipelines.hub): its settings come from its own container.
PIPELINE_CONTROLLER = "-pipeline-controller"
METRICS_CERT_DIR = "/etc/dmrollout/metrics-tls"


def _empty_is_default(cls: type[BaseSettings], field: str) -> Callable[[Any], Any]:
    """ "" in values.yaml means: leave the variable unset, the program's default applies."""
    return lambda v: (
        v if v != "" else cls.model_fields[field].get_default(call_default_factory=True)
    )


def _empty_is_none(v: Any) -> Any:
    return v if v != "" else None


@dataclass(frozen=True)
class Mapping:
    path: str  # dotted path in values.yaml
    settings: str  # key of SETTINGS
    field: str
    convert: Callable[[Any], Any] = lambda v: v


MAPPING: tuple[Mapping, ...] = (
    # The chart is namespaced by default (issue 12): no watchNamespaces watches the release's
    # namespace (the program's own default, [], is every namespace: rbac.clusterWide).
    Mapping(
        "watchNamespaces", "controller", "watch_namespaces", lambda v: v or ["dmrollout-system"]
    ),
    Mapping("maxConcurrentRollouts", "controller", "max_concurrent_rollouts"),
    Mapping("runtimeVersionPolicy", "controller", "runtime_version_policy"),
    Mapping("promotionGraceSeconds", "controller", "promotion_grace_seconds"),
    Mapping("logFormat", "rollout", "log_format"),
    Mapping("postPromotionWatchPeriodSeconds", "controller", "post_promotion_watch_period_seconds"),
    Mapping("controller.workers", "controller", "workers"),
    Mapping("controller.healthPort", "controller", "health_port"),
    Mapping("controller.reinspectSeconds", "controller", "reinspect_seconds"),
    Mapping("controller.probeErrorWindowSeconds", "controller", "probe_error_window_seconds"),
    Mapping("controller.leaderElection.enabled", "controller", "leader_election"),
    Mapping(
        "controller.leaderElection.leaseDurationSeconds", "controller", "lease_duration_seconds"
    ),
    Mapping(
        "controller.leaderElection.renewDeadlineSeconds", "controller", "renew_deadline_seconds"
    ),
    Mapping("controller.leaderElection.retryPeriodSeconds", "controller", "retry_period_seconds"),
    Mapping("allowedRegistries", "rollout", "allowed_registries"),
    Mapping("allowInsecureRegistries", "rollout", "allow_insecure_registries"),
    Mapping("allowImageOverride", "rollout", "allow_image_override"),
    # Empty: unset, so OLLAYA_REGISTRY from the environment is not shadowed (issue 34).
    Mapping(
        "ollayaRegistry",
        "rollout",
        "ollaya_registry",
        _empty_is_default(RolloutSettings, "ollaya_registry"),
    ),
    Mapping("ollayaHfEndpoint", "rollout", "ollaya_hf_endpoint", _empty_is_none),
    Mapping("pipelines.stageCluster", "rollout", "stage_cluster", _empty_is_none),
    Mapping("pipelines.hub", "rollout", "pipeline_hub"),
    Mapping("temporal.pipelinesNamespace", "temporal", "pipelines_namespace"),
    Mapping(
        "runtimeVersion",
        "rollout",
        "runtime_version",
        _empty_is_default(RolloutSettings, "runtime_version"),
    ),
    Mapping("placement.profile", "rollout", "placement_profile"),
    Mapping("placement.allowedTolerationKeys", "rollout", "allowed_toleration_keys"),
    Mapping("placement.allowedNodeSelectorKeys", "rollout", "allowed_node_selector_keys"),
    Mapping("placement.allowedAffinityKeys", "rollout", "allowed_affinity_keys"),
    Mapping("placement.allowedRuntimeClasses", "rollout", "allowed_runtime_classes"),
    Mapping("placement.allowedPriorityClasses", "rollout", "allowed_priority_classes"),
    Mapping("placement.maxReplicas", "rollout", "max_replicas"),
    Mapping("placement.scratchSizeLimit", "rollout", "scratch_size_limit"),
    Mapping("proxy.httpProxy", "rollout", "http_proxy", _empty_is_none),
    Mapping("proxy.httpsProxy", "rollout", "https_proxy", _empty_is_none),
    Mapping("proxy.noProxy", "rollout", "no_proxy", _empty_is_none),
    Mapping("temporal.namespace", "temporal", "namespace"),
    Mapping("temporal.taskQueue", "temporal", "task_queue"),
    Mapping("temporal.minRetentionDays", "temporal", "min_retention_days"),
    Mapping("temporal.tls.enabled", "temporal", "tls"),
    Mapping("temporal.uiUrl", "temporal", "ui_url", _empty_is_default(TemporalSettings, "ui_url")),
    Mapping("metrics.secure", "metrics", "secure"),
    Mapping("metrics.port", "metrics", "port"),
    Mapping("metrics.authCacheTtlSeconds", "metrics", "auth_cache_ttl_seconds"),
    # The Secret is mounted at one fixed directory; empty = no directory = self-signed.
    Mapping("metrics.certSecret", "metrics", "cert_dir", lambda v: METRICS_CERT_DIR if v else ""),
    Mapping("temporal.payloadCodec.currentKeyId", "temporal", "payload_key_id", _empty_is_none),
    Mapping(
        "pipelines.controller.leaderElection.enabled", "pipeline_controller", "leader_election"
    ),
    Mapping(
        "pipelines.controller.leaderElection.leaseDurationSeconds",
        "pipeline_controller",
        "lease_duration_seconds",
    ),
    Mapping(
        "pipelines.controller.leaderElection.renewDeadlineSeconds",
        "pipeline_controller",
        "renew_deadline_seconds",
    ),
    Mapping(
        "pipelines.controller.leaderElection.retryPeriodSeconds",
        "pipeline_controller",
        "retry_period_seconds",
    ),
    Mapping("pipelines.controller.healthPort", "pipeline_controller", "health_port"),
)

# worker.tuning.* → RolloutSettings fields, set on the worker's container only.
WORKER_TUNING: dict[str, str] = {
    "maxConcurrentActivities": "worker_max_concurrent_activities",
    "maxConcurrentWorkflowTasks": "worker_max_concurrent_workflow_tasks",
    "maxCachedWorkflows": "worker_max_cached_workflows",
    "workflowTaskPollers": "worker_workflow_task_pollers",
    "activityTaskPollers": "worker_activity_task_pollers",
    "stickyScheduleToStartSeconds": "worker_sticky_schedule_to_start_seconds",
}

WORKER_TUNING_VARIABLES = {f"DMROLLOUT_{f.upper()}" for f in WORKER_TUNING.values()}
# Worker Deployment versioning: set per build's worker Deployment (test_worker_builds_*).
WORKER_VERSIONING = {
    "worker_deployment_name": "worker.versioning.deploymentName when enabled (the program's "
    "default, empty, is an unversioned worker)",
    "worker_build_id": "worker.versioning.buildId, else image.tag, else appVersion; a draining "
    "build's own",
    "worker_promote_on_start": "true on this release's build, false on the draining builds",
    "worker_versioning_behavior": "worker.versioning.behavior (AutoUpgrade, or Pinned)",
}
WORKER_VERSIONING_VARIABLES = {f"DMROLLOUT_{f.upper()}" for f in WORKER_VERSIONING}


# Settings fields the chart does not take from values.yaml, and why.
UNMAPPED: dict[str, dict[str, str]] = {
    "controller": {
        "health_bind": "all interfaces in a Pod; the default",
        "lease_namespace": "POD_NAMESPACE through the downward API",
        "identity": "POD_NAME through the downward API",
        "lease_name": "<fullname>-controller, tied to the leader-election Role's resourceNames",
        "queued_recheck_seconds": "internal tempo",
        "unready_reinspect_seconds": "fault tempo (a stable short of model-ready Pods, 10 s)",
        "budget_resync_seconds": "internal tempo",
        "cleanup_round_seconds": "fault tempo; the default suits every install",
        "cleanup_pause_seconds": "fault tempo; the default suits every install",
        "heartbeat_timeout_seconds": "part of the workflow contract, not an install choice",
        "max_rollout_restarts": "fault tempo; the default suits every install",
        "restart_backoff_seconds": "fault tempo; the default suits every install",
        "re_resolve_backoff_seconds": "fault tempo (ModelNotFound re-resolves, 30 s doubling)",
        "re_resolve_max_backoff_seconds": "fault tempo (the re-resolve cap, 10 min, as documented)",
        "worker_poll_stale_seconds": "Temporal's long-poll tempo; the default suits every install",
        "reap_grace_seconds": "fault tempo; the default suits every install",
        "liveness_stall_seconds": "fault tempo; the default suits every install",
    },
    "rollout": {
        "kubeconfig": "in-cluster ServiceAccount credentials",
        "poll_interval_seconds": "internal tempo",
        "queue_full_attempts": "internal retry budget",
        "kube_connect_timeout_seconds": "client tempo; the default bounds every API call",
        "kube_read_timeout_seconds": "client tempo; the default bounds every API call",
        "worker_liveness_stall_seconds": "fault tempo; the default suits every install",
        "worker_series_check_seconds": "internal tempo",
        "worker_drain_check_seconds": "internal tempo",
        "decision_records_namespace": "decisionRecords.enabled: decisionRecords.namespace, "
        "else the release namespace (test_decision_records_*)",
        "decision_records_key_secret": "decisionRecords.keySecret when enabled "
        "(test_decision_records_*)",
        **{f: "worker.tuning.*, on the worker (WORKER_TUNING)" for f in WORKER_TUNING.values()},
        **WORKER_VERSIONING,
    },
    "temporal": {
        "address": "a cluster DNS name instead of the dev server's loopback default",
        "server_ca_file": "temporal.tls.caSecret, mounted",
        "client_cert_file": "temporal.tls.clientCertSecret, mounted",
        "client_key_file": "temporal.tls.clientCertSecret, mounted",
        "server_name": "temporal.tls.serverName (empty = unset)",
        "api_key": "the chart mounts the key as a file instead (api_key_file): a rotation "
        "updates a file, never a running process's environment",
        "api_key_file": "temporal.apiKey.existingSecret, mounted (test below)",
        "metrics_bind_address": "worker.metricsPort; the controller's on loopback, fixed",
        "profile": "a temporal.toml profile: the CLI's; the chart sets each field itself",
        "payload_keys_dir": "temporal.payloadCodec.enabled: secretName mounted (test below)",
    },
    "metrics": {
        "bind": "all interfaces in a Pod; the default",
        "auth_cache_entries": "bounded memory; the default suits every install",
        "review_timeout_seconds": "client tempo; the default bounds every review",
    },
    "pipeline_controller": {
        "lease_namespace": "POD_NAMESPACE through the downward API",
        "identity": "POD_NAME through the downward API",
        "lease_name": "<fullname>-pipeline-controller, tied to its Role's resourceNames",
    },
}


def lookup(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for part in path.split("."):
        node = node[part]
    return node


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            out[key] = merged(base[key], value)
        else:
            out[key] = value
    return out


# --- rendering ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def helm_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm")


@pytest.fixture(scope="module")
def default_objs(helm_tmp: Path) -> list[dict[str, Any]]:
    return render_chart(tmp=helm_tmp, release=RELEASE)


@pytest.fixture(scope="module")
def all_on_objs(helm_tmp: Path) -> list[dict[str, Any]]:
    return render_chart("-f", str(ALL_ON_VALUES), tmp=helm_tmp, release=RELEASE)


@pytest.fixture(scope="module")
def hub_objs(helm_tmp: Path) -> list[dict[str, Any]]:
    """Every option on, on a hub (which is also a stage cluster)."""
    return render_chart(
        "-f", str(ALL_ON_VALUES), "-f", str(HUB_VALUES), tmp=helm_tmp, release=RELEASE
    )


def find(objs: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    """The one object of ``kind`` named <release><suffix> (with no suffix: the one of its
    kind). Exact: -controller must not also find -pipeline-controller."""
    (obj,) = [
        o
        for o in objs
        if o["kind"] == kind and (not suffix or o["metadata"]["name"] == f"{RELEASE}{suffix}")
    ]
    return obj


def container(objs: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    pod = find(objs, kind, suffix)["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    return dict(c)


def env_of(c: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the process would see it; Secret values become
    placeholders naming their source."""
    env: dict[str, str] = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
            continue
        source = e["valueFrom"]
        if "fieldRef" in source:
            env[e["name"]] = {"metadata.name": "pod-0", "metadata.namespace": NAMESPACE}[
                source["fieldRef"]["fieldPath"]
            ]
        else:
            ref = source["secretKeyRef"]
            env[e["name"]] = f"<secret {ref['name']}/{ref['key']}>"
    return env


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, BaseSettings]:
    for key in list(os.environ):
        if key.startswith(("DMROLLOUT_", "POD_")) or key.upper().endswith("_PROXY"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {name: cls() for name, cls in SETTINGS.items()}


# DMROLLOUT_* variables read by a program directly rather than through a settings class, and
# where (test_variables_read_elsewhere_are_read_there checks the name appears there).
READ_ELSEWHERE: dict[str, str] = {
    "DMROLLOUT_WORKER_METRICS_PORT": "controller/worker/run.py",
}


def owning_settings(variable: str) -> tuple[str, str] | None:
    if not variable.startswith("DMROLLOUT_") or variable in READ_ELSEWHERE:
        return None
    for prefix, name in (
        ("DMROLLOUT_PIPELINE_CONTROLLER_", "pipeline_controller"),
        ("DMROLLOUT_CONTROLLER_", "controller"),
        ("DMROLLOUT_TEMPORAL_", "temporal"),
        ("DMROLLOUT_METRICS_", "metrics"),
    ):
        if variable.startswith(prefix):
            return name, variable.removeprefix(prefix).lower()
    return "rollout", variable.removeprefix("DMROLLOUT_").lower()


# --- defaults -------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", MAPPING, ids=lambda m: f"{m.path}->{m.field}")
def test_values_default_equals_settings_default(
    m: Mapping, monkeypatch: pytest.MonkeyPatch
) -> None:
    defaults = settings_from({}, monkeypatch)[m.settings]
    if m.path == "watchNamespaces":
        # The one deliberate difference (issue 12): namespaced unless rbac.clusterWide.
        assert lookup(VALUES, m.path) == getattr(defaults, m.field) == []
        assert lookup(VALUES, "rbac.clusterWide") is False
        return
    assert m.convert(lookup(VALUES, m.path)) == getattr(defaults, m.field)


def test_every_settings_field_is_mapped_or_deliberately_left_out() -> None:
    for name, cls in SETTINGS.items():
        mapped = {m.field for m in MAPPING if m.settings == name}
        assert not mapped & set(UNMAPPED[name]), name
        undecided = set(cls.model_fields) - mapped - set(UNMAPPED[name])
        assert not undecided, f"{cls.__name__}: map or leave out {sorted(undecided)}"
        assert mapped | set(UNMAPPED[name]) == set(cls.model_fields), cls.__name__


def test_the_address_default_is_the_one_deliberate_difference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    program = settings_from({}, monkeypatch)["temporal"]
    assert isinstance(program, TemporalSettings)
    assert program.address.startswith("127.0.0.1:")
    assert VALUES["temporal"]["address"].endswith(".svc.cluster.local:7233")


# --- rendered environment → settings ------------------------------------------------------------


def rendered_case(
    case: str,
    default_objs: list[dict[str, Any]],
    all_on_objs: list[dict[str, Any]],
    hub_objs: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The objects of a case and the values they were rendered from."""
    if case == "default":
        return default_objs, VALUES
    if case == "all-on":
        return all_on_objs, merged(VALUES, ALL_ON)
    return hub_objs, merged(merged(VALUES, ALL_ON), HUB_ON)


@pytest.mark.parametrize("case", ["default", "all-on", "hub"])
def test_rendered_environment_yields_the_values(
    case: str,
    default_objs: list[dict[str, Any]],
    all_on_objs: list[dict[str, Any]],
    hub_objs: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objs, values = rendered_case(case, default_objs, all_on_objs, hub_objs)
    settings = settings_from(env_of(container(objs, "Deployment", "-controller")), monkeypatch)
    for m in MAPPING:
        if m.path.startswith("proxy.") and values["proxy"]["existingSecret"]:
            continue  # from the Secret: test_proxy_from_secret
        if m.settings == "pipeline_controller":
            continue  # its own container: test_pipeline_controller_environment_yields_its_values
        assert getattr(settings[m.settings], m.field) == m.convert(lookup(values, m.path)), m.path


@pytest.mark.parametrize("case", ["hub-default", "hub"])
def test_pipeline_controller_environment_yields_its_values(
    case: str,
    hub_objs: list[dict[str, Any]],
    helm_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its Lease settings from pipelines.controller, its Lease in the release namespace under
    the name its Role allows, and the pipelines' Temporal namespace."""
    if case == "hub":
        objs, values = hub_objs, merged(merged(VALUES, ALL_ON), HUB_ON)
    else:
        on = ("--set", "pipelines.hub=true")
        objs, values = render_chart(*on, tmp=helm_tmp, release=RELEASE), VALUES
    env = env_of(container(objs, "Deployment", PIPELINE_CONTROLLER))
    settings = settings_from(env, monkeypatch)
    for m in MAPPING:
        if m.settings == "pipeline_controller":
            got = getattr(settings[m.settings], m.field)
            assert got == m.convert(lookup(values, m.path)), m.path
    pipeline = settings["pipeline_controller"]
    assert isinstance(pipeline, PipelineControllerSettings)
    assert pipeline.lease_namespace == NAMESPACE
    assert pipeline.identity == "pod-0"
    assert pipeline.lease_name == f"{RELEASE}{PIPELINE_CONTROLLER}"
    temporal = settings["temporal"]
    assert isinstance(temporal, TemporalSettings)
    expected = values["temporal"]["pipelinesNamespace"] or values["temporal"]["namespace"]
    assert temporal.for_pipelines().namespace == expected


def test_defaults_render_exactly_the_program_defaults(
    default_objs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond MAPPING: nothing else the chart sets by default moves a setting off its default
    (except the address, the lease namespace, the identity, and the watched namespaces: the
    release's own by default, see MAPPING)."""
    program = {k: v.model_dump() for k, v in settings_from({}, monkeypatch).items()}
    rendered_env = env_of(container(default_objs, "Deployment", "-controller"))
    chart = {k: v.model_dump() for k, v in settings_from(rendered_env, monkeypatch).items()}
    for name in ("lease_namespace", "identity", "watch_namespaces"):
        del program["controller"][name], chart["controller"][name]
    # POD_* are read by the pipeline controller's settings too (its own Deployment: below).
    for name in ("lease_namespace", "identity"):
        del program["pipeline_controller"][name], chart["pipeline_controller"][name]
    del program["temporal"]["address"], chart["temporal"]["address"]
    # The controller's SDK exporter, on loopback and served through /metrics (fixed).
    del program["temporal"]["metrics_bind_address"], chart["temporal"]["metrics_bind_address"]
    assert chart == program


def test_pipeline_controller_defaults_are_the_program_defaults(
    helm_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pipelines.hub alone: the pipeline controller runs with its program's defaults (but the
    address, its Lease's namespace and name: the release's, and its identity: the Pod's)."""
    objs = render_chart("--set", "pipelines.hub=true", tmp=helm_tmp, release=RELEASE)
    env = env_of(container(objs, "Deployment", PIPELINE_CONTROLLER))
    chart = {k: v.model_dump() for k, v in settings_from(env, monkeypatch).items()}
    program = {k: v.model_dump() for k, v in settings_from({}, monkeypatch).items()}
    for name in ("lease_namespace", "identity"):
        del program["pipeline_controller"][name], chart["pipeline_controller"][name]
    # fullname is "dmrollout" here, so even the Lease's name is the program's default.
    assert chart["pipeline_controller"] == program["pipeline_controller"]
    del program["temporal"]["address"], chart["temporal"]["address"]
    assert chart["temporal"] == program["temporal"]
    assert chart["rollout"] == program["rollout"]


def test_all_on_temporal_connection(
    all_on_objs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = container(all_on_objs, "Deployment", "-controller")
    temporal = settings_from(env_of(c), monkeypatch)["temporal"]
    assert isinstance(temporal, TemporalSettings)
    t = ALL_ON["temporal"]
    assert temporal.address == t["address"]
    assert temporal.server_name == t["tls"]["serverName"]
    assert temporal.api_key is None  # from the file, which a rotation updates
    pod = find(all_on_objs, "Deployment", "-controller")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    # Each file setting points at a file that a mounted Secret provides, from the configured key.
    expected = {
        temporal.server_ca_file: (t["tls"]["caSecret"]["name"], t["tls"]["caSecret"]["key"]),
        temporal.client_cert_file: (
            t["tls"]["clientCertSecret"]["name"],
            t["tls"]["clientCertSecret"]["certKey"],
        ),
        temporal.client_key_file: (
            t["tls"]["clientCertSecret"]["name"],
            t["tls"]["clientCertSecret"]["keyKey"],
        ),
        temporal.api_key_file: (t["apiKey"]["existingSecret"], t["apiKey"]["key"]),
    }
    for path, (secret, key) in expected.items():
        assert path is not None
        volume = volumes[mounts[str(path.parent)]]["secret"]
        assert volume["secretName"] == secret
        assert {"key": key, "path": path.name} in volume["items"]


def test_proxy_inline_and_from_secret(
    helm_tmp: Path, all_on_objs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    objs = render_chart(
        "--set",
        "proxy.httpsProxy=http://proxy.corp:3128",
        "--set",
        "proxy.noProxy=.svc",
        tmp=helm_tmp,
        release=RELEASE,
    )
    env = env_of(container(objs, "Deployment", "-worker"))
    assert env["HTTPS_PROXY"] == env["DMROLLOUT_HTTPS_PROXY"] == "http://proxy.corp:3128"
    assert env["NO_PROXY"] == env["DMROLLOUT_NO_PROXY"] == ".svc"
    assert "HTTP_PROXY" not in env and "DMROLLOUT_HTTP_PROXY" not in env
    rollout = settings_from(env, monkeypatch)["rollout"]
    assert isinstance(rollout, RolloutSettings)
    assert (rollout.https_proxy, rollout.no_proxy, rollout.http_proxy) == (
        "http://proxy.corp:3128",
        ".svc",
        None,
    )
    # From a Secret: all six variables from the upper-case keys, and the lower-case three from
    # the reference chart's keys (httpProxy, ...), each key optional.
    secret = ALL_ON["proxy"]["existingSecret"]
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container(all_on_objs, "Deployment", "-worker")["env"]
        if e["name"].upper().endswith("_PROXY")
    }
    for var, reference_key in (
        ("HTTP_PROXY", "httpProxy"),
        ("HTTPS_PROXY", "httpsProxy"),
        ("NO_PROXY", "noProxy"),
    ):
        for name in (var, f"DMROLLOUT_{var}"):
            assert refs[name] == {"name": secret, "key": var, "optional": True}
        assert refs[var.lower()] == {"name": secret, "key": reference_key, "optional": True}
    assert len(refs) == 9


@pytest.mark.parametrize("case", ["default", "all-on", "hub"])
def test_no_rendered_variable_is_a_typo(
    case: str,
    default_objs: list[dict[str, Any]],
    all_on_objs: list[dict[str, Any]],
    hub_objs: list[dict[str, Any]],
) -> None:
    objs, _ = rendered_case(case, default_objs, all_on_objs, hub_objs)
    seen = 0
    workloads = [("Deployment", "-controller"), ("Deployment", "-worker"), ("Job", "")]
    if case == "hub":
        workloads.append(("Deployment", PIPELINE_CONTROLLER))
    for kind, suffix in workloads:
        if kind == "Job" and case == "default":
            continue
        for e in container(objs, kind, suffix).get("env", []):
            owner = owning_settings(e["name"])
            if owner is None:
                continue
            seen += 1
            name, field = owner
            assert field in SETTINGS[name].model_fields, f"{e['name']} is read by no setting"
    assert seen > 20


def test_kustomize_configmaps_name_real_settings() -> None:
    objs = kustomize()
    variables = [key for o in objs if o["kind"] == "ConfigMap" for key in o["data"]] + [
        e["name"]
        for o in objs
        if o["kind"] == "Deployment"
        for e in o["spec"]["template"]["spec"]["containers"][0].get("env", [])
    ]
    assert len(variables) > 10
    for variable in variables:
        owner = owning_settings(variable)
        if owner is not None:
            assert owner[1] in SETTINGS[owner[0]].model_fields, variable


def test_variables_read_elsewhere_are_read_there() -> None:
    for variable, source in READ_ELSEWHERE.items():
        assert f'"{variable}"' in (ROOT / source).read_text(), (
            f"{source} no longer reads {variable}"
        )


def test_promotion_grace_is_the_controllers_alone(
    default_objs: list[dict[str, Any]], all_on_objs: list[dict[str, Any]]
) -> None:
    # The workflow input carries the controller's value; a RolloutSettings copy would be dead.
    assert "promotion_grace_seconds" not in RolloutSettings.model_fields
    for objs in (default_objs, all_on_objs):
        values = VALUES if objs is default_objs else merged(VALUES, ALL_ON)
        controller = env_of(container(objs, "Deployment", "-controller"))
        worker = env_of(container(objs, "Deployment", "-worker"))
        assert controller["DMROLLOUT_CONTROLLER_PROMOTION_GRACE_SECONDS"] == str(
            values["promotionGraceSeconds"]
        )
        assert "DMROLLOUT_PROMOTION_GRACE_SECONDS" not in controller | worker


@pytest.mark.parametrize("case", ["default", "all-on", "hub"])
def test_controller_worker_and_setup_job_share_one_temporal_and_rollout_config(
    case: str,
    default_objs: list[dict[str, Any]],
    all_on_objs: list[dict[str, Any]],
    hub_objs: list[dict[str, Any]],
) -> None:
    objs, _ = rendered_case(case, default_objs, all_on_objs, hub_objs)

    def shared(c: dict[str, Any], prefixes: tuple[str, ...]) -> list[dict[str, Any]]:
        return [
            e
            for e in c["env"]
            if e["name"].startswith(prefixes)
            and not e["name"].startswith("DMROLLOUT_CONTROLLER_")
            and e["name"] not in WORKER_TUNING_VARIABLES | WORKER_VERSIONING_VARIABLES
            and e["name"]
            not in ("DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS", "DMROLLOUT_WORKER_METRICS_PORT")
        ]

    everything = ("DMROLLOUT_", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy")
    everything += ("https_proxy", "no_proxy")
    controller = container(objs, "Deployment", "-controller")
    worker = container(objs, "Deployment", "-worker")
    assert shared(controller, everything) == shared(worker, everything)
    assert controller["volumeMounts"] == worker["volumeMounts"]
    temporal = ("DMROLLOUT_TEMPORAL_",)
    if case != "default":
        job = container(objs, "Job", "-temporal-setup")
        assert shared(job, temporal) == shared(controller, temporal)
        assert job["volumeMounts"] == controller["volumeMounts"]
    if case == "hub":
        # The same Temporal (address, TLS, API key, payload keys; it picks the pipelines'
        # namespace itself) and the same Secrets mounted, but the metrics certificate: it
        # serves no metrics.
        pipeline = container(objs, "Deployment", PIPELINE_CONTROLLER)
        assert shared(pipeline, temporal) == shared(controller, temporal)
        mounts = [m for m in controller["volumeMounts"] if m["name"] != "metrics-tls"]
        # tmp, the CA, the client certificate, the API key, the payload keys.
        assert len(mounts) == 5 and len(mounts) < len(controller["volumeMounts"])
        assert pipeline["volumeMounts"] == mounts

        def volumes(suffix: str) -> list[dict[str, Any]]:
            return list(find(objs, "Deployment", suffix)["spec"]["template"]["spec"]["volumes"])

        kept = [v for v in volumes("-controller") if v["name"] in {m["name"] for m in mounts}]
        assert volumes(PIPELINE_CONTROLLER) == kept


def _service_ports_are_the_container_ports(
    objs: list[dict[str, Any]], component: str, ports: dict[str, int]
) -> None:
    service = find(objs, "Service", f"-{component}-metrics")
    # Each container port is served under its own name, and nothing else.
    assert {(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        (name, port, name) for name, port in ports.items()
    }
    pod_labels = find(objs, "Deployment", f"-{component}")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


@pytest.mark.parametrize("case", ["default", "all-on"])
def test_ports_agree_between_settings_containers_and_services(
    case: str, default_objs: list[dict[str, Any]], all_on_objs: list[dict[str, Any]]
) -> None:
    """metrics.secure (both cases): the probes on a plain `health` port, the metrics on `https`
    only, the SDK's own exporter on loopback (never a container or Service port)."""
    objs = default_objs if case == "default" else all_on_objs
    values = merged(VALUES, ALL_ON) if case == "all-on" else VALUES
    assert values["metrics"]["secure"] is True
    controller = container(objs, "Deployment", "-controller")
    worker = container(objs, "Deployment", "-worker")
    env_c, env_w = env_of(controller), env_of(worker)
    ports_c = {p["name"]: p["containerPort"] for p in controller["ports"]}
    ports_w = {p["name"]: p["containerPort"] for p in worker["ports"]}
    https = values["metrics"]["port"]
    assert ports_c == {"health": values["controller"]["healthPort"], "https": https}
    assert ports_w == {"health": values["worker"]["resolveMetricsPort"], "https": https}
    assert int(env_c["DMROLLOUT_CONTROLLER_HEALTH_PORT"]) == ports_c["health"]
    assert int(env_w["DMROLLOUT_WORKER_METRICS_PORT"]) == ports_w["health"]
    for env in (env_c, env_w):
        assert (env["DMROLLOUT_METRICS_SECURE"], int(env["DMROLLOUT_METRICS_PORT"])) == (
            "true",
            https,
        )
    sdk = f"127.0.0.1:{values['worker']['metricsPort']}"
    assert env_w["DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS"] == sdk
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert controller[probe]["httpGet"]["port"] == "health"
    assert controller["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert controller["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert worker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    for component in ("controller", "worker"):
        _service_ports_are_the_container_ports(objs, component, {"https": https})


def test_plain_metrics_opt_in_is_the_old_layout(helm_tmp: Path) -> None:
    objs = render_chart("--set", "metrics.secure=false", tmp=helm_tmp, release=RELEASE)
    controller = container(objs, "Deployment", "-controller")
    worker = container(objs, "Deployment", "-worker")
    env_c, env_w = env_of(controller), env_of(worker)
    assert env_c["DMROLLOUT_METRICS_SECURE"] == env_w["DMROLLOUT_METRICS_SECURE"] == "false"
    ports_c = {p["name"]: p["containerPort"] for p in controller["ports"]}
    ports_w = {p["name"]: p["containerPort"] for p in worker["ports"]}
    assert ports_c == {"metrics": int(env_c["DMROLLOUT_CONTROLLER_HEALTH_PORT"])}
    assert env_w["DMROLLOUT_TEMPORAL_METRICS_BIND_ADDRESS"] == f"0.0.0.0:{ports_w['metrics']}"
    assert ports_w["dm-metrics"] == int(env_w["DMROLLOUT_WORKER_METRICS_PORT"])
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert controller[probe]["httpGet"]["port"] == "metrics"
    assert worker["livenessProbe"]["httpGet"]["port"] == "dm-metrics"
    assert worker["readinessProbe"]["tcpSocket"]["port"] == "metrics"
    _service_ports_are_the_container_ports(objs, "controller", ports_c)
    _service_ports_are_the_container_ports(objs, "worker", ports_w)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert not {n for k, n in kinds if k == "ClusterRole" and "metrics" in n}


def test_a_metrics_port_colliding_with_a_health_port_is_refused(helm_tmp: Path) -> None:
    for clash in ("controller.healthPort=8443", "worker.resolveMetricsPort=8443"):
        result = helm_template("--set", clash, tmp=helm_tmp, check=False)
        assert result.returncode != 0, clash
        assert "metrics.port" in result.stderr


@pytest.mark.parametrize("case", ["default", "all-on", "hub"])
def test_pods_are_non_root_read_only_with_a_tmp(
    case: str,
    default_objs: list[dict[str, Any]],
    all_on_objs: list[dict[str, Any]],
    hub_objs: list[dict[str, Any]],
) -> None:
    objs, _ = rendered_case(case, default_objs, all_on_objs, hub_objs)
    workloads = [o for o in objs if o["kind"] in ("Deployment", "Job")]
    assert len(workloads) == {"default": 2, "all-on": 3, "hub": 4}[case]
    for w in workloads:
        pod = w["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 65532
        (c,) = pod["containers"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
        tmp = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}["/tmp"]
        assert "emptyDir" in {v["name"]: v for v in pod["volumes"]}[tmp]


def test_controller_replaces_pods_with_recreate(default_objs: list[dict[str, Any]]) -> None:
    # /readyz is true only for the Lease holder: a RollingUpdate could never make progress.
    assert find(default_objs, "Deployment", "-controller")["spec"]["strategy"] == {
        "type": "Recreate"
    }
    assert (
        find(default_objs, "Deployment", "-worker")["spec"]["replicas"]
        == VALUES["worker"]["replicas"]
    )


def test_setup_hook(all_on_objs: list[dict[str, Any]], default_objs: list[dict[str, Any]]) -> None:
    assert not [o for o in default_objs if o["kind"] == "Job"]
    job = find(all_on_objs, "Job", "-temporal-setup")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == VALUES["temporalSetup"]["hooks"]
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["args"] == ["temporal", "setup"]


# --- image, versions, CRD, schema ---------------------------------------------------------------


def test_versions_agree() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == version
    kustomization = yaml.safe_load((ROOT / "deploy" / "core" / "kustomization.yaml").read_text())
    assert kustomization["images"] == [{"name": "dmrollout", "newTag": version}]


def test_image_reference(
    default_objs: list[dict[str, Any]],
    all_on_objs: list[dict[str, Any]],
    hub_objs: list[dict[str, Any]],
) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert container(default_objs, "Deployment", "-worker")["image"] == (
        f"dmrollout:{chart['appVersion']}"
    )
    image = ALL_ON["image"]
    for kind, suffix in (("Deployment", "-controller"), ("Deployment", "-worker"), ("Job", "")):
        c = container(all_on_objs, kind, suffix)
        assert c["image"] == f"{image['repository']}@{image['digest']}"
    pipeline = container(hub_objs, "Deployment", PIPELINE_CONTROLLER)
    assert pipeline["image"] == f"{image['repository']}@{image['digest']}"
    assert pipeline["args"] == ["pipeline-controller"]
    assert container(default_objs, "Deployment", "-worker")["args"] == ["worker"]
    assert container(default_objs, "Deployment", "-controller")["args"] == ["controller"]


def test_chart_crds_are_the_generated_crds_byte_for_byte() -> None:
    generated = (ROOT / "deploy" / "crd" / "decisionmodels.decisionmodel.io.yaml").read_bytes()
    # No crds/: Helm never upgrades it. Both CRDs are templates from files/ (templates/crd.yaml,
    # templates/pipelines-crd.yaml), applied by install and upgrade (issue 38).
    assert not (CHART / "crds").exists()
    assert (CHART / "files" / "decisionmodels.decisionmodel.io.yaml").read_bytes() == generated
    pipelines = ROOT / PIPELINE_CRD_FILE
    assert (CHART / "files" / pipelines.name).read_bytes() == pipelines.read_bytes()


@pytest.mark.parametrize(
    "values_files",
    [[], [ALL_ON_VALUES], [HUB_VALUES], [ALL_ON_VALUES, HUB_VALUES]],
    ids=["default", "all-on", "hub", "all-on-hub"],
)
def test_helm_lint_strict(values_files: list[Path], helm_tmp: Path) -> None:
    args = ["lint", "--strict", str(CHART)] + [a for f in values_files for a in ("-f", str(f))]
    result = helm(*args, tmp=helm_tmp, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_payload_codec_one_switch_mounts_the_keys_everywhere(
    all_on_objs: list[dict[str, Any]],
    default_objs: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On: controller, workers and the setup hook get the same keys directory, a read-only
    mount of the Secret's listed key IDs, and the current key ID. Off (default): none of it."""
    codec = ALL_ON["temporal"]["payloadCodec"]
    for kind, suffix in (("Deployment", "-controller"), ("Deployment", "-worker"), ("Job", "")):
        c = container(all_on_objs, kind, suffix)
        temporal = settings_from(env_of(c), monkeypatch)["temporal"]
        assert isinstance(temporal, TemporalSettings)
        assert temporal.payload_key_id == codec["currentKeyId"]
        assert temporal.payload_keys_dir is not None
        mount = {m["mountPath"]: m for m in c["volumeMounts"]}[str(temporal.payload_keys_dir)]
        assert mount["readOnly"] is True
        pod = find(all_on_objs, kind, suffix)["spec"]["template"]["spec"]
        volume = {v["name"]: v for v in pod["volumes"]}[mount["name"]]["secret"]
        assert volume["secretName"] == codec["secretName"]
        # File name = key ID: what the codec reads as the key's ID.
        assert [(i["key"], i["path"]) for i in volume["items"]] == [(k, k) for k in codec["keyIds"]]
    for suffix in ("-controller", "-worker"):
        c = container(default_objs, "Deployment", suffix)
        assert not any("PAYLOAD" in e["name"] for e in c["env"])
        assert "/etc/dmrollout/payload-keys" not in [m["mountPath"] for m in c["volumeMounts"]]


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        (["temporal.payloadCodec.currentKeyId=k1"], "payloadCodec.secretName"),
        (["temporal.payloadCodec.secretName=keys"], "payloadCodec.currentKeyId"),
        (
            [
                "temporal.payloadCodec.secretName=keys",
                "temporal.payloadCodec.currentKeyId=k3",
                "temporal.payloadCodec.keyIds={k1,k2}",
            ],
            "must be one of temporal.payloadCodec.keyIds",
        ),
    ],
)
def test_payload_codec_refuses_incomplete_values(
    settings: list[str], complaint: str, helm_tmp: Path
) -> None:
    args = [a for s in ["temporal.payloadCodec.enabled=true", *settings] for a in ("--set", s)]
    result = helm_template(*args, tmp=helm_tmp, release=RELEASE, check=False)
    assert result.returncode != 0
    assert complaint in result.stderr


@pytest.mark.parametrize(
    ("setting", "complaint"),
    [
        ("unknownTopLevel=1", "unknownTopLevel"),
        ("temporal.payloadCodec.currentKeyId=a/b", "currentKeyId"),
        ("controller.replicas=two", "replicas"),
        ("temporal.tls.bogus=true", "bogus"),
        ("image.digest=sha256:short", "digest"),
        ("maxConcurrentRollouts=-1", "maxConcurrentRollouts"),
        ("watchNamespaces[0]=Not_A_Namespace", "watchNamespaces"),
        ("prometheusRule.windows.degraded=ten", "degraded"),
        ("pipelines.controller.bogus=1", "bogus"),
        ("pipelines.controller.replicas=-1", "replicas"),
    ],
)
def test_schema_rejects_bad_values(setting: str, complaint: str, helm_tmp: Path) -> None:
    result = helm_template("--set", setting, tmp=helm_tmp, release=RELEASE, check=False)
    assert result.returncode != 0, f"--set {setting} was accepted"
    assert complaint in result.stderr


# --- monitoring -----------------------------------------------------------------------------------

ALERTS = {
    "DecisionModelRolloutStuck",
    "DecisionModelCandidateTimeout",
    "DecisionModelRolloutFailures",
    "DecisionModelEvaluationPoor",
    "DecisionModelDegraded",
    "DecisionModelModelMismatch",
    "DecisionModelCleanupPending",
    "DmrolloutWorkflowTaskFailures",
    "DecisionModelOperatorReconcileErrors",
    "DecisionModelOperatorDown",
}
TEMPORAL_SERIES = {"temporal_workflow_task_execution_failed_total"}
RUNBOOK_SECTIONS = ("## Signal", "## Likely causes", "## Check", "## Fix")


def exposed_series() -> set[str]:
    """Sample names the controller's registry exposes (counters as _total, histograms as
    _bucket/_sum/_count), read from the metric families rather than typed here."""
    names: set[str] = set()
    metrics = ControllerMetrics()
    ReconcileMetrics(metrics.registry, queue_depth=lambda: 0)  # the manager adds these
    for family in metrics.registry.collect():
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}_{s}" for s in ("bucket", "sum", "count")}
        else:
            names.add(family.name)
    return names


def series_in(expr: str) -> set[str]:
    prefixes = "decisionmodel|dmrollout|temporal|controller_runtime|workqueue"
    return set(re.findall(rf"\b((?:{prefixes})_[a-z_]+)\b", expr))


def test_exposed_series_read_from_the_registry() -> None:
    series = exposed_series()
    assert {
        "decisionmodel_phase",
        "decisionmodel_rollouts_total",
        "decisionmodel_phase_duration_seconds_bucket",
        "decisionmodel_probe_results_total",
    } <= series
    assert "decisionmodel_rollouts" not in series


def test_alerts_are_the_seed_set_each_with_its_runbook(
    all_on_objs: list[dict[str, Any]],
) -> None:
    rule = find(all_on_objs, "PrometheusRule")
    rules = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} == ALERTS
    base = ALL_ON["prometheusRule"]["runbookBaseUrl"].rstrip("/")
    for r in rules:
        assert r["annotations"]["runbook_url"] == f"{base}/{r['alert']}.md"
        runbook = ROOT / "docs" / "runbooks" / f"{r['alert']}.md"
        assert runbook.exists(), runbook
        text = runbook.read_text()
        assert text.startswith(f"# {r['alert']}\n")
        for section in RUNBOOK_SECTIONS:
            assert section in text, f"{runbook.name} lacks {section}"
        assert r["labels"]["severity"] in ("info", "warning", "critical")
        assert r["annotations"]["summary"]


def test_alert_expressions_query_series_that_exist(all_on_objs: list[dict[str, Any]]) -> None:
    known = exposed_series() | TEMPORAL_SERIES
    rule = find(all_on_objs, "PrometheusRule")
    for r in (r for g in rule["spec"]["groups"] for r in g["rules"]):
        used = series_in(r["expr"])
        if r["alert"] != "DecisionModelOperatorDown":
            assert used, r["alert"]
        assert used <= known, f"{r['alert']}: {sorted(used - known)}"


def test_operator_alerts_point_at_this_release(all_on_objs: list[dict[str, Any]]) -> None:
    rules = {
        r["alert"]: r
        for g in find(all_on_objs, "PrometheusRule")["spec"]["groups"]
        for r in g["rules"]
    }
    service = find(all_on_objs, "Service", "-controller-metrics")["metadata"]["name"]
    down = rules["DecisionModelOperatorDown"]["expr"]
    assert f'job="{service}"' in down and f'namespace="{NAMESPACE}"' in down
    assert f'job="{service}"' in rules["DecisionModelOperatorReconcileErrors"]["expr"]
    failures = rules["DmrolloutWorkflowTaskFailures"]["expr"]
    assert f'task_queue="{ALL_ON["temporal"]["taskQueue"]}"' in failures


def _monitored_ports(objs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[str]]:
    monitor = find(objs, "ServiceMonitor")
    endpoints = monitor["spec"]["endpoints"]
    # The series' own `namespace` label (the DecisionModel's) must survive the scrape.
    assert all(e["honorLabels"] is True for e in endpoints)
    scraped = {e["port"] for e in endpoints}
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [o for o in objs if o["kind"] == "Service"]
    selected = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
    assert len(selected) == 2
    # Every port of both Services is scraped, and no endpoint names a port neither has.
    ports = {p["name"] for s in selected for p in s["spec"]["ports"]}
    assert scraped == ports
    return endpoints, ports


def test_service_monitor_scrapes_both_services_keeping_their_labels(
    all_on_objs: list[dict[str, Any]],
) -> None:
    monitor = find(all_on_objs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    endpoints, ports = _monitored_ports(all_on_objs)
    assert ports == {"https"}
    (endpoint,) = endpoints
    # HTTPS with Prometheus' token, verified against the configured CA.
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == ALL_ON["metrics"]["serviceMonitor"]["tlsConfig"]


def test_service_monitor_defaults_and_options(helm_tmp: Path) -> None:
    on = ("--set", "metrics.serviceMonitor.enabled=true")
    (endpoint,) = _monitored_ports(render_chart(*on, tmp=helm_tmp, release=RELEASE))[0]
    # The self-signed default certificate cannot be verified.
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    objs = render_chart(
        *on,
        "--set",
        "metrics.serviceMonitor.authorization.credentials.name=scrape-token",
        "--set",
        "metrics.serviceMonitor.authorization.credentials.key=token",
        tmp=helm_tmp,
        release=RELEASE,
    )
    (endpoint,) = _monitored_ports(objs)[0]
    assert "bearerTokenFile" not in endpoint
    assert endpoint["authorization"] == {"credentials": {"name": "scrape-token", "key": "token"}}
    plain = render_chart(*on, "--set", "metrics.secure=false", tmp=helm_tmp, release=RELEASE)
    endpoints, ports = _monitored_ports(plain)
    assert ports == {"metrics", "dm-metrics"}
    assert all("scheme" not in e and "bearerTokenFile" not in e for e in endpoints)


def test_dashboard_panels_query_series_that_exist(all_on_objs: list[dict[str, Any]]) -> None:
    configmap = find(all_on_objs, "ConfigMap", "-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(configmap["data"]["dmrollout.json"])
    assert dashboard == json.loads((CHART / "dashboards" / "dmrollout.json").read_text())
    known = exposed_series() | TEMPORAL_SERIES
    queried: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            used = series_in(target["expr"])
            assert used, panel["title"]
            assert used <= known, f"{panel['title']}: {sorted(used - known)}"
            queried |= used
    for needed in (
        "decisionmodel_phase",
        "decisionmodel_model_ready_replicas",
        "decisionmodel_desired_replicas",
        "decisionmodel_rollouts_total",
        "decisionmodel_evaluation_accuracy",
        "decisionmodel_evaluation_ece",
        "decisionmodel_probe_results_total",
    ):
        assert needed in queried, needed
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_monitoring_is_off_by_default(default_objs: list[dict[str, Any]]) -> None:
    kinds = {o["kind"] for o in default_objs}
    assert not kinds & {"ServiceMonitor", "PrometheusRule", "ConfigMap", "Job"}


@pytest.mark.parametrize("key", sorted(WORKER_TUNING))
def test_worker_tuning_defaults_and_rendering(
    key: str, default_objs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    field = WORKER_TUNING[key]
    defaults = settings_from({}, monkeypatch)["rollout"]
    assert VALUES["worker"]["tuning"][key] == getattr(defaults, field)
    rendered = settings_from(env_of(container(default_objs, "Deployment", "-worker")), monkeypatch)
    assert getattr(rendered["rollout"], field) == VALUES["worker"]["tuning"][key]


def test_worker_builds_current_promotes_and_draining_ones_finish_their_rollouts(
    default_objs: list[dict[str, Any]], helm_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This release's build promotes itself; a draining build runs its own image, in its own
    Deployment, and never promotes (docs/operations.md "Upgrades and workflow versioning")."""
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    current = env_of(container(default_objs, "Deployment", "-worker"))
    assert current["DMROLLOUT_WORKER_DEPLOYMENT_NAME"] == "dmrollout"
    assert current["DMROLLOUT_WORKER_BUILD_ID"] == app_version
    assert current["DMROLLOUT_WORKER_PROMOTE_ON_START"] == "true"
    rollout = settings_from(current, monkeypatch)["rollout"]
    assert isinstance(rollout, RolloutSettings) and rollout.worker_promote_on_start
    # Issue 34: a plain upgrade moves rollouts in flight to the new build.
    assert rollout.worker_versioning_behavior == "AutoUpgrade"
    assert (rollout.worker_deployment_name, rollout.worker_build_id) == ("dmrollout", app_version)

    objs = render_chart(
        "--set", "image.tag=1.1.0",
        "--set", "worker.versioning.draining[0].buildId=1.0.0",
        tmp=helm_tmp, release=RELEASE,
    )  # fmt: skip
    new = container(objs, "Deployment", "-worker")
    old = container(objs, "Deployment", "-worker-1-0-0")
    assert new["image"].endswith(":1.1.0") and old["image"].endswith(":1.0.0")
    assert env_of(new)["DMROLLOUT_WORKER_BUILD_ID"] == "1.1.0"
    assert env_of(old)["DMROLLOUT_WORKER_BUILD_ID"] == "1.0.0"
    assert env_of(old)["DMROLLOUT_WORKER_PROMOTE_ON_START"] == "false"
    drain = find(objs, "Deployment", "-worker-1-0-0")
    assert drain["spec"]["replicas"] == 1
    assert drain["spec"]["selector"]["matchLabels"]["dmrollout.dev/worker-build"] == "1-0-0"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--set", "worker.versioning.draining[0].buildId=0.1.0.dev0"], "is the current build"),
        (
            [
                "--set", "worker.versioning.enabled=false",
                "--set", "worker.versioning.draining[0].buildId=0.0.9",
            ],
            "needs worker.versioning.enabled",
        ),
        (["--set", "worker.versioning.deploymentName=a.b"], "deploymentName"),
        (["--set", "worker.versioning.behavior=Sticky"], "behavior"),
    ],
)  # fmt: skip
def test_worker_builds_refused(args: list[str], error: str, helm_tmp: Path) -> None:
    out = helm_template(*args, tmp=helm_tmp, release=RELEASE, check=False)
    assert out.returncode != 0 and error in out.stderr, out.stderr


def test_unversioned_worker_when_disabled(helm_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    objs = render_chart("--set", "worker.versioning.enabled=false", tmp=helm_tmp, release=RELEASE)
    env = env_of(container(objs, "Deployment", "-worker"))
    rollout = settings_from(env, monkeypatch)["rollout"]
    assert isinstance(rollout, RolloutSettings) and rollout.worker_deployment_name == ""


def test_decision_records_tell_the_worker_and_grant_the_records_namespace(
    default_objs: list[dict[str, Any]], all_on_objs: list[dict[str, Any]]
) -> None:
    """Off by default (nothing rendered); on, the worker knows the namespace and the Secret,
    and its Role there reads that Secret only and lists and creates ConfigMaps."""
    assert "DMROLLOUT_DECISION_RECORDS_NAMESPACE" not in env_of(
        container(default_objs, "Deployment", "-worker")
    )
    assert not [o for o in default_objs if o["metadata"]["name"].endswith("-decision-records")]
    worker = env_of(container(all_on_objs, "Deployment", "-worker"))
    controller = env_of(container(all_on_objs, "Deployment", "-controller"))
    assert controller["DMROLLOUT_DECISION_RECORDS_NAMESPACE"] == "dmrollout-audit"
    assert worker["DMROLLOUT_DECISION_RECORDS_NAMESPACE"] == "dmrollout-audit"
    assert worker["DMROLLOUT_DECISION_RECORDS_KEY_SECRET"] == "decision-record-key"
    role = find(all_on_objs, "Role", "-decision-records")
    assert role["metadata"]["namespace"] == "dmrollout-audit"
    rules = {(r["resources"][0], tuple(r["verbs"])): r for r in role["rules"]}
    assert rules[("secrets", ("get",))]["resourceNames"] == ["decision-record-key"]
    assert ("configmaps", ("list", "create")) in rules
    binding = find(all_on_objs, "RoleBinding", "-decision-records")
    assert binding["subjects"][0]["name"].endswith("-worker")

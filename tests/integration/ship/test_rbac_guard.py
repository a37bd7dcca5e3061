"""RBAC guard: every shipped rendering of dmrollout's permissions is least privilege.

Renders deploy/ (kustomize: the cluster-wide install, core/ alone, the namespaced variant, a
pipelines hub) and the Helm chart (defaults: namespaced; cluster-wide opt-in;
ci/all-on-values.yaml; a hub, ci/hub-values.yaml over all-on), then checks: no
wildcard anywhere; Secrets and ConfigMaps get-only; no escalate/bind/impersonate; the namespaced
variants grant nothing cluster-wide; each component's grants are exactly its table below (the
one the audit log gave, see tests/e2e/controller/test_rbac_evidence.py) and bound to its own
ServiceAccount only; and every resource the code in controller/, kube/ and activities/ calls is
granted (a call on a new kind fails here, not in a cluster).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.shipped import (
    ALL_ON_VALUES,
    HUB_VALUES,
    ROOT,
    helm_template,
    kustomize,
    render_chart,
)

from controller.reconciler.settings import ControllerSettings

FORBIDDEN_VERBS = {"escalate", "bind", "impersonate", "*"}
Perm = tuple[str, str, str]  # (apiGroup, resource, verb)


def _table(group: str, resources: Iterable[str], verbs: Iterable[str]) -> set[Perm]:
    return {(group, r, v) for r in resources for v in verbs}


# What each component may do where DecisionModels live: exactly this, the table of
# docs/rbac.md derived from the audit log (tests/e2e/controller/test_rbac_evidence.py
# compares it with a run against the real API server).
CONTROLLER_PERMISSIONS: set[Perm] = (
    _table("decisionmodel.io", ["decisionmodels"], ["get", "list", "watch", "patch"])
    | _table("decisionmodel.io", ["decisionmodels/status"], ["patch"])
    | _table("", ["pods"], ["list", "watch"])
    | _table("", ["pods/status"], ["patch"])
    | _table("apps", ["deployments"], ["get", "list", "watch", "create", "patch", "delete"])
    | _table("", ["services"], ["list", "watch", "create", "patch"])
    | _table("policy", ["poddisruptionbudgets"], ["get", "list", "watch", "create", "delete"])
    | _table("", ["persistentvolumeclaims"], ["get", "list", "watch", "patch", "delete"])
    | _table("batch", ["jobs"], ["get", "list", "watch", "delete"])
    | _table("events.k8s.io", ["events"], ["create"])
    | _table("", ["secrets"], ["get"])
)
WORKER_PERMISSIONS: set[Perm] = (
    _table("decisionmodel.io", ["decisionmodels"], ["get"])
    | _table("decisionmodel.io", ["decisionmodels/status"], ["patch"])
    # watch: start and warm-up wake on the revision's Pods, prefetch on its Job (kube/wait.py)
    | _table("", ["pods"], ["list", "watch"])
    | _table("", ["pods/status"], ["patch"])
    | _table("apps", ["deployments"], ["get", "create", "delete"])
    | _table("", ["services"], ["get", "create", "patch"])
    | _table("policy", ["poddisruptionbudgets"], ["get", "create", "delete"])
    | _table("", ["persistentvolumeclaims"], ["get", "create", "patch", "delete"])
    | _table("batch", ["jobs"], ["get", "list", "watch", "create", "delete"])
    | _table("events.k8s.io", ["events"], ["create"])
    | _table("", ["secrets", "configmaps"], ["get"])
)
PERMISSIONS = {"controller": CONTROLLER_PERMISSIONS, "worker": WORKER_PERMISSIONS}
LEADER_PERMISSIONS: set[Perm] = _table(
    "coordination.k8s.io", ["leases"], ["get", "create", "update"]
)
# Secure metrics (issue 12, point 7): reviewing a scrape's token and its right to get /metrics.
# Cluster-scoped review APIs, so a ClusterRole even in namespaced installs; kept in their own
# objects (*-metrics-auth, *-metrics-reader) apart from the components' rules.
METRICS_AUTH_PERMISSIONS: set[Perm] = _table(
    "authentication.k8s.io", ["tokenreviews"], ["create"]
) | _table("authorization.k8s.io", ["subjectaccessreviews"], ["create"])
METRICS_OBJECTS = ("-metrics-auth", "-metrics-reader")


def _is_metrics_auth(obj: dict[str, Any]) -> bool:
    return str(obj["metadata"]["name"]).endswith(METRICS_OBJECTS)


# --- rendering ----------------------------------------------------------------------------------


RENDERINGS: dict[str, Callable[[Path], list[dict[str, Any]]]] = {
    "deploy": lambda tmp: kustomize("deploy"),
    "deploy/core": lambda tmp: kustomize("deploy/core"),
    "deploy/namespaced": lambda tmp: kustomize("deploy/namespaced"),
    "deploy/metrics-auth": lambda tmp: kustomize("deploy/metrics-auth"),
    "deploy/pipelines/hub": lambda tmp: kustomize("deploy/pipelines/hub"),
    "chart-default": lambda tmp: render_chart(tmp=tmp, release="dmr"),
    "chart-cluster-wide": lambda tmp: render_chart(
        "--set", "rbac.clusterWide=true", tmp=tmp, release="dmr"
    ),
    "chart-all-on": lambda tmp: render_chart("-f", str(ALL_ON_VALUES), tmp=tmp, release="dmr"),
    # The pipeline grants and the pipeline controller's own account and Lease
    # (tests/integration/ship/test_pipeline_hub_chart.py: equal to deploy/pipelines/hub).
    "chart-hub": lambda tmp: render_chart(
        "-f", str(ALL_ON_VALUES), "-f", str(HUB_VALUES), tmp=tmp, release="dmr"
    ),
}
NAMESPACED_RENDERINGS = ("deploy/core", "deploy/namespaced", "chart-default", "chart-all-on")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("helm")
    return {name: render(tmp) for name, render in RENDERINGS.items()}


def _roles(objs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (o for o in objs if o["kind"] in ("Role", "ClusterRole"))


def _perms(role: dict[str, Any]) -> set[Perm]:
    return {
        (g, r, v)
        for rule in role.get("rules") or []
        for g in rule.get("apiGroups", [])
        for r in rule.get("resources", [])
        for v in rule.get("verbs", [])
    }


def _role(objs: list[dict[str, Any]], kind: str, suffix: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]


# --- the guards -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(RENDERINGS))
def test_no_wildcards_and_no_privilege_verbs(
    rendered: dict[str, list[dict[str, Any]]], name: str
) -> None:
    roles = list(_roles(rendered[name]))
    assert roles, f"{name} renders no Role or ClusterRole"
    for role in roles:
        assert "aggregationRule" not in role, role["metadata"]["name"]
        for rule in role["rules"]:
            if "nonResourceURLs" in rule:
                # Only the scraper's role, only get on /metrics (test_metrics_auth_objects).
                assert role["metadata"]["name"].endswith("-metrics-reader"), role["metadata"]
                continue
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                for value in rule.get(key, []):
                    assert "*" not in value, f"{name}: wildcard in {key} of {role['metadata']}"
            assert not set(rule["verbs"]) & FORBIDDEN_VERBS, (name, rule)


@pytest.mark.parametrize("name", list(RENDERINGS))
def test_secrets_and_configmaps_are_get_only(
    rendered: dict[str, list[dict[str, Any]]], name: str
) -> None:
    for role in _roles(rendered[name]):
        if role["metadata"]["name"].endswith("-decision-records"):
            # The records namespace's own Role (docs/audit.md): its one Secret by name, and
            # the records (ConfigMaps) listed and created there.
            secrets = [r for r in role["rules"] if r["resources"] == ["secrets"]]
            assert secrets and all(r.get("resourceNames") for r in secrets), role
            assert set(_perms(role)) <= {
                ("", "secrets", "get"), ("", "configmaps", "list"), ("", "configmaps", "create")
            }, role  # fmt: skip
            continue
        for group, resource, verb in _perms(role):
            if group == "" and resource.split("/")[0] in ("secrets", "configmaps"):
                assert (resource, verb) in {("secrets", "get"), ("configmaps", "get")}, (
                    f"{name}: {role['metadata']['name']} grants {verb} on {resource}"
                )


@pytest.mark.parametrize("name", NAMESPACED_RENDERINGS)
def test_namespaced_variants_grant_nothing_cluster_wide(
    rendered: dict[str, list[dict[str, Any]]], name: str
) -> None:
    kinds = {o["kind"] for o in rendered[name] if not _is_metrics_auth(o)}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding"}, f"{name}: {sorted(kinds)}"


@pytest.mark.parametrize("name", ["deploy/metrics-auth", "chart-default", "chart-all-on"])
def test_metrics_auth_objects(rendered: dict[str, list[dict[str, Any]]], name: str) -> None:
    """The review rights (bound to dmrollout's two ServiceAccounts) and the scraper's role
    (bound to nobody by dmrollout: the operator binds Prometheus), and nothing else."""
    objs = rendered[name]
    (auth,) = _role(objs, "ClusterRole", "-metrics-auth")
    assert _perms(auth) == METRICS_AUTH_PERMISSIONS
    (reader,) = _role(objs, "ClusterRole", "-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    (binding,) = _role(objs, "ClusterRoleBinding", "-metrics-auth")
    assert binding["roleRef"]["name"] == auth["metadata"]["name"]
    prefix = "dmr-dmrollout" if name.startswith("chart") else "dmrollout"
    assert {(s["name"], s["namespace"]) for s in binding["subjects"]} == {
        (f"{prefix}-controller", "dmrollout-system"),
        (f"{prefix}-worker", "dmrollout-system"),
    }
    assert not [b for b in objs if b.get("roleRef", {}).get("name", "").endswith("-reader")]


def test_plain_metrics_grant_no_review_rights(tmp_path: Path) -> None:
    objs = render_chart("--set", "metrics.secure=false", tmp=tmp_path, release="dmr")
    assert not [o for o in objs if _is_metrics_auth(o)]


def _bound_accounts(binding: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(s["kind"], s["name"], s["namespace"]) for s in binding["subjects"]}


@pytest.mark.parametrize("component", list(PERMISSIONS))
@pytest.mark.parametrize("name", ["deploy", "chart-cluster-wide"])
def test_cluster_wide_install_grants_each_component_exactly_its_table(
    rendered: dict[str, list[dict[str, Any]]], name: str, component: str
) -> None:
    (role,) = _role(rendered[name], "ClusterRole", f"-{component}")
    assert _perms(role) == PERMISSIONS[component]
    (binding,) = _role(rendered[name], "ClusterRoleBinding", f"-{component}")
    prefix = "dmr-dmrollout" if name.startswith("chart") else "dmrollout"
    # One account per role: the worker's token cannot do what only the controller needs.
    assert _bound_accounts(binding) == {
        ("ServiceAccount", f"{prefix}-{component}", "dmrollout-system")
    }


@pytest.mark.parametrize("component", list(PERMISSIONS))
def test_namespaced_kustomization_grants_each_component_its_table_in_its_namespace(
    rendered: dict[str, list[dict[str, Any]]], component: str
) -> None:
    (role,) = _role(rendered["deploy/namespaced"], "Role", f"-{component}")
    assert _perms(role) == PERMISSIONS[component]
    assert role["metadata"]["namespace"] == "team-a"
    (binding,) = _role(rendered["deploy/namespaced"], "RoleBinding", f"-{component}")
    # The ServiceAccounts stay where the controller and workers run.
    assert _bound_accounts(binding) == {
        ("ServiceAccount", f"dmrollout-{component}", "dmrollout-system")
    }


@pytest.mark.parametrize("component", list(PERMISSIONS))
@pytest.mark.parametrize("name", ["chart-default", "chart-all-on"])
def test_chart_is_namespaced_by_default_one_role_per_watched_namespace(
    rendered: dict[str, list[dict[str, Any]]], name: str, component: str
) -> None:
    values = yaml.safe_load(ALL_ON_VALUES.read_text()) if name == "chart-all-on" else {}
    # Without watchNamespaces the release's own namespace is the one watched.
    watched = values.get("watchNamespaces") or ["dmrollout-system"]
    roles = _role(rendered[name], "Role", f"-{component}")
    assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(watched)
    for role in roles:
        assert _perms(role) == PERMISSIONS[component]
    bindings = _role(rendered[name], "RoleBinding", f"-{component}")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(watched)
    (controller,) = [
        o
        for o in rendered[name]
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("controller")
    ]
    env = {
        e["name"]: e.get("value")
        for e in controller["spec"]["template"]["spec"]["containers"][0].get("env", [])
    }
    assert sorted(json.loads(env["DMROLLOUT_CONTROLLER_WATCH_NAMESPACES"])) == sorted(watched)


def test_chart_refuses_cluster_wide_with_watch_namespaces(tmp_path: Path) -> None:
    result = helm_template(
        "--set", "rbac.clusterWide=true", "--set", "watchNamespaces={team-a}",
        tmp=tmp_path, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "rbac.clusterWide" in result.stderr


@pytest.mark.parametrize("name", ["deploy", "chart-default", "chart-all-on"])
def test_leader_election_is_one_lease_for_the_controller_only(
    rendered: dict[str, list[dict[str, Any]]], name: str
) -> None:
    objs = rendered[name]
    (role,) = _role(objs, "Role", "-leader-election")
    assert role["metadata"]["namespace"] == "dmrollout-system"
    assert _perms(role) == LEADER_PERMISSIONS
    (controller,) = [
        o
        for o in objs
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("controller")
    ]
    env = {
        e["name"]: e.get("value")
        for e in controller["spec"]["template"]["spec"]["containers"][0].get("env", [])
    }
    lease = (
        env.get("DMROLLOUT_CONTROLLER_LEASE_NAME")
        or ControllerSettings.model_fields["lease_name"].get_default()
    )
    for rule in role["rules"]:
        if set(rule["verbs"]) & {"get", "update"}:
            assert rule.get("resourceNames") == [lease]
        else:
            assert rule["verbs"] == ["create"]
    (binding,) = _role(objs, "RoleBinding", "-leader-election")
    sa = controller["spec"]["template"]["spec"]["serviceAccountName"]
    assert [s["name"] for s in binding["subjects"]] == [sa]


@pytest.mark.parametrize("name", ["deploy", "chart-default", "chart-all-on", "chart-hub"])
def test_every_binding_names_a_shipped_service_account_used_by_a_deployment(
    rendered: dict[str, list[dict[str, Any]]], name: str
) -> None:
    objs = rendered[name]
    accounts = {o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"}
    used = {
        o["spec"]["template"]["spec"]["serviceAccountName"]
        for o in objs
        if o["kind"] == "Deployment"
    }
    assert used == accounts
    for binding in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert subject["name"] in accounts
            assert subject["namespace"] == "dmrollout-system"


@pytest.mark.parametrize("component", list(PERMISSIONS))
def test_kustomize_and_chart_rules_are_the_same(
    rendered: dict[str, list[dict[str, Any]]], component: str
) -> None:
    (deploy_role,) = _role(rendered["deploy"], "ClusterRole", f"-{component}")
    (chart_role,) = _role(rendered["chart-cluster-wide"], "ClusterRole", f"-{component}")
    (namespaced,) = _role(rendered["deploy/namespaced"], "Role", f"-{component}")
    assert deploy_role["rules"] == chart_role["rules"] == namespaced["rules"]


# --- the code's API calls are all granted -------------------------------------------------------

_CALL = re.compile(
    r"\b(read|list|create|patch|delete|replace)_(namespaced_|cluster_)?([a-z_]+?)"
    r"(_for_all_namespaces)?\b(?=\s*[,)\n(])"
)
_RESOURCES: dict[str, tuple[str, str]] = {
    "deployment": ("apps", "deployments"),
    "service": ("", "services"),
    "persistent_volume_claim": ("", "persistentvolumeclaims"),
    "pod_disruption_budget": ("policy", "poddisruptionbudgets"),
    "job": ("batch", "jobs"),
    "pod": ("", "pods"),
    "pod_status": ("", "pods/status"),
    "secret": ("", "secrets"),
    "config_map": ("", "configmaps"),
    "event": ("events.k8s.io", "events"),
    "lease": ("coordination.k8s.io", "leases"),
    "token_review": ("authentication.k8s.io", "tokenreviews"),
    "subject_access_review": ("authorization.k8s.io", "subjectaccessreviews"),
    "custom_object": ("decisionmodel.io", "decisionmodels"),
    "custom_object_status": ("decisionmodel.io", "decisionmodels/status"),
}
_VERB = {"read": "get", "replace": "update"}
# Resources listed by controller/machinery/watch.py are also watched (list + watch on the same
# lister).
_WATCHED = {
    "decisionmodels",
    "pods",
    "deployments",
    "services",
    "poddisruptionbudgets",
    "persistentvolumeclaims",
    "jobs",
}


def code_permissions() -> set[Perm]:
    found: set[Perm] = set()
    for package in ("controller", "kube", "activities"):
        for source in (ROOT / package).rglob("*.py"):
            for match in _CALL.finditer(source.read_text()):
                verb, _, kind, _ = match.groups()
                if kind not in _RESOURCES:
                    continue
                group, resource = _RESOURCES[kind]
                found.add((group, resource, _VERB.get(verb, verb)))
    for group, resource, verb in list(found):
        if verb == "list" and resource in _WATCHED:
            found.add((group, resource, "watch"))
    return found


def test_every_api_call_in_the_code_is_granted() -> None:
    used = code_permissions()
    # The scan sees the calls it must (a broken regex would pass vacuously otherwise).
    assert {
        ("", "pods/status", "patch"),
        ("coordination.k8s.io", "leases", "update"),
        ("decisionmodel.io", "decisionmodels/status", "patch"),
        ("events.k8s.io", "events", "create"),
        ("", "secrets", "get"),
        ("authentication.k8s.io", "tokenreviews", "create"),
    } <= used
    # Per resource, not per verb: kube/client.py names every verb of every owned kind (KindOps),
    # used or not, so the verbs each component really needs come from the audit log instead
    # (tests/e2e/controller/test_rbac_evidence.py). A call on a new resource still fails here.
    granted = {
        (g, r)
        for g, r, _ in CONTROLLER_PERMISSIONS
        | WORKER_PERMISSIONS
        | LEADER_PERMISSIONS
        | METRICS_AUTH_PERMISSIONS
    }
    missing = {(g, r) for g, r, _ in used} - granted
    assert not missing, f"the code calls the API without RBAC for: {sorted(missing)}"


def test_no_kubernetes_call_escapes_the_scan() -> None:
    """Every `<verb>_namespaced_<kind>` / `list_<kind>_for_all_namespaces` name in the code maps
    to a known resource, so a call on a new kind cannot slip past the guard above."""
    unknown: set[str] = set()
    for package in ("controller", "kube", "activities"):
        for source in (ROOT / package).rglob("*.py"):
            for match in _CALL.finditer(source.read_text()):
                _verb, scope, kind, all_ns = match.groups()
                if (scope or all_ns) and kind not in _RESOURCES:
                    unknown.add(match.group(0))
    assert not unknown, f"map these calls to resources in this test: {sorted(unknown)}"

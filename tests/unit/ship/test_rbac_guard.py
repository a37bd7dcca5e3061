"""RBAC guard: every shipped rendering of dmrollout's permissions is least privilege.

Renders deploy/ (kustomize: the cluster-wide install, core/ alone, the namespaced variant) and the
Helm chart (defaults and ci/all-on-values.yaml), then checks: no wildcard anywhere; Secrets and
ConfigMaps get-only; no escalate/bind/impersonate; the namespaced variants grant nothing
cluster-wide; the grants are exactly the permission table below; and every Kubernetes API call
in controller/, kube/ and activities/ is covered by that table (a new call without RBAC fails
here, not in a cluster).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from shipped import ALL_ON_VALUES, ROOT, kustomize, render_chart

from controller.settings import ControllerSettings

FORBIDDEN_VERBS = {"escalate", "bind", "impersonate", "*"}
Perm = tuple[str, str, str]  # (apiGroup, resource, verb)


def _table(group: str, resources: Iterable[str], verbs: Iterable[str]) -> set[Perm]:
    return {(group, r, v) for r in resources for v in verbs}


LIFECYCLE = ("get", "list", "watch", "create", "patch", "delete")
# What the controller and the workers may do where DecisionModels live: exactly this.
MANAGER_PERMISSIONS: set[Perm] = (
    _table("decisionmodel.io", ["decisionmodels"], ["get", "list", "watch", "patch"])
    | _table("decisionmodel.io", ["decisionmodels/status"], ["patch"])
    | _table("apps", ["deployments"], LIFECYCLE)
    | _table("", ["services", "persistentvolumeclaims"], LIFECYCLE)
    | _table("policy", ["poddisruptionbudgets"], LIFECYCLE)
    | _table("batch", ["jobs"], LIFECYCLE)
    | _table("", ["pods"], ["get", "list", "watch"])
    | _table("", ["pods/status"], ["patch"])
    | _table("events.k8s.io", ["events"], ["create"])
    | _table("", ["secrets", "configmaps"], ["get"])
)
LEADER_PERMISSIONS: set[Perm] = _table(
    "coordination.k8s.io", ["leases"], ["get", "create", "update"]
)
# Secure metrics (issue 12, point 7): reviewing a scrape's token and its right to get /metrics.
# Cluster-scoped review APIs, so a ClusterRole even in namespaced installs; kept in their own
# objects (*-metrics-auth, *-metrics-reader) apart from the manager rules.
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
    "chart-default": lambda tmp: render_chart(tmp=tmp, release="dmr"),
    "chart-all-on": lambda tmp: render_chart("-f", str(ALL_ON_VALUES), tmp=tmp, release="dmr"),
}
NAMESPACED_RENDERINGS = ("deploy/core", "deploy/namespaced", "chart-all-on")


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


@pytest.mark.parametrize("name", ["deploy", "chart-default"])
def test_cluster_wide_install_grants_exactly_the_manager_table(
    rendered: dict[str, list[dict[str, Any]]], name: str
) -> None:
    (role,) = _role(rendered[name], "ClusterRole", "-manager")
    assert _perms(role) == MANAGER_PERMISSIONS
    (binding,) = _role(rendered[name], "ClusterRoleBinding", "-manager")
    subjects = {(s["kind"], s["name"], s["namespace"]) for s in binding["subjects"]}
    prefix = "dmr-dmrollout" if name.startswith("chart") else "dmrollout"
    assert subjects == {
        ("ServiceAccount", f"{prefix}-controller", "dmrollout-system"),
        ("ServiceAccount", f"{prefix}-worker", "dmrollout-system"),
    }


def test_namespaced_kustomization_grants_the_manager_table_in_its_namespace(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    (role,) = _role(rendered["deploy/namespaced"], "Role", "-manager")
    assert _perms(role) == MANAGER_PERMISSIONS
    assert role["metadata"]["namespace"] == "team-a"
    (binding,) = _role(rendered["deploy/namespaced"], "RoleBinding", "-manager")
    # The ServiceAccounts stay where the controller and workers run.
    assert {s["namespace"] for s in binding["subjects"]} == {"dmrollout-system"}
    assert {s["name"] for s in binding["subjects"]} == {
        "dmrollout-controller",
        "dmrollout-worker",
    }


def test_chart_watch_namespaces_gives_one_role_per_namespace(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    watched = yaml.safe_load(ALL_ON_VALUES.read_text())["watchNamespaces"]
    roles = _role(rendered["chart-all-on"], "Role", "-manager")
    assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(watched)
    for role in roles:
        assert _perms(role) == MANAGER_PERMISSIONS
    bindings = _role(rendered["chart-all-on"], "RoleBinding", "-manager")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(watched)


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


@pytest.mark.parametrize("name", ["deploy", "chart-default", "chart-all-on"])
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


def test_kustomize_and_chart_rules_are_the_same(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    (deploy_role,) = _role(rendered["deploy"], "ClusterRole", "-manager")
    (chart_role,) = _role(rendered["chart-default"], "ClusterRole", "-manager")
    assert deploy_role["rules"] == chart_role["rules"]


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
# Resources listed by controller/watch.py are also watched (list + watch on the same lister).
_WATCHED = {
    "decisionmodels",
    "pods",
    "deployments",
    "services",
    "poddisruptionbudgets",
    "persistentvolumeclaims",
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
    missing = used - (MANAGER_PERMISSIONS | LEADER_PERMISSIONS | METRICS_AUTH_PERMISSIONS)
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

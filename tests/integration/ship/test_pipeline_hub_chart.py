"""The chart on a hub of DecisionModelPipelines (pipelines.hub): what deploy/pipelines/hub
installs by hand, from the chart.

- the pipeline CRD is the generated one (files/ byte for byte, rendered with only Helm's labels
  and the keep policy added), and nothing of the hub renders without pipelines.hub;
- the pipeline controller's Deployment runs `dmrollout pipeline-controller` with the
  controller's image, Pod hardening and placement, as a ServiceAccount of its own;
- its grants and the hub worker's are deploy/pipelines/hub's rules exactly, bound to their own
  accounts only, and its Lease is its own (never the controller's);
- two replicas without leader election are refused.

Settings and mounts: test_chart_values.py; the grants asked of a real authorizer:
tests/integration/test_manifests_dry_run.py.
"""

from __future__ import annotations

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
    helm_template,
    kustomize,
    render_chart,
)

from decisionmodel.api.crd import CRD_NAME as DM_CRD_NAME
from decisionmodel.api.pipeline_crd import PIPELINE_CRD_FILE, PIPELINE_CRD_NAME

RELEASE = "dmr"  # fullname dmr-dmrollout: names come from the release, never hard-coded
FULLNAME = "dmr-dmrollout"
PIPELINE_CONTROLLER = f"{FULLNAME}-pipeline-controller"
HUB_WORKER_ROLE = f"{FULLNAME}-pipeline-hub-worker"
LEASE_ROLE = f"{PIPELINE_CONTROLLER}-leader-election"
# The kustomize names of the same objects (deploy/pipelines/hub).
KUSTOMIZE = {
    PIPELINE_CONTROLLER: "dmrollout-pipeline-controller",
    HUB_WORKER_ROLE: "dmrollout-pipeline-hub-worker",
    LEASE_ROLE: "dmrollout-pipeline-controller-leader-election",
}


@pytest.fixture(scope="module")
def helm_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm")


@pytest.fixture(scope="module")
def hub(helm_tmp: Path) -> list[dict[str, Any]]:
    return render_chart("--set", "pipelines.hub=true", tmp=helm_tmp, release=RELEASE)


@pytest.fixture(scope="module")
def hub_all_on(helm_tmp: Path) -> list[dict[str, Any]]:
    return render_chart(
        "-f", str(ALL_ON_VALUES), "-f", str(HUB_VALUES), tmp=helm_tmp, release=RELEASE
    )


@pytest.fixture(scope="module")
def by_hand() -> list[dict[str, Any]]:
    return kustomize("deploy/pipelines/hub")


def named(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def pod_of(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return dict(named(objs, "Deployment", name)["spec"]["template"]["spec"])


def bindings_of(objs: list[dict[str, Any]], account: str) -> list[dict[str, Any]]:
    return [
        o
        for o in objs
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(s["name"] == account for s in o["subjects"])
    ]


# --- what renders, and when ------------------------------------------------------------------


def test_nothing_of_the_hub_without_pipelines_hub(helm_tmp: Path) -> None:
    for objs in (
        render_chart(tmp=helm_tmp, release=RELEASE),
        render_chart("--set", "pipelines.stageCluster=staging", tmp=helm_tmp, release=RELEASE),
    ):
        names = {o["metadata"]["name"] for o in objs}
        assert not {PIPELINE_CONTROLLER, HUB_WORKER_ROLE, LEASE_ROLE, PIPELINE_CRD_NAME} & names
        crds = [o["metadata"]["name"] for o in objs if o["kind"] == "CustomResourceDefinition"]
        assert crds == [DM_CRD_NAME]  # the DecisionModel CRD only (templates/crd.yaml)


def test_the_crd_is_the_generated_one_kept_on_uninstall(hub: list[dict[str, Any]]) -> None:
    generated_text = (ROOT / PIPELINE_CRD_FILE).read_text()
    assert (CHART / "files" / Path(PIPELINE_CRD_FILE).name).read_text() == generated_text
    rendered = named(hub, "CustomResourceDefinition", PIPELINE_CRD_NAME)
    meta = rendered["metadata"]
    # Deleting the CRD would delete every pipeline with it (helm uninstall, or hub turned off).
    assert meta.pop("annotations") == {"helm.sh/resource-policy": "keep"}
    assert meta.pop("labels")["app.kubernetes.io/instance"] == RELEASE
    assert rendered == yaml.safe_load(generated_text)


# --- the pipeline controller's Deployment ----------------------------------------------------


@pytest.mark.parametrize("case", ["hub", "all-on-hub"])
def test_the_pipeline_controller_deployment(
    case: str, hub: list[dict[str, Any]], hub_all_on: list[dict[str, Any]]
) -> None:
    objs = hub if case == "hub" else hub_all_on
    values = yaml.safe_load((CHART / "values.yaml").read_text())["pipelines"]["controller"]
    if case != "hub":
        values = {**values, **yaml.safe_load(HUB_VALUES.read_text())["pipelines"]["controller"]}
    deployment = named(objs, "Deployment", PIPELINE_CONTROLLER)
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == values["replicas"]
    # The old Pod (and its Lease) goes before the new one starts.
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod, controller = pod_of(objs, PIPELINE_CONTROLLER), pod_of(objs, f"{FULLNAME}-controller")
    assert pod["serviceAccountName"] == PIPELINE_CONTROLLER
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert selector["app.kubernetes.io/component"] == "pipeline-controller"
    # The controller's hardening and placement (imagePullSecrets, nodeSelector, tolerations, …).
    for key in set(controller) - {"serviceAccountName", "containers", "volumes"}:
        assert pod.get(key) == controller[key], key
    (c,) = pod["containers"]
    (main,) = controller["containers"]
    assert c["args"] == ["pipeline-controller"]
    assert (c["image"], c["imagePullPolicy"]) == (main["image"], main["imagePullPolicy"])
    assert c["securityContext"] == main["securityContext"]
    assert c["resources"] == values["resources"]
    # Its probes on its health port (issue 34: an API error used to end it, unprobed).
    port = values["healthPort"]
    assert c["ports"] == [{"name": "health", "containerPort": port, "protocol": "TCP"}]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["DMROLLOUT_PIPELINE_CONTROLLER_HEALTH_PORT"] == str(port)
    paths = {k: c[k]["httpGet"] for k in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert paths["livenessProbe"] == paths["startupProbe"] == {"path": "/healthz", "port": "health"}
    assert paths["readinessProbe"] == {"path": "/readyz", "port": "health"}


def test_its_own_service_account(hub_all_on: list[dict[str, Any]]) -> None:
    account = named(hub_all_on, "ServiceAccount", PIPELINE_CONTROLLER)
    assert account["metadata"]["namespace"] == NAMESPACE
    annotations = yaml.safe_load(ALL_ON_VALUES.read_text())["serviceAccount"]["annotations"]
    assert account["metadata"]["annotations"] == annotations


def test_replicas_without_leader_election_are_refused(helm_tmp: Path) -> None:
    result = helm_template(
        "--set", "pipelines.hub=true", "--set", "pipelines.controller.replicas=2",
        "--set", "pipelines.controller.leaderElection.enabled=false",
        tmp=helm_tmp, release=RELEASE, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "pipelines.controller.leaderElection.enabled" in result.stderr
    # One replica without it is allowed, and then there is no Lease to grant.
    objs = render_chart(
        "--set", "pipelines.hub=true", "--set", "pipelines.controller.leaderElection.enabled=false",
        tmp=helm_tmp, release=RELEASE,
    )  # fmt: skip
    assert not [o for o in objs if o["metadata"]["name"] == LEASE_ROLE]


# --- grants ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["hub", "all-on-hub"])
def test_grants_are_deploy_pipelines_hub_exactly(
    case: str,
    hub: list[dict[str, Any]],
    hub_all_on: list[dict[str, Any]],
    by_hand: list[dict[str, Any]],
) -> None:
    objs = hub if case == "hub" else hub_all_on
    for kind, name in (
        ("ClusterRole", PIPELINE_CONTROLLER),
        ("ClusterRole", HUB_WORKER_ROLE),
        ("Role", LEASE_ROLE),
    ):
        chart, manual = named(objs, kind, name), named(by_hand, kind, KUSTOMIZE[name])
        rules = [
            {**r, "resourceNames": [KUSTOMIZE[n] for n in r["resourceNames"]]}
            if "resourceNames" in r
            else r
            for r in chart["rules"]
        ]
        assert rules == manual["rules"], name
    # Kustomize's Lease role is in dmrollout-system, as the chart's in the release namespace.
    assert named(objs, "Role", LEASE_ROLE)["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("case", ["hub", "all-on-hub"])
def test_each_grant_is_bound_to_its_own_account_only(
    case: str, hub: list[dict[str, Any]], hub_all_on: list[dict[str, Any]]
) -> None:
    objs = hub if case == "hub" else hub_all_on

    def subjects(kind: str, name: str) -> list[tuple[str, str, str]]:
        binding = named(objs, kind, name)
        assert binding["roleRef"]["name"] == name
        return [(s["kind"], s["name"], s["namespace"]) for s in binding["subjects"]]

    pipeline = ("ServiceAccount", PIPELINE_CONTROLLER, NAMESPACE)
    assert subjects("ClusterRoleBinding", PIPELINE_CONTROLLER) == [pipeline]
    assert subjects("RoleBinding", LEASE_ROLE) == [pipeline]
    worker = ("ServiceAccount", f"{FULLNAME}-worker", NAMESPACE)
    assert subjects("ClusterRoleBinding", HUB_WORKER_ROLE) == [worker]
    # Nothing else is granted to the pipeline controller: no DecisionModel, no metrics review,
    # not the controller's Lease.
    assert sorted(b["metadata"]["name"] for b in bindings_of(objs, PIPELINE_CONTROLLER)) == sorted(
        [PIPELINE_CONTROLLER, LEASE_ROLE]
    )


@pytest.mark.parametrize("case", ["hub", "all-on-hub"])
def test_its_lease_is_its_own(
    case: str, hub: list[dict[str, Any]], hub_all_on: list[dict[str, Any]]
) -> None:
    objs = hub if case == "hub" else hub_all_on
    (c,) = pod_of(objs, PIPELINE_CONTROLLER)["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    lease = env["DMROLLOUT_PIPELINE_CONTROLLER_LEASE_NAME"]
    assert lease == PIPELINE_CONTROLLER
    (main,) = pod_of(objs, f"{FULLNAME}-controller")["containers"]
    controller_env = {e["name"]: e.get("value") for e in main["env"]}
    assert lease != controller_env["DMROLLOUT_CONTROLLER_LEASE_NAME"]
    role = named(objs, "Role", LEASE_ROLE)
    limited = [r for r in role["rules"] if set(r["verbs"]) & {"get", "update"}]
    assert [r["resourceNames"] for r in limited] == [[lease]]
    # And the controller's Lease role does not name it.
    controller_role = named(objs, "Role", f"{FULLNAME}-leader-election")
    assert all(lease not in r.get("resourceNames", []) for r in controller_role["rules"])

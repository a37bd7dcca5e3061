"""What a platform team applies is accepted by a real kube-apiserver, and grants what it should.

- `kubectl apply -k deploy/ --dry-run=server` (and deploy/namespaced, deploy/examples) with strict
  field validation and the restricted Pod Security profile of dmrollout-system: no warning;
- `helm template | kubectl apply --dry-run=server` for the chart's defaults,
  ci/all-on-values.yaml and a pipelines hub (ci/hub-values.yaml over it: the pipeline CRD and
  controller), with minimal Prometheus Operator CRDs installed for ServiceMonitor and
  PrometheusRule;
- the RBAC applied for real, then the authorizer asked (SubjectAccessReviews, what `kubectl auth
  can-i` sends) as each ServiceAccount: what the controller and the workers need is allowed,
  everything next to it is not; on a hub, the same for the pipeline controller's own account;
- the examples are valid to the project's own models (DecisionModel, golden dataset) and the
  NetworkPolicy selects the Pods dmrollout renders.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from decisionmodel.api import DecisionModel
from decisionmodel.engine.render import labels as L
from decisionmodel.evaluation.dataset import parse_dataset
from localenv.cluster import LocalCluster
from localenv.paths import bin_dir

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "deploy" / "crd" / "decisionmodels.decisionmodel.io.yaml"
CHART = ROOT / "charts" / "dmrollout"
ALL_ON = CHART / "ci" / "all-on-values.yaml"
HUB = CHART / "ci" / "hub-values.yaml"
EXAMPLES = ROOT / "deploy" / "examples"
SYSTEM_NS = "dmrollout-system"
EXAMPLES_NS = "dmrollout-examples"
NAMESPACED_NS = "team-a"  # the placeholder in deploy/namespaced/kustomization.yaml
ALL_ON_WATCHED = yaml.safe_load(ALL_ON.read_text())["watchNamespaces"]
# The records namespace of ci/all-on-values.yaml (docs/audit.md): the platform team's, made
# before the release, as a watched namespace is.
ALL_ON_RECORDS = yaml.safe_load(ALL_ON.read_text())["decisionRecords"]["namespace"]
PSA_WARNING = "would violate PodSecurity"


def _monitoring_crd(kind: str, plural: str, spec_schema: dict[str, Any]) -> dict[str, Any]:
    """A minimal monitoring.coreos.com CRD: enough structure to catch a malformed rule, the rest
    preserved (the local cluster has no Prometheus Operator)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": kind, "plural": plural, "listKind": f"{kind}List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": spec_schema},
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
MONITORING_CRDS = [
    _monitoring_crd(
        "ServiceMonitor",
        "servicemonitors",
        {
            "type": "object",
            "required": ["selector", "endpoints"],
            "properties": {
                "endpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string"},
                            "honorLabels": {"type": "boolean"},
                            # The HTTPS scrape of secure metrics (the real CRD's names).
                            "scheme": {"type": "string", "enum": ["http", "https"]},
                            "bearerTokenFile": {"type": "string"},
                            "tlsConfig": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "authorization": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    },
                }
            },
            "x-kubernetes-preserve-unknown-fields": True,
        },
    ),
    _monitoring_crd(
        "PrometheusRule",
        "prometheusrules",
        {
            "type": "object",
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string"},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "expr": {"type": "string"},
                                        "for": {"type": "string"},
                                        "labels": _STRING_MAP,
                                        "annotations": _STRING_MAP,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    ),
]


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@pytest.fixture(scope="module")
def cluster(local_cluster: LocalCluster) -> LocalCluster:
    """The CRDs established; the namespaces the manifests go into exist for real (a server dry
    run of a namespaced object needs its namespace)."""
    local_cluster.kubectl(
        "apply", "--server-side", "--field-manager=dmrollout-manifests-test", "-f", str(CRD)
    )
    local_cluster.apply(MONITORING_CRDS)
    for name in (
        "decisionmodels.decisionmodel.io",
        "servicemonitors.monitoring.coreos.com",
        "prometheusrules.monitoring.coreos.com",
    ):
        local_cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    # dmrollout-system as deploy/ defines it (restricted Pod Security), so the dry runs below are
    # checked against that profile.
    local_cluster.kubectl("apply", "-f", str(ROOT / "deploy" / "core" / "namespace.yaml"))
    made = (EXAMPLES_NS, NAMESPACED_NS, *ALL_ON_WATCHED, ALL_ON_RECORDS)
    local_cluster.apply([_namespace(n) for n in made])
    return local_cluster


def dry_run(cluster: LocalCluster, *args: str, input: str | None = None) -> str:
    result = cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", *args, input=input, check=False
    )
    assert result.returncode == 0, result.stderr
    assert PSA_WARNING not in result.stderr, result.stderr
    # The one expected warning: the CRD was applied server-side by the fixture, so client-side
    # apply notes the missing last-applied annotation. Any other warning is a finding.
    warnings = [
        line
        for line in result.stderr.splitlines()
        if line.startswith("Warning") and "last-applied-configuration" not in line
    ]
    assert not warnings, result.stderr
    return result.stdout


def helm_template(*args: str, tmp: Path) -> str:
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp / "cache"),
        "HELM_CONFIG_HOME": str(tmp / "config"),
        "HELM_DATA_HOME": str(tmp / "data"),
    }
    return subprocess.run(
        [str(bin_dir() / "helm"), "template", "dmr", str(CHART), "-n", SYSTEM_NS, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    ).stdout


def _kinds(text: str) -> list[str]:
    return sorted(d["kind"] for d in yaml.safe_load_all(text) if d)


def _server_dry_run_lines(stdout: str) -> int:
    return sum(1 for line in stdout.splitlines() if line.endswith("(server dry run)"))


# --- deploy/ ------------------------------------------------------------------------------------
def test_kustomize_deploy_dry_run(cluster: LocalCluster) -> None:
    rendered = cluster.kubectl("kustomize", str(ROOT / "deploy")).stdout
    out = dry_run(cluster, "-k", str(ROOT / "deploy"))
    assert _server_dry_run_lines(out) == len(_kinds(rendered))
    for expected in (
        "customresourcedefinition.apiextensions.k8s.io/decisionmodels.decisionmodel.io",
        "clusterrole.rbac.authorization.k8s.io/dmrollout-controller",
        "clusterrole.rbac.authorization.k8s.io/dmrollout-worker",
        "deployment.apps/dmrollout-controller",
        "deployment.apps/dmrollout-worker",
        "service/dmrollout-controller-metrics",
    ):
        assert expected in out


def test_kustomize_namespaced_variant_dry_run(cluster: LocalCluster) -> None:
    out = dry_run(cluster, "-k", str(ROOT / "deploy" / "namespaced"))
    assert "role.rbac.authorization.k8s.io/dmrollout-controller" in out
    assert "role.rbac.authorization.k8s.io/dmrollout-worker" in out
    assert _server_dry_run_lines(out) == 4


def test_examples_dry_run(cluster: LocalCluster) -> None:
    out = dry_run(cluster, "-k", str(EXAMPLES), "-n", EXAMPLES_NS)
    assert "decisionmodel.decisionmodel.io/triage" in out
    assert "configmap/triage-golden" in out
    assert "networkpolicy.networking.k8s.io/decisionmodel-serving" in out


def test_server_dry_run_really_validates_decisionmodels(cluster: LocalCluster) -> None:
    """The dry runs above are not vacuous: the same DecisionModel with a tag-less model is
    refused by the CRD's validation."""
    dm = yaml.safe_load((EXAMPLES / "decisionmodel.yaml").read_text())
    dm["spec"]["model"] = "laya"
    result = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        EXAMPLES_NS,
        "-f",
        "-",
        input=yaml.safe_dump(dm),
        check=False,
    )
    assert result.returncode != 0
    assert "spec.model" in result.stderr


# --- the Helm chart ---------------------------------------------------------------------------
@pytest.mark.parametrize("values", [[], [ALL_ON], [ALL_ON, HUB]], ids=["default", "all-on", "hub"])
def test_helm_template_dry_run(cluster: LocalCluster, values: list[Path], tmp_path: Path) -> None:
    rendered = helm_template(*[a for v in values for a in ("-f", str(v))], tmp=tmp_path)
    kinds = _kinds(rendered)
    if HUB in values:
        # The pipeline CRD is accepted as the chart renders it; the hub's grants are
        # cluster-wide (pipelines live in any namespace): test_pipeline_hub_rbac_*.
        assert {"CustomResourceDefinition", "ClusterRole"} <= set(kinds)
    elif values:
        assert {"ServiceMonitor", "PrometheusRule", "ConfigMap", "Job"} <= set(kinds)
        # Namespaced: nothing cluster-wide but the metrics review rights (cluster-scoped APIs).
        cluster_roles = [
            d["metadata"]["name"]
            for d in yaml.safe_load_all(rendered)
            if d and d["kind"] == "ClusterRole"
        ]
        assert all(n.endswith(("-metrics-auth", "-metrics-reader")) for n in cluster_roles)
    out = dry_run(cluster, "-f", "-", input=rendered)
    assert _server_dry_run_lines(out) == len(kinds)


# --- RBAC, for real -------------------------------------------------------------------------------

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def _rbac_objects(cluster: LocalCluster, path: str) -> list[dict[str, Any]]:
    rendered = cluster.kubectl("kustomize", str(ROOT / path)).stdout
    return [d for d in yaml.safe_load_all(rendered) if d and d["kind"] in RBAC_KINDS]


def _not_there_yet(cluster: LocalCluster, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects that do not exist yet: only those are this test's to delete afterwards. The
    ServiceAccounts dmrollout-controller and -worker are the harness's component identities
    too; deleting them would void the tokens of a controller and worker other tests run."""
    missing = []
    for o in objects:
        meta = o["metadata"]
        where = ["-n", meta["namespace"]] if meta.get("namespace") else []
        found = cluster.kubectl("get", *where, o["kind"], meta["name"], check=False)
        if found.returncode != 0:
            missing.append(o)
    return missing


@pytest.fixture
def applied(cluster: LocalCluster) -> Iterator[list[dict[str, Any]]]:
    """Objects applied for real during a test (and not there before), deleted afterwards."""
    objects: list[dict[str, Any]] = []
    yield objects
    if objects:
        cluster.kubectl(
            "delete",
            "--ignore-not-found",
            "--wait=false",
            "-f",
            "-",
            input=yaml.safe_dump_all(objects),
        )


@dataclass(frozen=True)
class Access:
    """One question to the authorizer, as `kubectl auth can-i VERB RESOURCE.GROUP/NAME` asks it."""

    verb: str
    resource: str  # resource[.group], e.g. deployments.apps
    subresource: str = ""
    name: str = ""

    def review(self, sa: str, namespace: str) -> dict[str, Any]:
        resource, _, group = self.resource.partition(".")
        attributes = {"namespace": namespace, "verb": self.verb, "group": group}
        attributes |= {"resource": resource, "subresource": self.subresource, "name": self.name}
        user = f"system:serviceaccount:{SYSTEM_NS}:{sa}"
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{SYSTEM_NS}"]
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": [*groups, "system:authenticated"],
                "resourceAttributes": attributes,
            },
        }


def allowed(cluster: LocalCluster, sa: str, namespace: str, accesses: list[Access]) -> list[bool]:
    """The authorizer's answers, in one round trip (SubjectAccessReviews, as `auth can-i`)."""
    reviews = [a.review(sa, namespace) for a in accesses]
    out = cluster.kubectl(
        "create", "-o", "json", "-f", "-", input=yaml.safe_dump_all(reviews)
    ).stdout
    # One JSON document per review, concatenated.
    items: list[dict[str, Any]] = []
    decoder, position = json.JSONDecoder(), 0
    while rest := out[position:].lstrip():
        item, position = decoder.raw_decode(out, len(out) - len(rest))
        items.append(item)
    assert [i["kind"] for i in items] == ["SubjectAccessReview"] * len(accesses)
    return [bool(item["status"].get("allowed")) for item in items]


def assert_access(
    cluster: LocalCluster, sa: str, namespace: str, granted: list[Access], refused: list[Access]
) -> None:
    answers = allowed(cluster, sa, namespace, granted + refused)
    wrong = [
        (a, "refused" if a in granted else "granted")
        for a, yes in zip(granted + refused, answers, strict=True)
        if yes != (a in granted)
    ]
    assert not wrong, f"{sa} in {namespace or '(all namespaces)'}: {wrong}"


# Each component's own grants (the audit log's table, docs/rbac.md), asked of the authorizer.
GRANTS = {
    "dmrollout-controller": [
        Access("get", "secrets"),
        Access("patch", "deployments.apps"),
        Access("create", "deployments.apps"),
        Access("delete", "jobs.batch"),
        Access("list", "jobs.batch"),
        Access("watch", "jobs.batch"),
        Access("watch", "poddisruptionbudgets.policy"),
        Access("list", "persistentvolumeclaims"),
        Access("create", "services"),
        Access("watch", "decisionmodels.decisionmodel.io"),
        Access("patch", "decisionmodels.decisionmodel.io"),
        Access("patch", "decisionmodels.decisionmodel.io", "status"),
        Access("patch", "pods", "status"),
        Access("watch", "pods"),
        Access("create", "events.events.k8s.io"),
    ],
    "dmrollout-worker": [
        Access("get", "secrets"),
        Access("get", "configmaps"),
        Access("create", "deployments.apps"),
        Access("create", "jobs.batch"),
        Access("delete", "jobs.batch"),
        Access("create", "persistentvolumeclaims"),
        Access("patch", "services"),
        Access("get", "decisionmodels.decisionmodel.io"),
        Access("patch", "decisionmodels.decisionmodel.io", "status"),
        Access("patch", "pods", "status"),
        Access("list", "pods"),
        Access("watch", "pods"),
        Access("list", "jobs.batch"),
        Access("watch", "jobs.batch"),
        Access("create", "events.events.k8s.io"),
    ],
}
COMMON_REFUSALS = [
    Access("list", "secrets"),
    Access("watch", "secrets"),
    Access("list", "configmaps"),
    Access("update", "deployments.apps"),
    Access("deletecollection", "deployments.apps"),
    Access("patch", "pods"),
    Access("delete", "pods"),
    Access("create", "pods"),
    Access("create", "pods", "exec"),
    Access("create", "decisionmodels.decisionmodel.io"),
    Access("delete", "decisionmodels.decisionmodel.io"),
    Access("update", "decisionmodels.decisionmodel.io", "status"),
    Access("create", "events"),
    Access("create", "secrets"),
    Access("create", "roles.rbac.authorization.k8s.io"),
    Access("create", "leases.coordination.k8s.io"),
    Access("delete", "services"),
    Access("patch", "jobs.batch"),
]
# What the other component may, and this one may not (issue 12: the controller gets no Jobs it
# would create, the worker no list/watch but on Pods and its Jobs, which its steps wait on).
REFUSALS = {
    "dmrollout-controller": [
        *COMMON_REFUSALS,
        Access("create", "jobs.batch"),
        Access("get", "configmaps"),
        Access("create", "persistentvolumeclaims"),
    ],
    "dmrollout-worker": [
        *COMMON_REFUSALS,
        Access("list", "deployments.apps"),
        Access("watch", "deployments.apps"),
        Access("list", "decisionmodels.decisionmodel.io"),
        Access("watch", "decisionmodels.decisionmodel.io"),
        Access("patch", "decisionmodels.decisionmodel.io"),
        Access("list", "persistentvolumeclaims"),
        Access("patch", "deployments.apps"),
    ],
}
LEASE = "leases.coordination.k8s.io"


def test_cluster_wide_rbac_grants_exactly_what_is_needed(
    cluster: LocalCluster, applied: list[dict[str, Any]]
) -> None:
    objects = _rbac_objects(cluster, "deploy")
    applied.extend(_not_there_yet(cluster, objects))
    cluster.apply(objects)
    for sa in ("dmrollout-controller", "dmrollout-worker"):
        for ns in ("default", EXAMPLES_NS):
            assert_access(cluster, sa, ns, GRANTS[sa], REFUSALS[sa])
    # Cluster-wide list/watch is what the controller's watches use without --watch-namespaces.
    assert_access(
        cluster,
        "dmrollout-controller",
        "",
        [Access("list", "decisionmodels.decisionmodel.io"), Access("watch", "pods")],
        [Access("get", "nodes"), Access("list", "secrets")],
    )
    # The worker's steps watch their Pods and Jobs, in whatever namespace the DecisionModel is.
    assert_access(
        cluster,
        "dmrollout-worker",
        "",
        [Access("watch", "pods")],
        [Access("list", "decisionmodels.decisionmodel.io"), Access("list", "secrets")],
    )
    own_lease = [
        Access("get", LEASE, name="dmrollout-controller"),
        Access("update", LEASE, name="dmrollout-controller"),
    ]
    assert_access(
        cluster,
        "dmrollout-controller",
        SYSTEM_NS,
        [Access("create", LEASE), *own_lease],
        [
            Access("update", LEASE, name="someone-else"),
            Access("delete", LEASE, name="dmrollout-controller"),
            Access("list", LEASE),
        ],
    )
    assert_access(cluster, "dmrollout-worker", SYSTEM_NS, [], [Access("create", LEASE), *own_lease])


def test_namespaced_rbac_grants_only_in_its_namespace(
    cluster: LocalCluster, applied: list[dict[str, Any]]
) -> None:
    objects = _rbac_objects(cluster, "deploy/core") + _rbac_objects(cluster, "deploy/namespaced")
    applied.extend(_not_there_yet(cluster, objects))
    cluster.apply(objects)
    for sa in ("dmrollout-controller", "dmrollout-worker"):
        assert_access(cluster, sa, NAMESPACED_NS, GRANTS[sa], REFUSALS[sa])
        assert_access(cluster, sa, "default", [], GRANTS[sa])
        assert_access(cluster, sa, "", [], [Access("list", "decisionmodels.decisionmodel.io")])


# The hub's pipeline controller (chart, pipelines.hub), as release "dmr": its own account, the
# pipelines in every namespace, its own Lease; the worker may write the runs' status only.
PIPELINE_SA = "dmr-dmrollout-pipeline-controller"
DMP = "decisionmodelpipelines.decisionmodel.io"
PIPELINE_GRANTS = [
    Access("get", DMP),
    Access("list", DMP),
    Access("watch", DMP),
    Access("patch", DMP, "status"),
]
PIPELINE_REFUSALS = [
    Access("create", DMP),
    Access("update", DMP),
    Access("patch", DMP),
    Access("delete", DMP),
    Access("update", DMP, "status"),
    Access("get", "decisionmodels.decisionmodel.io"),
    Access("list", "decisionmodels.decisionmodel.io"),
    Access("create", "decisionmodels.decisionmodel.io"),
    Access("patch", "decisionmodels.decisionmodel.io", "status"),
    Access("get", "secrets"),
    Access("get", "configmaps"),
    Access("list", "pods"),
    Access("create", "deployments.apps"),
    Access("create", "events.events.k8s.io"),
]


def test_pipeline_hub_rbac_grants_the_pipeline_controller_exactly_what_it_needs(
    cluster: LocalCluster, applied: list[dict[str, Any]], tmp_path: Path
) -> None:
    rendered = helm_template("--set", "pipelines.hub=true", tmp=tmp_path)
    objects = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] in RBAC_KINDS]
    applied.extend(_not_there_yet(cluster, objects))
    cluster.apply(objects)
    for ns in ("default", EXAMPLES_NS, ""):
        assert_access(cluster, PIPELINE_SA, ns, PIPELINE_GRANTS, PIPELINE_REFUSALS)
        # The hub's worker writes a run's status fields, and reads no pipeline.
        assert_access(
            cluster,
            "dmr-dmrollout-worker",
            ns,
            [Access("patch", DMP, "status")],
            [Access("get", DMP), Access("list", DMP), Access("patch", DMP)],
        )
        # The controller has nothing to do with pipelines.
        assert_access(cluster, "dmr-dmrollout-controller", ns, [], PIPELINE_GRANTS)
    own, controllers = PIPELINE_SA, "dmr-dmrollout-controller"
    assert_access(
        cluster,
        PIPELINE_SA,
        SYSTEM_NS,
        [
            Access("create", LEASE),
            Access("get", LEASE, name=own),
            Access("update", LEASE, name=own),
        ],
        [
            Access("get", LEASE, name=controllers),
            Access("update", LEASE, name=controllers),
            Access("delete", LEASE, name=own),
            Access("list", LEASE),
            Access("create", "tokenreviews.authentication.k8s.io"),
        ],
    )
    # Nor may the controller take the pipeline controller's Lease over.
    assert_access(
        cluster,
        controllers,
        SYSTEM_NS,
        [Access("update", LEASE, name=controllers)],
        [Access("get", LEASE, name=own), Access("update", LEASE, name=own)],
    )


# --- the examples, against the project's own models --------------------------------------------


def _example(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(doc, dict)
    return doc


def test_example_decisionmodel_is_valid_and_uses_the_golden_set() -> None:
    raw = _example("decisionmodel.yaml")
    dm = DecisionModel.from_k8s({**raw, "metadata": {**raw["metadata"], "namespace": "x"}})
    evaluation = dm.spec.rollout.evaluation
    assert evaluation is not None
    ref = evaluation.dataset_ref.config_map_ref
    assert ref is not None
    golden = _example("golden-set.yaml")
    assert golden["metadata"]["name"] == ref.name
    cases = parse_dataset(golden["data"][ref.key].encode(), evaluation.max_cases)
    assert len(cases) == 4
    # Every kind of question (choice, noul, score) is exercised by the example.
    kinds = {q["type"] for c in cases for q in c.questions.values()}
    assert kinds == {"choice", "noul", "score"}


def test_example_networkpolicy_selects_serving_pods_on_their_port() -> None:
    policy = _example("networkpolicy.yaml")["spec"]
    serving = {
        **L.common_labels("triage", "0123456789abcdef"),
        L.LABEL_COMPONENT: L.COMPONENT_SERVING,
    }
    prefetch = {
        **L.common_labels("triage", "0123456789abcdef"),
        L.LABEL_COMPONENT: L.COMPONENT_PREFETCH,
    }
    selector = policy["podSelector"]["matchLabels"]
    assert selector.items() <= serving.items()
    assert not selector.items() <= prefetch.items()
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": L.HTTP_PORT}]
    peers = rule["from"]
    assert {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": SYSTEM_NS}}
    } in peers
    assert {"podSelector": {"matchLabels": {"decisionmodel.io/client": "true"}}} in peers
    assert policy["policyTypes"] == ["Ingress"]

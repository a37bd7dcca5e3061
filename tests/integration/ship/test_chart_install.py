"""The chart installed, upgraded and uninstalled on the real local cluster by Helm 3 and Helm 4
(issue 38 item 3): ``--wait`` returns once the release's workloads are up (Helm 4 judges them
with kstatus), an upgrade applies the new chart's DecisionModel CRD (templates/crd.yaml: Helm
never upgrades crds/, which left clusters on the first schema), and an uninstall keeps the CRD
(and so every DecisionModel) while removing the release's workloads.

A CRD already in the cluster without Helm's ownership (installed by hand, by deploy/, or by an
older chart from crds/) is adopted first, as docs/operations.md "The CRD" says to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.shipped import CHART

from decisionmodel.api.crd import CRD_NAME, render_crd_yaml
from localenv.cluster import LocalCluster
from localenv.paths import bin_dir

ROOT = Path(__file__).resolve().parents[3]
UPGRADED = "upgraded by the chart's next release"


def helm_binary(major: str) -> str:
    if major == "3":
        return str(bin_dir() / "helm")
    built = subprocess.run(
        ["bash", str(ROOT / "hack" / "helm4.sh")],
        capture_output=True, text=True, check=True, timeout=1200,
    )  # fmt: skip
    return built.stdout.strip()


def run_helm(major: str, cluster: LocalCluster, tmp: Path, *args: str) -> str:
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp / "cache"),
        "HELM_CONFIG_HOME": str(tmp / "config"),
        "HELM_DATA_HOME": str(tmp / "data"),
    }
    found = subprocess.run(
        [helm_binary(major), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert found.returncode == 0, f"helm {' '.join(args)}: {found.stdout}{found.stderr}"
    return found.stdout


def crd(cluster: LocalCluster) -> dict[str, Any]:
    return dict(cluster.kubectl_json("get", "crd", CRD_NAME))


def adopt(cluster: LocalCluster, release: str, namespace: str) -> None:
    """docs/operations.md: a CRD Helm does not own yet is labelled and annotated for the
    release once."""
    cluster.kubectl("label", "crd", CRD_NAME, "--overwrite", "app.kubernetes.io/managed-by=Helm")
    cluster.kubectl(
        "annotate", "crd", CRD_NAME, "--overwrite",
        f"meta.helm.sh/release-name={release}", f"meta.helm.sh/release-namespace={namespace}",
    )  # fmt: skip


def next_release(tmp: Path) -> Path:
    """The chart as its next release would ship it: the CRD's schema description changed."""
    chart = tmp / "next" / "dmrollout"
    shutil.copytree(CHART, chart)
    path = chart / "files" / f"{CRD_NAME}.yaml"
    obj = yaml.safe_load(path.read_text())
    schema = obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["description"] = f"{schema.get('description', '')} ({UPGRADED})"
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return chart


@pytest.mark.parametrize("major", ["3", "4"])
def test_install_upgrade_uninstall_keeps_the_crd_current_and_then_kept(
    local_cluster: LocalCluster, tmp_path: Path, major: str
) -> None:
    release, namespace = f"dmr{major}", f"helm{major}-{uuid.uuid4().hex[:6]}"
    # Cluster-scoped admission policies would also bind the other tests of this cluster.
    values = ("--set", "admissionPolicy.enabled=false")
    try:
        if CRD_NAME in local_cluster.kubectl("get", "crd", "-o", "name").stdout:
            adopt(local_cluster, release, namespace)
        run_helm(
            major, local_cluster, tmp_path, "install", release, str(CHART), "-n", namespace,
            "--create-namespace", "--wait", "--timeout", "4m", *values,
        )  # fmt: skip
        deployments = local_cluster.kubectl_json("-n", namespace, "get", "deployments")["items"]
        assert deployments and all(
            (d.get("status") or {}).get("availableReplicas") == d["spec"]["replicas"]
            for d in deployments
        ), "helm --wait returned before the workloads were available"
        meta = crd(local_cluster)["metadata"]
        assert meta["annotations"]["helm.sh/resource-policy"] == "keep"
        assert meta["annotations"]["meta.helm.sh/release-name"] == release

        # Helm 4 applies server-side: fields another manager applied (kubectl apply
        # --server-side, as deploy/ and older guides did) conflict until taken over once.
        takeover = ("--force-conflicts",) if major == "4" else ()
        run_helm(
            major, local_cluster, tmp_path, "upgrade", release, str(next_release(tmp_path)),
            "-n", namespace, "--wait", "--timeout", "4m", *values, *takeover,
        )  # fmt: skip
        schema = crd(local_cluster)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert UPGRADED in schema["description"], "helm upgrade left the CRD on the old schema"

        run_helm(major, local_cluster, tmp_path, "uninstall", release, "-n", namespace, "--wait")
        assert crd(local_cluster)["metadata"]["name"] == CRD_NAME  # kept: DecisionModels live
        left = local_cluster.kubectl_json("-n", namespace, "get", "deployments")["items"]
        assert left == []
    finally:
        # Back to the generated CRD, without Helm's ownership, for the tests after this one.
        local_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                              input=render_crd_yaml())  # fmt: skip
        local_cluster.kubectl(
            "annotate", "crd", CRD_NAME, "meta.helm.sh/release-name-",
            "meta.helm.sh/release-namespace-", "helm.sh/resource-policy-", check=False,
        )  # fmt: skip
        local_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_a_crd_helm_does_not_own_is_named_with_the_fix(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """Upgrading from a chart that shipped crds/ (or a CRD applied by hand): Helm refuses to
    take an object it does not own, and its message names the labels the docs tell to set."""
    local_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                          input=render_crd_yaml())  # fmt: skip
    local_cluster.kubectl(
        "annotate", "crd", CRD_NAME, "meta.helm.sh/release-name-",
        "meta.helm.sh/release-namespace-", check=False,
    )  # fmt: skip
    local_cluster.kubectl("label", "crd", CRD_NAME, "app.kubernetes.io/managed-by-", check=False)
    namespace = f"helmown-{uuid.uuid4().hex[:6]}"
    found = subprocess.run(
        [helm_binary("3"), "--kubeconfig", str(local_cluster.kubeconfig), "template", "x",
         str(CHART), "-n", namespace, "--set", "admissionPolicy.enabled=false"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    docs = [d for d in yaml.safe_load_all(found.stdout) if d]
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"] == [
        CRD_NAME
    ]
    refused = subprocess.run(
        [helm_binary("3"), "--kubeconfig", str(local_cluster.kubeconfig), "install", "own",
         str(CHART), "-n", namespace, "--create-namespace", "--set",
         "admissionPolicy.enabled=false", "--dry-run=server"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "HELM_CACHE_HOME": str(tmp_path / "c"),
             "HELM_CONFIG_HOME": str(tmp_path / "f"), "HELM_DATA_HOME": str(tmp_path / "d")},
    )  # fmt: skip
    assert refused.returncode != 0
    said = refused.stderr
    assert "meta.helm.sh/release-name" in said and "app.kubernetes.io/managed-by" in said, said
    local_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)

"""The generated DecisionModelPipeline CRD on a real kube-apiserver (issue 25, "Bad input"):
accepted (structural, CEL within budget), `kubectl get dmp` served, a duplicate stage name, an
unknown or self dependency, a soak or a window that does not parse, and a template that is not
a DecisionModel spec refused naming the field; a valid pipeline stored unpruned."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Protocol

import pytest
import yaml
from harness.helpers import assert_eventually, scratch_namespace

from decisionmodel.api.pipeline import DecisionModelPipelineSpec
from decisionmodel.api.pipeline_crd import PIPELINE_CRD_NAME, render_pipeline_crd_yaml


class Cluster(Protocol):
    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any: ...


@pytest.fixture(scope="module")
def cluster(local_cluster: Cluster) -> Cluster:
    local_cluster.kubectl(
        "apply", "--server-side", "--field-manager=dmrollout-crd-test", "-f", "-",
        input=render_pipeline_crd_yaml(),
    )  # fmt: skip
    local_cluster.kubectl(
        "wait", "--for=condition=Established", f"crd/{PIPELINE_CRD_NAME}", "--timeout=60s"
    )
    assert_eventually(
        lambda: local_cluster.kubectl("get", "dmp", "-A", check=False).returncode == 0,
        timeout=30,
        what="the dmp short name is served",
    )
    return local_cluster


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    yield from scratch_namespace(cluster, "dmp")


def stage(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "cluster": "prod", "namespace": "models", **extra}


def pipeline(namespace: str, stages: list[dict[str, Any]], model: str = "laya:en") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModelPipeline",
            "metadata": {"name": "scoring", "namespace": namespace},
            "spec": {"template": {"spec": {"model": model}}, "stages": stages},
        }
    )


def test_a_valid_pipeline_is_stored_and_listed(cluster: Cluster, namespace: str) -> None:
    stages = [
        stage("staging"),
        stage(
            "prod-eu",
            dependsOn=["staging"],
            soak="30m",
            approval="Manual",
            windows=[{"days": ["Mon", "Tue"], "start": "09:00", "end": "17:00"}],
        ),
    ]
    cluster.kubectl("apply", "--server-side", "-f", "-", input=pipeline(namespace, stages))
    stored = json.loads(
        cluster.kubectl("get", "dmp", "scoring", "-n", namespace, "-o", "json").stdout
    )
    spec = DecisionModelPipelineSpec.model_validate(stored["spec"])
    assert spec.stage("prod-eu").windows[0].time_zone == "UTC"
    assert stored["spec"]["stages"][1]["windows"][0]["days"] == ["Mon", "Tue"]
    table = cluster.kubectl("get", "dmp", "-n", namespace).stdout
    for column in ("MODEL", "REVISION", "PHASE", "STAGES"):
        assert column in table


@pytest.mark.parametrize(
    ("stages", "model", "field"),
    [
        ([stage("a"), stage("a")], "laya:en", 'spec.stages: duplicate entries for key [name="a"]'),
        ([stage("a", dependsOn=["b"])], "laya:en", "spec.stages"),
        ([stage("a", dependsOn=["a"])], "laya:en", "spec.stages"),
        ([stage("a", soak="forever")], "laya:en", "spec.stages[0].soak"),
        ([stage("a", approval="Sometimes")], "laya:en", "spec.stages[0].approval"),
        (
            [stage("a", windows=[{"days": ["Mon"], "start": "9am", "end": "17:00"}])],
            "laya:en",
            "spec.stages[0].windows[0].start",
        ),
        ([stage("a")], "laya", "spec.template.spec.model"),
        ([], "laya:en", "spec.stages"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    cluster: Cluster, namespace: str, stages: list[dict[str, Any]], model: str, field: str
) -> None:
    out = cluster.kubectl(
        "apply", "--server-side", "-f", "-", input=pipeline(namespace, stages, model), check=False
    )
    assert out.returncode != 0
    assert field in out.stderr, out.stderr
    listed = cluster.kubectl("get", "dmp", "-n", namespace, "-o", "name").stdout
    assert listed.strip() == ""

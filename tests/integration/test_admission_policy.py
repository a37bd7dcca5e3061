"""The admission policies of deploy/admission against the real API server (issue 12, point 2).

Requests are made with the worker's (and the controller's) own ServiceAccount token, holding the
shipped namespaced Roles, as server-side dry runs: they pass authentication, RBAC and admission
exactly as real writes would, and leave nothing behind. What the renderers produce is admitted;
each thing outside the policy is refused with the policy's message; the same object from another
user is not the policies' business.
"""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.rollout_harness import grant_namespaces
from harness.shipped import kustomize
from test_render_dry_run import _objects

from decisionmodel.api.crd import CRD_NAME
from localenv.cluster import LocalCluster
from localenv.demo import CRD
from localenv.identities import CONTROLLER, WORKER
from localenv.paths import python_tool

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def namespace(local_cluster: LocalCluster) -> str:
    local_cluster.apply(kustomize("deploy/admission"))
    name = f"vap-{uuid.uuid4().hex[:8]}"
    grant_namespaces(local_cluster, [name])
    return name


def as_user(
    cluster: LocalCluster, account: str, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    kubeconfig = cluster.component_kubeconfig(account) if account else cluster.kubeconfig
    return subprocess.run(
        [python_tool("kubectl"), "--kubeconfig", str(kubeconfig), *args],
        input=input, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def create(cluster: LocalCluster, account: str, obj: Obj) -> subprocess.CompletedProcess[str]:
    return as_user(
        cluster, account, "create", "--dry-run=server", "-o", "json", "-f", "-",
        input=json.dumps(obj),
    )  # fmt: skip


def rendered(namespace: str) -> dict[str, Obj]:
    objs = {o["kind"]: copy.deepcopy(o) for o in _objects("vap", "cpu", ("ReadWriteOnce",))}
    for o in objs.values():
        o["metadata"]["namespace"] = namespace
    return objs


def _eventually_admitted(cluster: LocalCluster, account: str, obj: Obj) -> None:
    """A new policy is picked up by the API server within a second or so; the first admitted
    request of a known-good object proves it is loaded (the refusals below then mean it)."""
    from harness.helpers import assert_eventually

    def admitted() -> bool:
        result = create(cluster, account, obj)
        assert result.returncode == 0, result.stderr
        return True

    assert_eventually(admitted, 30)


@pytest.mark.parametrize("kind", ["Deployment", "Job", "Service", "PersistentVolumeClaim",
                                  "PodDisruptionBudget"])  # fmt: skip
def test_what_the_worker_renders_is_admitted(
    local_cluster: LocalCluster, namespace: str, kind: str
) -> None:
    obj = rendered(namespace)[kind]
    result = create(local_cluster, WORKER, obj)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["kind"] == kind


def _pod(obj: Obj) -> Obj:
    spec: Obj = obj["spec"]["template"]["spec"]
    return spec


def _container(obj: Obj) -> Obj:
    c: Obj = _pod(obj)["containers"][0]
    return c


def _privileged(o: Obj) -> None:
    # privileged with allowPrivilegeEscalation false is invalid before admission is asked.
    del _container(o)["securityContext"]["allowPrivilegeEscalation"]
    _container(o)["securityContext"]["privileged"] = True


def _escalation(o: Obj) -> None:
    _container(o)["securityContext"]["allowPrivilegeEscalation"] = True


def _root(o: Obj) -> None:
    _pod(o)["securityContext"]["runAsNonRoot"] = False


def _writable_root(o: Obj) -> None:
    del _container(o)["securityContext"]["readOnlyRootFilesystem"]


def _capability(o: Obj) -> None:
    _container(o)["securityContext"]["capabilities"] = {"drop": ["ALL"], "add": ["NET_ADMIN"]}


def _host_path(o: Obj) -> None:
    _pod(o)["volumes"].append({"name": "host", "hostPath": {"path": "/"}})


def _host_network(o: Obj) -> None:
    _pod(o)["hostNetwork"] = True


def _host_pid(o: Obj) -> None:
    _pod(o)["hostPID"] = True


def _service_account(o: Obj) -> None:
    _pod(o)["serviceAccountName"] = "dmrollout-worker"


def _unlabelled(o: Obj) -> None:
    del o["metadata"]["labels"]["app.kubernetes.io/managed-by"]


REFUSED: dict[str, tuple[Callable[[Obj], None], str]] = {
    "privileged": (_privileged, "no privileged container"),
    "privilege-escalation": (_escalation, "allowPrivilegeEscalation false"),
    "root": (_root, "runAsNonRoot"),
    "writable-root-fs": (_writable_root, "readOnlyRootFilesystem true"),
    "added-capability": (_capability, "drops ALL capabilities and adds none"),
    "host-path": (_host_path, "no hostPath volume"),
    "host-network": (_host_network, "no hostNetwork, hostPID or hostIPC"),
    "host-pid": (_host_pid, "no hostNetwork, hostPID or hostIPC"),
    "service-account": (_service_account, "default ServiceAccount"),
    "unlabelled": (_unlabelled, "app.kubernetes.io/managed-by=dmrollout"),
}


@pytest.mark.parametrize("kind", ["Deployment", "Job"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_pod_template_outside_the_policy_is_refused_to_the_worker(
    local_cluster: LocalCluster, namespace: str, case: str, kind: str
) -> None:
    good = rendered(namespace)[kind]
    _eventually_admitted(local_cluster, WORKER, good)
    change, message = REFUSED[case]
    bad = copy.deepcopy(good)
    change(bad)
    result = create(local_cluster, WORKER, bad)
    assert result.returncode != 0
    assert "denied request" in result.stderr and message in result.stderr, result.stderr
    # The same object from anyone else is not the policies' business (RBAC and Pod Security
    # decide there).
    assert create(local_cluster, "", bad).returncode == 0


def test_the_controller_is_held_to_the_same_policy(
    local_cluster: LocalCluster, namespace: str
) -> None:
    good = rendered(namespace)["Deployment"]
    _eventually_admitted(local_cluster, CONTROLLER, good)
    bad = copy.deepcopy(good)
    _privileged(bad)
    result = create(local_cluster, CONTROLLER, bad)
    assert result.returncode != 0 and "no privileged container" in result.stderr


@pytest.mark.parametrize("kind", ["Service", "PersistentVolumeClaim", "PodDisruptionBudget"])
def test_an_unlabelled_object_is_refused_to_the_worker(
    local_cluster: LocalCluster, namespace: str, kind: str
) -> None:
    bad = rendered(namespace)[kind]
    _eventually_admitted(local_cluster, WORKER, rendered(namespace)["Service"])
    _unlabelled(bad)
    result = create(local_cluster, WORKER, bad)
    assert result.returncode != 0
    assert "managed-by=dmrollout" in result.stderr, result.stderr


def test_the_worker_cannot_adopt_a_foreign_object_by_labelling_it(
    local_cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    foreign = rendered(namespace)["Service"]
    foreign["metadata"]["name"] = "foreign"
    del foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    del foreign["metadata"]["ownerReferences"]
    local_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(foreign))
    _eventually_admitted(local_cluster, WORKER, rendered(namespace)["Service"])
    label = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "dmrollout"}}}
    selector = {"spec": {"selector": {"decisionmodel.io/revision": "x"}}}
    for patch in (label, selector):
        result = as_user(
            local_cluster, WORKER, "-n", namespace, "patch", "service", "foreign",
            "--dry-run=server", "--type=merge", "-p", json.dumps(patch),
        )  # fmt: skip
        assert result.returncode != 0
        assert "changes only objects it created" in result.stderr or (
            "managed-by=dmrollout" in result.stderr
        ), result.stderr


@pytest.mark.parametrize("account", [WORKER, CONTROLLER])
def test_a_token_deletes_only_what_dmrollout_made_for_a_decision_model(
    local_cluster: LocalCluster, namespace: str, account: str
) -> None:
    """Issue 22: RBAC lets the components delete Deployments, Jobs and PVCs in the watched
    namespaces; the policy narrows that to objects labelled as dmrollout's and owned by a
    DecisionModel, so a stolen token deletes nothing else."""
    suffix = uuid.uuid4().hex[:6]
    # A DecisionModel that exists: an object owned by a missing one is garbage-collected.
    local_cluster.establish_crd(CRD, CRD_NAME)
    owner = f"owner-{suffix}"
    local_cluster.apply(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": owner, "namespace": namespace},
            "spec": {"model": "laya:en"},
        }
    )
    uid = local_cluster.kubectl_json("get", "dm", owner, "-n", namespace)["metadata"]["uid"]
    ours = rendered(namespace)["PersistentVolumeClaim"]
    ours["metadata"]["name"] = f"ours-{suffix}"
    for ref in ours["metadata"]["ownerReferences"]:
        ref.update({"name": owner, "uid": uid})
    unowned = copy.deepcopy(ours)
    unowned["metadata"]["name"] = f"unowned-{suffix}"
    del unowned["metadata"]["ownerReferences"]
    foreign = copy.deepcopy(unowned)
    foreign["metadata"]["name"] = f"foreign-{suffix}"
    del foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    del foreign["metadata"]["labels"]["decisionmodel.io/name"]
    # As the reference operator makes them (issue 22, a way in): no managed-by, labelled with
    # the name of the DecisionModel that controls it; taken over by dmrollout. Labelled with
    # another DecisionModel's name, it is not.
    theirs = copy.deepcopy(ours)
    theirs["metadata"]["name"] = f"theirs-{suffix}"
    del theirs["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    theirs["metadata"]["labels"]["decisionmodel.io/name"] = owner
    misnamed = copy.deepcopy(theirs)
    misnamed["metadata"]["name"] = f"misnamed-{suffix}"
    misnamed["metadata"]["labels"]["decisionmodel.io/name"] = "another"
    for obj in (ours, unowned, foreign, theirs, misnamed):
        local_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(obj))

    def delete(name: str) -> subprocess.CompletedProcess[str]:
        return as_user(
            local_cluster, account, "-n", namespace, "delete", "pvc", name, "--dry-run=server"
        )

    from harness.helpers import assert_eventually

    def refused_foreign() -> bool:  # the new policy is loaded once it refuses
        result = delete(foreign["metadata"]["name"])
        assert result.returncode != 0 and "deletes only objects labelled" in result.stderr, (
            result.stderr
        )
        return True

    assert_eventually(refused_foreign, 30)
    result = delete(unowned["metadata"]["name"])
    assert result.returncode != 0 and "owned by a DecisionModel" in result.stderr, result.stderr
    result = delete(ours["metadata"]["name"])
    assert result.returncode == 0, result.stderr
    result = delete(theirs["metadata"]["name"])
    assert result.returncode == 0, result.stderr
    result = delete(misnamed["metadata"]["name"])
    assert result.returncode != 0 and "owned by a DecisionModel" in result.stderr, result.stderr
    label = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "dmrollout"}}}
    for name, admitted in (
        (theirs["metadata"]["name"], True),
        (misnamed["metadata"]["name"], False),
    ):
        result = as_user(
            local_cluster, account, "-n", namespace, "patch", "pvc", name,
            "--dry-run=server", "--type=merge", "-p", json.dumps(label),
        )  # fmt: skip
        assert (result.returncode == 0) == admitted, (name, result.stderr)

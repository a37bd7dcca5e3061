"""The local environment itself: control plane, kwok, fake kubelet, network isolation."""

from __future__ import annotations

import errno
import json
import socket
import uuid

from harness.helpers import assert_eventually

from localenv.cluster import LocalCluster


def _ns(cluster: LocalCluster) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    return name


def test_nodes_cpu_and_gpu(local_cluster: LocalCluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in local_cluster.kubectl_json("get", "nodes")["items"]}
    assert set(nodes) == {"kwok-cpu-0", "kwok-gpu-0"}
    gpu = nodes["kwok-gpu-0"]
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in gpu["spec"][
        "taints"
    ]
    assert "nvidia.com/gpu" not in nodes["kwok-cpu-0"]["status"]["allocatable"]


def test_deployment_with_readiness_gate(local_cluster: LocalCluster) -> None:
    ns = _ns(local_cluster)
    gate = "example.com/gate"
    local_cluster.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "gated", "namespace": ns},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "gated"}},
                "template": {
                    "metadata": {"labels": {"app": "gated"}},
                    "spec": {
                        "readinessGates": [{"conditionType": gate}],
                        "containers": [{"name": "c", "image": "example/none:1"}],
                    },
                },
            },
        }
    )

    def pods() -> list[dict]:
        items: list[dict] = local_cluster.kubectl_json("get", "pods", "-n", ns)["items"]
        return items

    def running() -> list[dict]:
        ps = pods()
        assert len(ps) == 2 and all(p["status"].get("phase") == "Running" for p in ps), [
            p["status"].get("phase") for p in ps
        ]
        return ps

    ps = assert_eventually(running, 60, what="pods Running")
    for p in ps:
        ip = p["status"]["podIP"]
        assert ip.startswith("100.72.1."), ip  # the cpu node's podCIDR, never a host range
        ready = next(c for c in p["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False"  # the gate is not True yet
    # Set the gate on one Pod: only that one becomes Ready (fake kubelet), as with kubelet.
    first = ps[0]["metadata"]["name"]
    local_cluster.kubectl(
        "patch", "pod", first, "-n", ns, "--subresource=status", "--type=strategic",
        "-p", json.dumps({"status": {"conditions": [{"type": gate, "status": "True"}]}}),
    )  # fmt: skip

    def ready_names() -> set[str]:
        return {
            p["metadata"]["name"]
            for p in pods()
            if any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"]
            )
        }

    assert_eventually(lambda: ready_names() == {first}, 30, what="only the gated-True pod Ready")
    dep = assert_eventually(
        lambda: (
            (d := local_cluster.kubectl_json("get", "deployment", "gated", "-n", ns))["status"].get(
                "readyReplicas"
            )
            == 1
            and d
        ),
        30,
        what="deployment readyReplicas 1",
    )
    assert dep["status"]["replicas"] == 2


def test_job_runs_and_fails_by_exit_code(local_cluster: LocalCluster) -> None:
    ns = _ns(local_cluster)

    def job(name: str, exit_code: int) -> dict:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {"sim.dmrollout.dev/exit-code": str(exit_code)}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "example/none:1"}],
                    },
                },
            },
        }

    local_cluster.apply([job("ok", 0), job("bad", 2)])

    def condition(name: str) -> str | None:
        j = local_cluster.kubectl_json("get", "job", name, "-n", ns)
        for c in j.get("status", {}).get("conditions", []):
            if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                return str(c["type"])
        return None

    assert assert_eventually(lambda: condition("ok"), 60, what="job ok finished") == "Complete"
    assert assert_eventually(lambda: condition("bad"), 60, what="job bad finished") == "Failed"


def test_pvc_is_provisioned_and_expanded(local_cluster: LocalCluster) -> None:
    ns = _ns(local_cluster)
    local_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "store", "namespace": ns},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )

    def pvc() -> dict:
        p: dict = local_cluster.kubectl_json("get", "pvc", "store", "-n", ns)
        return p

    assert_eventually(lambda: pvc()["status"].get("phase") == "Bound", 60, what="PVC Bound")
    local_cluster.kubectl(
        "patch", "pvc", "store", "-n", ns, "--type=merge",
        "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}',
    )  # fmt: skip
    assert_eventually(
        lambda: pvc()["status"].get("capacity", {}).get("storage") == "2Gi", 30, what="expanded"
    )


def test_no_route_to_private_or_public_addresses() -> None:
    """Inside the test namespace nothing outside is reachable: no packet can leave."""
    for address in ("10.0.0.1", "172.16.0.1", "192.168.1.1", "8.8.8.8"):
        with socket.socket() as s:
            s.settimeout(2)
            rc = s.connect_ex((address, 80))
        assert rc in (errno.ENETUNREACH, errno.EHOSTUNREACH), (address, errno.errorcode.get(rc))

"""Two control planes in one network namespace (issue 25): a hub and a production cluster.

One ``MultiClusterEnv``: two real clusters with their own ports, PKI and fake nodes, one Temporal,
one set of simulators. The clusters sit in slots 1 and 2 and the shared parts on
``BESIDE_LOCAL_ENV``'s ports, so this file also runs on a ``make test`` worker whose session
environment (slot 0, the default ports) is already up.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness.helpers import assert_eventually

from localenv.cluster import LocalCluster, in_private_netns
from localenv.multicluster import BESIDE_LOCAL_ENV, MultiClusterEnv
from localenv.processes import wait_until

NAMES = ("hub", "prod")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiClusterEnv]:
    if not in_private_netns():
        pytest.fail("the two clusters run only inside the private network namespace")
    multi = MultiClusterEnv(
        tmp_path_factory.mktemp("multicluster"), NAMES, first_slot=1, ports=BESIDE_LOCAL_ENV
    )
    multi.start()
    timings = ", ".join(f"{part} {secs:.1f}s" for part, secs in multi.timings.items())
    print(f"\ntwo clusters, Temporal and the simulators up: {timings}", file=sys.stderr)
    yield multi
    multi.stop()


@pytest.fixture(scope="module")
def namespace(env: MultiClusterEnv) -> str:
    """One namespace name, created in both clusters: the same name must not make them meet."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    for cluster in env.clusters.values():
        cluster.kubectl("create", "namespace", name)
    return name


def _deployment(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "example/none:1"}]},
            },
        },
    }


def _running_pods(cluster: LocalCluster, namespace: str, count: int) -> list[dict[str, Any]]:
    def running() -> list[dict[str, Any]]:
        pods: list[dict[str, Any]] = cluster.kubectl_json("get", "pods", "-n", namespace)["items"]
        phases = [p["status"].get("phase") for p in pods]
        assert len(pods) == count and phases == ["Running"] * count, phases
        return pods

    return assert_eventually(running, 90, what=f"{count} pods Running in {cluster.slot.name}")


def _names(cluster: LocalCluster, kind: str, namespace: str) -> set[str]:
    items = cluster.kubectl_json("get", kind, "-n", namespace)["items"]
    return {str(i["metadata"]["name"]) for i in items}


def test_each_cluster_has_its_own_endpoint_and_nodes(env: MultiClusterEnv) -> None:
    hub, prod = (env.clusters[n] for n in NAMES)
    assert hub.api_port != prod.api_port
    assert not set(hub.ports.values()) & set(prod.ports.values())
    for cluster in (hub, prod):
        assert f"server: {cluster.server}" in cluster.kubeconfig.read_text()
        nodes = cluster.kubectl_json("get", "nodes")["items"]
        names = {n["metadata"]["name"] for n in nodes}
        assert names == {f"{cluster.slot.name}-kwok-cpu-0", f"{cluster.slot.name}-kwok-gpu-0"}
        for node in nodes:
            cidr = ipaddress.ip_network(node["spec"]["podCIDR"])
            assert cidr.subnet_of(cluster.slot.network), (node["metadata"]["name"], cidr)


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on: its socket inodes matched in /proc/net/tcp*."""
    fds = Path(f"/proc/{pid}/fd")
    inodes = {
        link[len("socket:[") : -1]
        for link in (os.readlink(fd) for fd in fds.iterdir() if fd.is_symlink())
        if link.startswith("socket:[")
    }
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            # fields: sl, local address (hex ip:port), remote, state (0A = LISTEN), ..., inode
            if fields[3] == "0A" and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_every_listener_is_one_of_the_slots_ports(env: MultiClusterEnv) -> None:
    """Nothing of a cluster binds a port outside its slot's: a fixed port left anywhere would
    show here (or make the second cluster's process fail to start)."""
    for name, cluster in env.clusters.items():
        by_process = {p.name: _listening_ports(p.pid) for p in cluster.processes if p.pid}
        assert set().union(*by_process.values()) == set(cluster.ports.values()), by_process
        kubelet = env.kubelets[name].pid
        assert kubelet is not None and not _listening_ports(kubelet), "the fake kubelet listens"


def test_objects_and_pod_ips_stay_in_their_cluster(env: MultiClusterEnv, namespace: str) -> None:
    for name, cluster in env.clusters.items():
        cluster.apply(_deployment(f"from-{name}", namespace))
    for name, cluster in env.clusters.items():
        pods = _running_pods(cluster, namespace, 2)
        assert _names(cluster, "deployments", namespace) == {f"from-{name}"}
        cidrs = {n.name: ipaddress.ip_network(n.pod_cidr) for n in cluster.nodes}
        for pod in pods:
            assert pod["metadata"]["labels"]["app"] == f"from-{name}"
            node, ip = pod["spec"]["nodeName"], ipaddress.ip_address(pod["status"]["podIP"])
            assert node in cidrs and ip in cidrs[node], (name, node, ip)
            _assert_runtime_serves(env, str(ip))


def _assert_runtime_serves(env: MultiClusterEnv, ip: str) -> None:
    """The one runtime simulator knows the Pod: it answers 503 POD_UNKNOWN for an address it
    finds in no cluster."""
    url = f"http://{ip}:{env.ports.runtime}/"

    def served() -> bool:
        try:
            response = httpx.get(url, trust_env=False, timeout=10)
        except httpx.TimeoutException as e:
            # Its first lookup builds an API client per cluster: slow on a loaded machine, and
            # the answer it reads is cached for the next request.
            raise AssertionError(f"{url}: {e!r}") from e
        assert response.status_code == 200, (url, response.status_code, response.text)
        return True

    # The runtime's Pod lookup reads a list the API server may not have caught up with yet.
    assert_eventually(served, 30, what=f"the runtime simulator serving {ip}")


def _api_port_open(cluster: LocalCluster) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", cluster.api_port)) == 0


def test_one_api_server_down_leaves_the_other(env: MultiClusterEnv, namespace: str) -> None:
    hub, prod = (env.clusters[n] for n in NAMES)
    hub.kubectl("create", "configmap", "before-stop", "-n", namespace)
    hub.stop_apiserver()
    try:
        wait_until(lambda: not _api_port_open(hub), 30, "the hub API server to stop")
        down = hub.kubectl("get", "nodes", "--request-timeout=5s", check=False, timeout=30)
        assert down.returncode != 0
        assert prod.api_get("/readyz") == "ok"
        # Writes too: prod's API server has its own etcd.
        prod.kubectl("create", "configmap", "while-hub-down", "-n", namespace)
        assert "while-hub-down" in _names(prod, "configmaps", namespace)
    finally:
        hub.start_apiserver()
    assert hub.api_get("/readyz") == "ok"
    # Back on the same etcd: the hub's object is there, prod's never was.
    hub_configmaps = _names(hub, "configmaps", namespace)
    assert "before-stop" in hub_configmaps and "while-hub-down" not in hub_configmaps

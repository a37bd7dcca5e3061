from __future__ import annotations

import asyncio
import base64
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from simulators.kube_pods import KubePodDirectory
from simulators.volumes import volume_dir


class FakeCoreV1:
    """Just the CoreV1Api calls KubePodDirectory makes, answering from kubernetes models."""

    def __init__(self) -> None:
        self.pods: list[k8s.V1Pod] = []
        self.nodes: dict[str, k8s.V1Node] = {}
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        self.config_maps: dict[tuple[str, str], dict[str, str]] = {}
        self.calls = 0

    def list_pod_for_all_namespaces(self, field_selector: str) -> k8s.V1PodList:
        self.calls += 1
        ip = field_selector.removeprefix("status.podIP=")
        pods: list[Any] = self.pods
        return k8s.V1PodList(items=[p for p in pods if p.status.pod_ip == ip])

    def read_node(self, name: str) -> k8s.V1Node:
        return self.nodes[name]

    def read_namespaced_secret(self, name: str, namespace: str) -> k8s.V1Secret:
        if (namespace, name) not in self.secrets:
            raise ApiException(status=404)
        data = {
            k: base64.b64encode(v.encode()).decode()
            for k, v in self.secrets[(namespace, name)].items()
        }
        return k8s.V1Secret(data=data)

    def read_namespaced_config_map(self, name: str, namespace: str) -> k8s.V1ConfigMap:
        return k8s.V1ConfigMap(data=self.config_maps[(namespace, name)])


def node(name: str, gpus: str | None) -> k8s.V1Node:
    allocatable = {"cpu": "4"} | ({"nvidia.com/gpu": gpus} if gpus is not None else {})
    return k8s.V1Node(
        metadata=k8s.V1ObjectMeta(name=name), status=k8s.V1NodeStatus(allocatable=allocatable)
    )


def pod(
    name: str,
    ip: str,
    *,
    phase: str = "Running",
    created: int = 0,
    deleting: bool = False,
    read_only: bool = True,
    annotations: dict[str, str] | None = None,
) -> k8s.V1Pod:
    env = [
        k8s.V1EnvVar(name="OLLAYA_MODELS", value="/models"),
        k8s.V1EnvVar(name="OLLAYA_DEVICE", value="cuda"),
        k8s.V1EnvVar(
            name="OLLAYA_API_KEY",
            value_from=k8s.V1EnvVarSource(
                secret_key_ref=k8s.V1SecretKeySelector(name="api-key", key="token")
            ),
        ),
        k8s.V1EnvVar(
            name="OLLAYA_KEEP_ALIVE",
            value_from=k8s.V1EnvVarSource(
                config_map_key_ref=k8s.V1ConfigMapKeySelector(name="settings", key="keep")
            ),
        ),
        k8s.V1EnvVar(
            name="MISSING",
            value_from=k8s.V1EnvVarSource(
                secret_key_ref=k8s.V1SecretKeySelector(name="gone", key="x")
            ),
        ),
    ]
    containers = [
        k8s.V1Container(name="sidecar", image="busybox"),
        k8s.V1Container(
            name="ollaya",
            image="ghcr.io/ollaya-dev/ollaya:0.10.0",
            env=env,
            env_from=[
                k8s.V1EnvFromSource(
                    prefix="CM_", config_map_ref=k8s.V1ConfigMapEnvSource(name="settings")
                )
            ],
            volume_mounts=[
                k8s.V1VolumeMount(name="store", mount_path="/models", read_only=read_only),
                k8s.V1VolumeMount(name="tmp", mount_path="/tmp"),
            ],
        ),
    ]
    volumes = [
        k8s.V1Volume(
            name="store",
            persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
                claim_name="dm-store-abc"
            ),
        ),
        k8s.V1Volume(name="tmp", empty_dir=k8s.V1EmptyDirVolumeSource()),
    ]
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(
            name=name,
            namespace="team-a",
            uid=f"uid-{name}",
            annotations=annotations,
            creation_timestamp=datetime(2030, 1, 1, 0, 0, created, tzinfo=UTC),
            deletion_timestamp=datetime(2030, 1, 2, tzinfo=UTC) if deleting else None,
        ),
        spec=k8s.V1PodSpec(node_name="gpu-node", containers=containers, volumes=volumes),
        status=k8s.V1PodStatus(phase=phase, pod_ip=ip),
    )


def fake_api() -> FakeCoreV1:
    api = FakeCoreV1()
    api.nodes = {"gpu-node": node("gpu-node", "1"), "cpu-node": node("cpu-node", None)}
    api.secrets[("team-a", "api-key")] = {"token": "s3cret"}
    api.config_maps[("team-a", "settings")] = {"keep": "-1"}
    return api


async def test_pod_is_mapped_with_env_gpu_and_store(tmp_path: Path) -> None:
    api = fake_api()
    api.pods = [pod("dm-abc-1", "10.244.0.5", annotations={"sim.dmrollout.dev/device": "cpu"})]
    directory = KubePodDirectory(tmp_path, api=api)
    found = await directory.lookup("10.244.0.5")
    assert found is not None
    assert (found.uid, found.namespace, found.name, found.ip) == (
        "uid-dm-abc-1",
        "team-a",
        "dm-abc-1",
        "10.244.0.5",
    )
    assert found.env == {
        "CM_keep": "-1",
        "OLLAYA_MODELS": "/models",
        "OLLAYA_DEVICE": "cuda",
        "OLLAYA_API_KEY": "s3cret",
        "OLLAYA_KEEP_ALIVE": "-1",
    }
    assert found.node_has_gpu is True
    assert found.store_dir == volume_dir(tmp_path, "team-a", "dm-store-abc")
    assert found.store_read_only is True
    assert found.annotations == {"sim.dmrollout.dev/device": "cpu"}
    assert await directory.lookup("10.244.0.6") is None


async def test_node_without_gpu_and_rw_mount(tmp_path: Path) -> None:
    api = fake_api()
    prefetch: Any = pod("prefetch", "10.244.0.7", read_only=False)
    prefetch.spec.node_name = "cpu-node"
    prefetch.spec.containers[1].env[0].value = "/models/sub"
    api.pods = [prefetch]
    found = await KubePodDirectory(tmp_path, api=api).lookup("10.244.0.7")
    assert found is not None
    assert found.node_has_gpu is False
    assert found.store_read_only is False
    assert found.store_dir == volume_dir(tmp_path, "team-a", "dm-store-abc") / "sub"


async def test_prefers_live_newest_pod_and_caches(tmp_path: Path) -> None:
    api = fake_api()
    api.pods = [
        pod("old", "10.244.0.9", created=1, deleting=True),
        pod("done", "10.244.0.9", created=9, phase="Succeeded"),
        pod("new", "10.244.0.9", created=2),
    ]
    now = [0.0]
    directory = KubePodDirectory(tmp_path, api=api, monotonic=lambda: now[0])
    found = await directory.lookup("10.244.0.9")
    assert found is not None and found.name == "new"
    # Within the TTL the cached answer is reused; after it, changes are seen.
    newest: Any = api.pods[2]
    newest.metadata.annotations = {"sim.dmrollout.dev/lose-model": "true"}
    assert (await directory.lookup("10.244.0.9")) == found
    assert api.calls == 1
    now[0] = 1.5
    # Past the TTL: answered from the cache while it is re-read in the background.
    assert (await directory.lookup("10.244.0.9")) == found
    await directory.settled()
    assert api.calls == 2
    refreshed = await directory.lookup("10.244.0.9")
    assert refreshed is not None
    assert refreshed.annotations == {"sim.dmrollout.dev/lose-model": "true"}
    assert api.calls == 2
    # Past two TTLs (the IP may belong to a new Pod by now): re-read before answering.
    newest.metadata.annotations = {}
    now[0] = 5.0
    again = await directory.lookup("10.244.0.9")
    assert again is not None and again.annotations == {}
    assert api.calls == 3


async def test_a_known_pod_is_answered_while_it_is_re_read(tmp_path: Path) -> None:
    """The re-read each second never holds a request: a slow API server must not add latency
    to every decision (it did: about a tenth of the evaluation benchmark's throughput)."""
    api = fake_api()
    api.pods = [pod("p", "10.244.2.1")]
    now = [0.0]
    directory = KubePodDirectory(tmp_path, api=api, monotonic=lambda: now[0])
    first = await directory.lookup("10.244.2.1")
    release = threading.Event()
    listing = api.list_pod_for_all_namespaces

    def slow(field_selector: str) -> Any:
        release.wait(30)
        return listing(field_selector)

    api.list_pod_for_all_namespaces = slow  # type: ignore[method-assign]
    now[0] = 1.2
    answered = asyncio.create_task(directory.lookup("10.244.2.1"))
    for _ in range(100):
        await asyncio.sleep(0)
    try:
        assert answered.done(), "the lookup waited for the API round"
        assert answered.result() == first
    finally:
        release.set()
        await directory.settled()


async def test_api_errors_keep_the_last_answer(tmp_path: Path) -> None:
    api = fake_api()
    api.pods = [pod("p", "10.244.1.1")]
    now = [0.0]
    directory = KubePodDirectory(tmp_path, api=api, monotonic=lambda: now[0])
    first = await directory.lookup("10.244.1.1")

    def broken(field_selector: str) -> Any:
        raise ApiException(status=500)

    api.list_pod_for_all_namespaces = broken  # type: ignore[method-assign]
    now[0] = 5.0
    assert await directory.lookup("10.244.1.1") == first
    assert await directory.lookup("10.244.1.2") is None


async def test_a_pod_event_drops_an_ip_whose_pod_is_gone_or_replaced(tmp_path: Path) -> None:
    """kwok hands a freed IP to the next Pod at once: the Pod events make the directory answer
    as the Pod that holds the IP now, not the cached deleted one (simulators.pod_watch)."""
    api = fake_api()
    old = pod("old", "10.244.0.11")
    api.pods = [old]
    now = [0.0]
    directory = KubePodDirectory(tmp_path, api=api, monotonic=lambda: now[0])
    assert (found := await directory.lookup("10.244.0.11")) is not None and found.name == "old"
    directory.forget("MODIFIED", old)  # the same Pod changed: the cache stands
    directory.forget("DELETED", pod("other", "10.244.0.11"))  # not the cached Pod
    assert api.calls == 1 and (await directory.lookup("10.244.0.11")) == found
    new = pod("new", "10.244.0.11", created=5)
    api.pods = [new]
    directory.forget("ADDED", new)  # another Pod holds the IP now, before the TTL
    assert (found := await directory.lookup("10.244.0.11")) is not None and found.name == "new"
    api.pods = []
    directory.forget("DELETED", new)
    assert await directory.lookup("10.244.0.11") is None
    assert api.calls == 3


async def test_an_api_round_begun_before_a_pod_event_is_not_cached(tmp_path: Path) -> None:
    api = fake_api()
    old = pod("old", "10.244.0.12")
    api.pods = [old]
    directory = KubePodDirectory(tmp_path, api=api)
    started, release = threading.Event(), threading.Event()
    read = directory.lookup_sync

    def slow_read(ip: str) -> Any:
        found = read(ip)
        started.set()
        release.wait(5)
        return found

    directory.lookup_sync = slow_read  # type: ignore[method-assign]
    pending = asyncio.create_task(directory.lookup("10.244.0.12"))
    await asyncio.to_thread(started.wait, 5)
    api.pods = [pod("new", "10.244.0.12", created=5)]
    directory.forget("DELETED", old)  # while the round that read "old" is in flight
    release.set()
    assert (found := await pending) is not None and found.name == "old"  # what it read
    directory.lookup_sync = read  # type: ignore[method-assign]
    assert (found := await directory.lookup("10.244.0.12")) is not None and found.name == "new"

"""`KubePodDirectory`: the simulated Pods as the (local) Kubernetes API describes them.

For a Pod IP it lists Pods with `status.podIP=<ip>`, reads the `ollaya` container's env
(resolving `secretKeyRef`/`configMapKeyRef` values and `envFrom`), whether the Node advertises
allocatable `nvidia.com/gpu`, and which volume is mounted at OLLAYA_MODELS: a PVC maps to
`<state-dir>/volumes/<namespace>/<claimName>/` (simulators.volumes), an emptyDir to
`<state-dir>/emptydir/<pod-uid>/<volume>/`. Answers are cached about a second, so annotations
toggled by a test take effect within that time and one API round: a Pod seen within two
seconds is re-read in the background while its requests are answered from the cache. With
``follow=True`` (the simulator processes) the Pod events of the API server (simulators.pod_watch)
drop a cached IP at once when its Pod is deleted or the IP is handed to another Pod: a real
runtime at an IP is the process of the Pod holding it now. The blocking `kubernetes` client runs
in a thread.

Fault annotations (`sim.dmrollout.dev/*`) may also sit on the Pod's Namespace: they apply to
every Pod in it (a Pod's own annotation wins). A test sets them before a rollout starts, so a
fault is in place from a Pod's first request — annotating a Pod races its warmup.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from simulators.pod_watch import start_following
from simulators.pods import SimPod
from simulators.volumes import volume_dir

log = logging.getLogger(__name__)

CONTAINER_NAME = "ollaya"
GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_TTL_SECONDS = 1.0


def _make_api(kubeconfig: str | None) -> Any:
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config

    # The client's config loaders are untyped; Any keeps mypy --strict quiet about them only.
    client: Any = kube_client
    config: Any = kube_config
    if kubeconfig:
        return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.CoreV1Api()


class KubePodDirectory:
    def __init__(
        self,
        state_dir: Path,
        *,
        kubeconfig: str | None = None,
        api: Any = None,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        follow: bool = False,
    ) -> None:
        """`api` is a CoreV1Api (or a stand-in with the same methods); made from `kubeconfig`
        on first use when not given. `follow`: watch Pod events from the first lookup on."""
        self.state_dir = Path(state_dir)
        self._kubeconfig = kubeconfig
        self._api = api
        self._ttl = ttl_seconds
        self._monotonic = monotonic
        self._cache: dict[str, tuple[float, SimPod | None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._refreshing: dict[str, asyncio.Task[SimPod | None]] = {}
        self._follow = follow
        self._following: threading.Event | None = None
        # Bumped when an event drops an IP: an API round begun before it does not cache.
        self._epoch: dict[str, int] = {}

    async def lookup(self, ip: str) -> SimPod | None:
        if self._follow and self._following is None:
            self._start_following()
        cached = self._cache.get(ip)
        age = self._monotonic() - cached[0] if cached is not None else math.inf
        if cached is not None and cached[1] is not None and age < 2 * self._ttl:
            if age >= self._ttl:
                self._refresh_in_background(ip)
            # A Pod seen within two TTLs is answered from the cache while it is re-read: a real
            # runtime never stops for an API round, and holding every request to the Pod for
            # one each second cost the evaluation benchmark a tenth of its throughput. Older
            # entries (an IP maybe reused by a new Pod) are re-read first, as before.
            return cached[1]
        return await self._fetch(ip)

    def _start_following(self) -> None:
        loop = asyncio.get_running_loop()

        def on_event(kind: str, pod: Any) -> None:  # the watch thread: hand over to the loop
            loop.call_soon_threadsafe(self.forget, kind, pod)  # RuntimeError once it closed

        self._following = start_following(self._core, on_event)

    def stop_following(self) -> None:
        if self._following is not None:
            self._following.set()

    def forget(self, kind: str, pod: Any) -> None:
        """A Pod event: drop the cached answer for its IP when that answer is now wrong (the
        Pod is deleted, or another Pod holds the IP)."""
        ip = pod.status.pod_ip if pod.status is not None else None
        if not ip:
            return
        cached = self._cache.get(ip)
        known = cached[1].uid if cached is not None and cached[1] is not None else None
        # Nothing cached yet: an API round in flight may have read the IP before the event.
        if cached is None or (kind == "DELETED") == (known == str(pod.metadata.uid)):
            self._cache.pop(ip, None)
            self._epoch[ip] = self._epoch.get(ip, 0) + 1

    def _refresh_in_background(self, ip: str) -> None:
        if ip in self._refreshing:
            return
        task = asyncio.get_running_loop().create_task(self._fetch(ip))
        self._refreshing[ip] = task
        task.add_done_callback(lambda _: self._refreshing.pop(ip, None))

    async def settled(self) -> None:
        """Wait for the background re-reads started so far (tests)."""
        await asyncio.gather(*self._refreshing.values(), return_exceptions=True)

    async def _fetch(self, ip: str) -> SimPod | None:
        # One API round per IP at a time: a burst of requests to one Pod shares the answer.
        async with self._locks.setdefault(ip, asyncio.Lock()):
            cached = self._cache.get(ip)
            if cached is not None and self._monotonic() - cached[0] < self._ttl:
                return cached[1]
            epoch = self._epoch.get(ip, 0)
            try:
                pod = await asyncio.to_thread(self.lookup_sync, ip)
            except Exception:
                log.exception("looking up the Pod with IP %s", ip)
                # A flaky API server should not make a known Pod vanish for a second.
                return cached[1] if cached is not None else None
            if self._epoch.get(ip, 0) == epoch:
                self._cache[ip] = (self._monotonic(), pod)
            return pod

    def _core(self) -> Any:
        if self._api is None:
            self._api = _make_api(self._kubeconfig)
        return self._api

    def lookup_sync(self, ip: str) -> SimPod | None:
        api = self._core()
        pods = api.list_pod_for_all_namespaces(field_selector=f"status.podIP={ip}").items
        live = [p for p in pods if (p.status.phase or "") not in {"Succeeded", "Failed"}]
        if not live:
            return None
        # During a rollout an old Pod may still hold the IP while terminating; prefer the one
        # that is not being deleted, then the newest.
        live.sort(
            key=lambda p: (
                p.metadata.deletion_timestamp is None,
                p.metadata.creation_timestamp.timestamp() if p.metadata.creation_timestamp else 0,
            ),
            reverse=True,
        )
        return self._sim_pod(api, live[0], ip)

    @staticmethod
    def _namespace_faults(api: Any, namespace: str) -> dict[str, str]:
        try:
            ns = api.read_namespace(namespace)
        except Exception:  # the Pod's namespace is going away: no namespace faults
            return {}
        annotations = ns.metadata.annotations or {}
        return {k: v for k, v in annotations.items() if k.startswith("sim.dmrollout.dev/")}

    def _sim_pod(self, api: Any, pod: Any, ip: str) -> SimPod:
        meta, spec = pod.metadata, pod.spec
        containers = spec.containers or []
        container = next((c for c in containers if c.name == CONTAINER_NAME), None)
        if container is None and containers:
            container = containers[0]
        env = self._env(api, meta.namespace, container) if container is not None else {}
        store_dir, read_only = self._store(meta, spec, container, env)
        return SimPod(
            uid=str(meta.uid),
            namespace=meta.namespace,
            name=meta.name,
            ip=ip,
            annotations={**self._namespace_faults(api, meta.namespace), **(meta.annotations or {})},
            env=env,
            node_has_gpu=self._node_has_gpu(api, spec.node_name),
            store_dir=store_dir,
            store_read_only=read_only,
        )

    @staticmethod
    def _node_has_gpu(api: Any, node_name: str | None) -> bool:
        if not node_name:
            return False
        node = api.read_node(node_name)
        allocatable = (node.status.allocatable if node.status else None) or {}
        value = str(allocatable.get(GPU_RESOURCE, "0")).strip()
        return value not in {"", "0"}

    def _env(self, api: Any, namespace: str, container: Any) -> dict[str, str]:
        secrets: dict[str, dict[str, str]] = {}
        config_maps: dict[str, dict[str, str]] = {}

        def secret(name: str) -> dict[str, str]:
            if name not in secrets:
                data = api.read_namespaced_secret(name, namespace).data or {}
                secrets[name] = {k: base64.b64decode(v).decode() for k, v in data.items()}
            return secrets[name]

        def config_map(name: str) -> dict[str, str]:
            if name not in config_maps:
                config_maps[name] = dict(api.read_namespaced_config_map(name, namespace).data or {})
            return config_maps[name]

        env: dict[str, str] = {}
        for source in container.env_from or []:
            if source.secret_ref is not None:
                values = self._optional(secret, source.secret_ref.name)
            elif source.config_map_ref is not None:
                values = self._optional(config_map, source.config_map_ref.name)
            else:
                continue
            env.update({(source.prefix or "") + k: v for k, v in values.items()})
        for var in container.env or []:
            if var.value is not None:
                env[var.name] = var.value
                continue
            ref = var.value_from
            if ref is not None and ref.secret_key_ref is not None:
                values = self._optional(secret, ref.secret_key_ref.name)
                key = ref.secret_key_ref.key
            elif ref is not None and ref.config_map_key_ref is not None:
                values = self._optional(config_map, ref.config_map_key_ref.name)
                key = ref.config_map_key_ref.key
            else:
                continue
            if key in values:
                env[var.name] = values[key]
        return env

    @staticmethod
    def _optional(read: Callable[[str], dict[str, str]], name: str) -> dict[str, str]:
        # A missing Secret would keep a real container from starting; here the variable is
        # simply absent, which is what the runtime would see once the Secret exists.
        try:
            return read(name)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return {}
            raise

    def _store(
        self, meta: Any, spec: Any, container: Any, env: dict[str, str]
    ) -> tuple[Path | None, bool]:
        models = env.get("OLLAYA_MODELS")
        if not models or container is None:
            return None, False
        target = PurePosixPath(models)
        best: Any = None
        for mount in container.volume_mounts or []:
            mount_path = PurePosixPath(mount.mount_path)
            if (target == mount_path or mount_path in target.parents) and (
                best is None or len(mount_path.parts) > len(PurePosixPath(best.mount_path).parts)
            ):
                best = mount
        if best is None:
            return None, False
        volume = next((v for v in spec.volumes or [] if v.name == best.name), None)
        if volume is None:
            return None, False
        read_only = bool(best.read_only)
        if volume.persistent_volume_claim is not None:
            claim = volume.persistent_volume_claim
            base = volume_dir(self.state_dir, meta.namespace, claim.claim_name)
            read_only = read_only or bool(claim.read_only)
        elif volume.empty_dir is not None:
            base = self.state_dir / "emptydir" / str(meta.uid) / volume.name
        else:
            return None, False
        if best.sub_path:
            base = base / best.sub_path
        relative = target.relative_to(PurePosixPath(best.mount_path))
        return base.joinpath(*relative.parts), read_only

"""The fake kubelet: what kwok cannot do in the local cluster.

- **Readiness gates.** For Pods with ``spec.readinessGates`` it computes ``Ready`` =
  ContainersReady and every gate condition True, as the real kubelet's status manager does
  (kwok's stages set Ready only for Pods without gates: ``localenv.kwok_stages``).
- **Job Pods.** kwok leaves Pods of Jobs alone; this runs them. A Pod with a container named
  ``prefetch`` (dmrollout's prefetch Job) behaves as that container's script does with the real
  ``ollaya pull``: it reads ``$MODEL`` as the runtime does (``simulators.model_names``: the
  name's own host and scheme, https when it has none; for a host-less name ``$OLLAYA_REGISTRY``,
  else ollaya.dev — unreachable here, so a transient failure), pulls it into the PVC mounted at
  ``$OLLAYA_MODELS`` where the runtime keeps it, then compares the sha256 of
  ``$STORE_MANIFEST`` (ManifestMissing when that is not where the pull wrote) with
  ``$EXPECTED_DIGEST``. Exit codes are the Job's contract: 0 ok, 1 PullFailed (registry error:
  the Job controller retries under backoffLimit), 3 ModelNotFound, 4 DigestMismatch (digest
  pinned by the user), 5 the tag moved (digest resolved from the tag by dmrollout). The reason
  line goes into the container's termination message, as ``/dev/termination-log`` would. Any
  other Job Pod exits with the code in annotation ``sim.dmrollout.dev/exit-code`` (default 0).
- **Volumes.** A provisioner for the storage classes of ``localenv.cluster`` (a directory per
  PVC, see ``simulators.volumes``), deletion of released volumes, and in-place expansion when the
  class allows it (what an external resizer does).

Run as ``python -m localenv.kubelet --kubeconfig K --state-dir S``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from localenv.cluster import PROVISIONER
from localenv.kwok_stages import JOB_POD_LABEL
from simulators.model_names import InvalidModelName, ModelRef, parse_model_name
from simulators.volumes import host_dir_name, volume_dir

log = logging.getLogger("localenv.kubelet")

SIM_PREFIX = "sim.dmrollout.dev/"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
PREFETCH_CONTAINER = "prefetch"
MANIFEST_CAP = 4 * 1024 * 1024
# How long a Job Pod's status is retried while the API server is away (chaos: 60 s outages).
STATUS_RETRY_SECONDS = 600.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class JobOutcome:
    def __init__(self, exit_code: int, message: str) -> None:
        self.exit_code = exit_code
        self.message = message


class FakeKubelet:
    def __init__(self, api_client: client.ApiClient, state_dir: Path) -> None:
        self.core = client.CoreV1Api(api_client)
        self.storage = client.StorageV1Api(api_client)
        self.state_dir = state_dir
        self.stop_event = threading.Event()
        self._started_job_pods: set[str] = set()
        self._lock = threading.Lock()
        self._runner = ThreadPoolExecutor(max_workers=4, thread_name_prefix="job-pod")

    # -- loops -----------------------------------------------------------------------------
    def run(self) -> None:
        loops: list[tuple[str, Callable[..., Any], Callable[[dict[str, Any]], None]]] = [
            ("pods", self.core.list_pod_for_all_namespaces, self.on_pod),
            ("pvcs", self.core.list_persistent_volume_claim_for_all_namespaces, self.on_pvc),
            ("pvs", self.core.list_persistent_volume, self.on_pv),
        ]
        threads = [
            threading.Thread(target=self._watch_loop, args=loop, name=loop[0], daemon=True)
            for loop in loops
        ]
        for t in threads:
            t.start()
        self.stop_event.wait()
        self._runner.shutdown(wait=False, cancel_futures=True)

    def _watch_loop(
        self, what: str, lister: Callable[..., Any], handle: Callable[[dict[str, Any]], None]
    ) -> None:
        while not self.stop_event.is_set():
            try:
                listed = lister(_preload_content=False)
                body = json.loads(listed.data)
                for item in body["items"]:
                    self._safe(handle, item)
                rv = body["metadata"]["resourceVersion"]
                w = watch.Watch()
                # A bounded watch, then a relist: cheap level-triggered resync every 20 s.
                for event in w.stream(
                    lister, resource_version=rv, timeout_seconds=20, _preload_content=False
                ):
                    if self.stop_event.is_set():
                        break
                    obj = event["raw_object"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._safe(handle, obj)
            except Exception as e:  # API restarts, 410 Gone: relist
                if not self.stop_event.is_set():
                    log.warning("%s watch restarting: %s", what, e)
                    time.sleep(0.5)

    @staticmethod
    def _safe(handle: Callable[[dict[str, Any]], None], obj: dict[str, Any]) -> None:
        try:
            handle(obj)
        except ApiException as e:
            if e.status not in (404, 409):
                log.warning("handling %s: %s", obj.get("metadata", {}).get("name"), e)
        except Exception:
            log.exception("handling %s", obj.get("metadata", {}).get("name"))

    # -- pods ------------------------------------------------------------------------------
    def on_pod(self, pod: dict[str, Any]) -> None:
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
        if meta.get("deletionTimestamp") or not spec.get("nodeName"):
            return
        if JOB_POD_LABEL in meta.get("labels", {}):
            if status.get("phase", "Pending") == "Pending":
                with self._lock:
                    if meta["uid"] in self._started_job_pods:
                        return
                    self._started_job_pods.add(meta["uid"])
                self._runner.submit(self._run_job_pod, pod)
            return
        if spec.get("readinessGates") and status.get("phase") == "Running":
            self._sync_ready(pod)

    def _sync_ready(self, pod: dict[str, Any]) -> None:
        conditions = {c["type"]: c for c in pod["status"].get("conditions", [])}
        gates = [g["conditionType"] for g in pod["spec"]["readinessGates"]]
        containers_ready = conditions.get("ContainersReady", {}).get("status") == "True"
        pending = [g for g in gates if conditions.get(g, {}).get("status") != "True"]
        want = "True" if containers_ready and not pending else "False"
        current = conditions.get("Ready", {})
        if current.get("status") == want:
            return
        ready: dict[str, Any] = {"type": "Ready", "status": want, "lastTransitionTime": _now()}
        if want == "False":
            ready["reason"] = "ReadinessGatesNotReady"
            ready["message"] = f"corresponding condition of pod readiness gate {pending!r} not True"
        # Strategic merge on conditions by type: only Ready changes, gates set by others stay.
        self.core.patch_namespaced_pod_status(
            pod["metadata"]["name"],
            pod["metadata"]["namespace"],
            {"status": {"conditions": [ready]}},
        )

    def _patch_job_pod_status(self, name: str, ns: str, body: dict[str, Any]) -> None:
        """Patch a Job Pod's status, retrying while the API server cannot take it, as the real
        kubelet's status manager keeps a status until it is written. Without it, a Job Pod
        that finished during an API server outage stayed Running for good (the chaos matrix,
        apiserver_stop at prefetch), and so did its Job and the rollout waiting for it."""
        delay = 0.5
        deadline = time.monotonic() + STATUS_RETRY_SECONDS
        while True:
            try:
                self.core.patch_namespaced_pod_status(name, ns, body)
                return
            except (ApiException, urllib3.exceptions.HTTPError) as e:
                status = e.status if isinstance(e, ApiException) else None
                retryable = status is None or status >= 500 or status == 429
                if not retryable or time.monotonic() > deadline or self.stop_event.is_set():
                    raise
                log.warning("job pod %s/%s: status not written yet (%s); retrying", ns, name, e)
            self.stop_event.wait(delay)
            delay = min(delay * 2, 5.0)

    def _run_job_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        name, ns = meta["name"], meta["namespace"]
        try:
            started = _now()
            containers = pod["spec"]["containers"]
            self._patch_job_pod_status(
                name,
                ns,
                {
                    "status": {
                        "phase": "Running",
                        "startTime": started,
                        "conditions": [
                            {
                                "type": "PodScheduled",
                                "status": "True",
                                "lastTransitionTime": started,
                            },
                            {
                                "type": "Initialized",
                                "status": "True",
                                "lastTransitionTime": started,
                            },
                        ],
                        "containerStatuses": [
                            {
                                "name": c["name"],
                                "image": c["image"],
                                "imageID": "",
                                "ready": True,
                                "started": True,
                                "restartCount": 0,
                                "state": {"running": {"startedAt": started}},
                            }
                            for c in containers
                        ],
                    }
                },
            )
            if any(c["name"] == PREFETCH_CONTAINER for c in containers):
                outcome = self.run_prefetch(pod)
            else:
                annotations = meta.get("annotations", {})
                time.sleep(float(annotations.get(SIM_PREFIX + "run-seconds", "0")))
                outcome = JobOutcome(int(annotations.get(SIM_PREFIX + "exit-code", "0")), "")
            finished = _now()
            terminated = {
                "exitCode": outcome.exit_code,
                "reason": "Completed" if outcome.exit_code == 0 else "Error",
                "message": outcome.message,
                "startedAt": started,
                "finishedAt": finished,
            }
            self._patch_job_pod_status(
                name,
                ns,
                {
                    "status": {
                        "phase": "Succeeded" if outcome.exit_code == 0 else "Failed",
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "False",
                                "reason": "PodCompleted",
                                "lastTransitionTime": finished,
                            },
                            {
                                "type": "ContainersReady",
                                "status": "False",
                                "reason": "PodCompleted",
                                "lastTransitionTime": finished,
                            },
                        ],
                        "containerStatuses": [
                            {
                                "name": c["name"],
                                "image": c["image"],
                                "imageID": "",
                                "ready": False,
                                "started": False,
                                "restartCount": 0,
                                "state": {"terminated": terminated},
                            }
                            for c in containers
                        ],
                    }
                },
            )
            log.info("job pod %s/%s exited %d %s", ns, name, outcome.exit_code, outcome.message)
        except ApiException as e:
            if e.status != 404:
                log.warning("job pod %s/%s: %s", ns, name, e)
        except Exception:
            log.exception("job pod %s/%s", ns, name)

    def run_prefetch(self, pod: dict[str, Any]) -> JobOutcome:
        """What the prefetch container's script does, against the registry simulator.

        Messages are the script's termination-log lines
        (``decisionmodel.engine.render.prefetch_job``):
        every failure of ``ollaya pull`` other than "not found in registry" is ``PullFailed``
        with ollaya's last output line, exit 1, so the Job controller retries it.
        """
        container = next(c for c in pod["spec"]["containers"] if c["name"] == PREFETCH_CONTAINER)
        env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        model = env.get("MODEL", "")
        expected = env.get("EXPECTED_DIGEST", "")
        store_manifest = env.get("STORE_MANIFEST", "")
        # `ollaya pull` reads the name as the runtime does (simulators.model_names, the
        # contract's grammar), not as dmrollout does: a disagreement must show up here.
        try:
            ref = parse_model_name(model, env.get("OLLAYA_REGISTRY"))
        except InvalidModelName as e:
            return _pull_failed(str(e))
        # ...and writes where the runtime keeps the model, under $OLLAYA_MODELS.
        pulled = f"{env.get('OLLAYA_MODELS', '').rstrip('/')}/{_runtime_manifest_path(ref)}"
        store_dir, relative = self._store_for(pod, container, pulled)
        if store_dir is None:
            # Nothing mounted there: the container's root filesystem is read-only.
            return _pull_failed(f"write {pulled}: read-only file system")
        # ``ollaya pull``: manifest, then every blob, each verified, then written to the store.
        try:
            manifest = _http_get(ref.manifest_url, MANIFEST_CAP)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return JobOutcome(3, f"ModelNotFound: {model} not found in registry")
            return _pull_failed(f"pull model manifest: registry answered {e.code}")
        except (urllib.error.URLError, OSError) as e:
            return _pull_failed(f"pull model manifest: {ref.base_url} unreachable: {e}")
        try:
            doc = json.loads(manifest)
            descriptors = [doc["config"], *doc.get("layers", [])]
            digests = [str(desc["digest"]) for desc in descriptors]
        except (ValueError, KeyError, TypeError):
            return _pull_failed("pull model manifest: not a schema-2 manifest")
        for desc, digest in zip(descriptors, digests, strict=True):
            try:
                blob = _http_get(_blob_url(ref.blob_url(digest), desc, env), 64 * 1024 * 1024)
            except (urllib.error.URLError, OSError, ValueError) as e:
                return _pull_failed(f"pull blob {digest[:19]}: {e}")
            if "sha256:" + hashlib.sha256(blob).hexdigest() != digest:
                return _pull_failed(f"digest mismatch for blob {digest}")
            blob_path = store_dir / "blobs" / digest.replace(":", "-")
            blob_path.parent.mkdir(parents=True, exist_ok=True)
            blob_path.write_bytes(blob)
        target = store_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(manifest)
        # The script's check: sha256sum of $STORE_MANIFEST (dmrollout's idea of the path)
        # against the expected digest; missing when dmrollout and the runtime disagree.
        check_dir, check_relative = self._store_for(pod, container, store_manifest)
        checked = None if check_dir is None else check_dir / check_relative
        if checked is None or not checked.is_file():
            return JobOutcome(1, f"ManifestMissing: {store_manifest} not written by ollaya pull")
        got = hashlib.sha256(checked.read_bytes()).hexdigest()
        if got != expected:
            if env.get("DIGEST_PINNED", "false") == "true":
                return JobOutcome(4, f"DigestMismatch: expected {expected} got {got}")
            return JobOutcome(5, f"TagMoved: {model} now has digest {got}, resolved {expected}")
        return JobOutcome(0, "")

    def _store_for(
        self, pod: dict[str, Any], container: dict[str, Any], path: str
    ) -> tuple[Path | None, str]:
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in pod["spec"].get("volumes", [])
            if "persistentVolumeClaim" in v
        }
        for mount in container.get("volumeMounts", []):
            root = mount["mountPath"].rstrip("/") + "/"
            if path.startswith(root) and mount["name"] in claims:
                vdir = volume_dir(
                    self.state_dir, pod["metadata"]["namespace"], claims[mount["name"]]
                )
                vdir.mkdir(parents=True, exist_ok=True)
                return vdir, path[len(root) :]
        return None, ""

    # -- volumes ---------------------------------------------------------------------------
    def _our_classes(self) -> tuple[set[str], str | None, set[str]]:
        ours, default, expandable = set(), None, set()
        for sc in self.storage.list_storage_class().items:
            if sc.provisioner != PROVISIONER:
                continue
            ours.add(sc.metadata.name)
            if sc.allow_volume_expansion:
                expandable.add(sc.metadata.name)
            annotations = sc.metadata.annotations or {}
            if annotations.get("storageclass.kubernetes.io/is-default-class") == "true":
                default = sc.metadata.name
        return ours, default, expandable

    def on_pvc(self, pvc: dict[str, Any]) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        if meta.get("deletionTimestamp"):
            return
        ours, default, expandable = self._our_classes()
        sc = spec.get("storageClassName") or default
        if sc not in ours:
            return
        requested = spec["resources"]["requests"]["storage"]
        volume = spec.get("volumeName")
        if not volume:
            self._provision(pvc, sc, requested)
            return
        phase = pvc.get("status", {}).get("phase")
        current = pvc.get("status", {}).get("capacity", {}).get("storage")
        if phase == "Bound" and current and _quantity(requested) > _quantity(current):
            if sc not in expandable:
                return  # the API server already refuses this for a non-expandable class
            # What an external resizer does: grow the volume, then report the new capacity.
            self.core.patch_persistent_volume(
                volume, {"spec": {"capacity": {"storage": requested}}}
            )
            self.core.patch_namespaced_persistent_volume_claim_status(
                meta["name"], meta["namespace"], {"status": {"capacity": {"storage": requested}}}
            )

    def _provision(self, pvc: dict[str, Any], sc: str, size: str) -> None:
        meta = pvc["metadata"]
        name = f"pvc-{meta['uid']}"
        path = volume_dir(self.state_dir, meta["namespace"], meta["name"])
        path.mkdir(parents=True, exist_ok=True)
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": pvc["spec"].get("accessModes", ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": sc,
                "hostPath": {"path": str(path)},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        try:
            self.core.create_persistent_volume(body)
        except ApiException as e:
            if e.status != 409:
                raise

    def on_pv(self, pv: dict[str, Any]) -> None:
        annotations = pv["metadata"].get("annotations", {})
        if annotations.get(PROVISIONED_BY) != PROVISIONER:
            return
        if pv.get("status", {}).get("phase") == "Released":
            self.core.delete_persistent_volume(pv["metadata"]["name"])
            path = Path(pv["spec"].get("hostPath", {}).get("path", ""))
            if path.is_relative_to(self.state_dir / "volumes"):
                shutil.rmtree(path, ignore_errors=True)


def _pull_failed(detail: str) -> JobOutcome:
    # The script's fallback: `PullFailed: ollaya pull exited <rc>: <last line of its output>`.
    return JobOutcome(1, f"PullFailed: ollaya pull exited 1: Error: {detail}")


def _runtime_manifest_path(ref: ModelRef) -> str:
    """Where ``ollaya pull`` writes the manifest inside ``OLLAYA_MODELS`` (RUNTIME_API.md
    "On-disk store"): keyed by host, the port's ``:`` written ``_``, whatever the scheme."""
    return f"manifests/{host_dir_name(ref.host)}/{ref.namespace}/{ref.model}/{ref.tag}"


def _blob_url(registry_url: str, descriptor: dict[str, Any], env: dict[str, str]) -> str:
    """Where ``ollaya pull`` fetches a blob: the descriptor's ``urls[0]`` when present (weights
    on a Hugging Face endpoint), its origin replaced by OLLAYA_HF_ENDPOINT when set; else the
    registry (RUNTIME_API "Registry", same rule as simulators.pull)."""
    urls = descriptor.get("urls")
    if not (isinstance(urls, list) and urls and isinstance(urls[0], str)):
        return registry_url
    url: str = urls[0]
    endpoint = env.get("OLLAYA_HF_ENDPOINT", "").strip().rstrip("/")
    if endpoint:
        parts = urllib.parse.urlsplit(url)
        url = endpoint + parts.path + (f"?{parts.query}" if parts.query else "")
    return url


def _http_get(url: str, cap: int) -> bytes:
    # The registry simulator is plain HTTP on loopback; never through a proxy.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        data: bytes = response.read(cap + 1)
    if len(data) > cap:
        raise OSError(f"{url}: body over {cap} bytes")
    return data


_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9}


def _quantity(q: str) -> int:
    for suffix, factor in _SUFFIX.items():
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * factor)
    return int(float(q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    api = config.new_client_from_config(config_file=args.kubeconfig)
    kubelet = FakeKubelet(api, args.state_dir)
    signal.signal(signal.SIGTERM, lambda *_: kubelet.stop_event.set())
    signal.signal(signal.SIGINT, lambda *_: kubelet.stop_event.set())
    kubelet.run()


if __name__ == "__main__":
    main()

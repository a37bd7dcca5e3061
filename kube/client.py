"""The only door from activities to the Kubernetes API.

Every object dmrollout creates is created-or-adopted by name with an owner-UID check, so an
activity that runs twice (a retry after a crash between the API call and the activity result)
finds its own object instead of failing or duplicating it, and never touches an object of the
same name it does not own (ResourceConflict). The kubernetes client is synchronous; async
activities call it through ``asyncio.to_thread`` so the event loop (heartbeats, cancellation)
stays responsive.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final, TypeVar

from kubernetes import client, config

from decisionmodel.api import GROUP, PLURAL, VERSION
from decisionmodel.engine.render.labels import LABEL_NAME, deployment_name, selector_labels
from decisionmodel.errors import ResourceConflict
from decisionmodel.rollout.contracts import DMRef
from decisionmodel.rollout.settings import RolloutSettings
from kube.errors import Conflict, KubeconfigInvalid, NotFound, translated
from kube.timeouts import KubeTimeouts, bound_requests, configure

T = TypeVar("T")

ROLLOUT_FIELD_MANAGER = "dmrollout-rollout"
# The label the Deployment controller puts on a ReplicaSet's Pods (and in its name).
POD_TEMPLATE_HASH = "pod-template-hash"
CONTROLLER_FIELD_MANAGER = "dmrollout-controller"
REPORTING_CONTROLLER = "decisionmodel.io/dmrollout"


# Conditional status applies that lose a race re-read and try again; writers that collide keep
# colliding in lockstep unless they wait a random while (measured: two writers hammering one
# object exhausted 5 immediate retries).
STATUS_APPLY_ATTEMPTS = 10


async def conflict_backoff(attempt: int) -> None:
    """Full jitter, 50 ms doubling per attempt, capped at 1.6 s."""
    import random

    await asyncio.sleep(random.uniform(0, 0.05 * 2 ** min(attempt, 5)))


class DecisionModelGone(Exception):
    """The DecisionModel was deleted or re-created under the same name (another UID)."""


class ObjectNotSettled(RuntimeError):
    """An object of the wanted name is being deleted, or vanished while being adopted: wait
    and create it again (a RuntimeError, so callers that retried on it still do)."""


@dataclass(frozen=True)
class KindOps:
    """How to reach one kind with the typed client (namespaced kinds only)."""

    kind: str
    api_version: str
    read: Callable[..., Any]
    create: Callable[..., Any]
    delete: Callable[..., Any]
    patch: Callable[..., Any]
    lister: Callable[..., Any]


# KindOps' calls in its field order, as the generated client names them.
VERBS: Final = ("read", "create", "delete", "patch", "list")


def _kind_ops(kind: str, api_version: str, api: Any, plural: str) -> KindOps:
    """The typed client's five calls for one namespaced kind (``read_namespaced_<plural>``
    and so on: the generated client's names)."""
    return KindOps(
        kind,
        api_version,
        *(getattr(api, f"{verb}_namespaced_{plural}") for verb in VERBS),
    )


class Kube:
    def __init__(
        self,
        api_client: client.ApiClient,
        instance: str | None = None,
        timeouts: KubeTimeouts | None = None,
    ) -> None:
        self.api_client = api_client
        self.timeouts = timeouts or KubeTimeouts()
        bound_requests(api_client, self.timeouts)
        # Every call raises kube.errors' types, never the client's ApiException.
        self.core = translated(client.CoreV1Api(api_client))
        self.apps = translated(client.AppsV1Api(api_client))
        self.batch = translated(client.BatchV1Api(api_client))
        self.policy = translated(client.PolicyV1Api(api_client))
        self.custom = translated(client.CustomObjectsApi(api_client))
        self.events = translated(client.EventsV1Api(api_client))
        self.coordination = translated(client.CoordinationV1Api(api_client))
        self.authentication = translated(client.AuthenticationV1Api(api_client))
        self.authorization = translated(client.AuthorizationV1Api(api_client))
        self.instance = instance or f"dmrollout-{uuid.uuid4().hex[:8]}"
        self.kinds: dict[str, KindOps] = {
            ops.kind: ops
            for ops in (
                _kind_ops("Deployment", "apps/v1", self.apps, "deployment"),
                _kind_ops("Job", "batch/v1", self.batch, "job"),
                _kind_ops("PersistentVolumeClaim", "v1", self.core, "persistent_volume_claim"),
                _kind_ops("Service", "v1", self.core, "service"),
                _kind_ops("PodDisruptionBudget", "policy/v1", self.policy, "pod_disruption_budget"),
            )
        }

    @classmethod
    def from_config(
        cls,
        kubeconfig: str | None = None,
        timeouts: KubeTimeouts | None = None,
        context: str | None = None,
        pool_size: int | None = None,
    ) -> Kube:
        """A kubeconfig file (or context) when given, else in-cluster, else the default
        kubeconfig. ``pool_size``: connections kept to the API server, one per thread that
        calls it (the client's default, 5 per CPU, made a worker of 64 activities discard a
        connection and open a new TLS one per call: 1,069 discards rolling 100 DecisionModels)."""
        timeouts = timeouts or KubeTimeouts()
        configuration = client.Configuration()
        if pool_size is not None:
            configuration.connection_pool_maxsize = max(
                pool_size, configuration.connection_pool_maxsize
            )
        try:
            if kubeconfig or context:
                config.load_kube_config(
                    config_file=kubeconfig, context=context, client_configuration=configuration
                )
            else:
                try:
                    config.load_incluster_config(client_configuration=configuration)
                except config.ConfigException:
                    config.load_kube_config(client_configuration=configuration)
        except config.ConfigException as e:
            raise KubeconfigInvalid(str(e)) from e
        configure(configuration, timeouts)
        return cls(client.ApiClient(configuration), timeouts=timeouts)

    @classmethod
    def from_settings(cls, settings: RolloutSettings) -> Kube:
        return cls.from_config(
            settings.kubeconfig,
            KubeTimeouts(
                connect=settings.kube_connect_timeout_seconds,
                read=settings.kube_read_timeout_seconds,
            ),
            # The worker calls from one thread per activity (controller/worker/run.py).
            pool_size=settings.worker_max_concurrent_activities,
        )

    # -- plumbing --------------------------------------------------------------------------
    @staticmethod
    async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking client call off the event loop (a transport failure, bounded by
        ``kube.timeouts``, is raised as kube.errors.Unavailable like any other)."""
        return await asyncio.to_thread(partial(fn, *args, **kwargs))

    def raw(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call and return the JSON dict (camelCase), not the client's model objects."""
        response = fn(*args, _preload_content=False, **kwargs)
        import json

        return json.loads(response.data)

    # -- DecisionModel ---------------------------------------------------------------------
    def read_dm(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The DecisionModel as the API server has it (None: there is none)."""
        try:
            obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        except NotFound:
            return None
        return obj

    def get_dm(self, dm: DMRef) -> dict[str, Any]:
        obj = self.read_dm(dm.namespace, dm.name)
        if obj is None:
            raise DecisionModelGone(f"DecisionModel {dm.namespace}/{dm.name} is gone")
        if obj["metadata"]["uid"] != dm.uid:
            raise DecisionModelGone(
                f"DecisionModel {dm.namespace}/{dm.name} was re-created (uid changed)"
            )
        return obj

    def apply_dm_status(
        self,
        dm: DMRef,
        status: dict[str, Any],
        field_manager: str = ROLLOUT_FIELD_MANAGER,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of the status fields this manager owns (and only those).

        Distinct field managers (the rollout's activities, the controller) each own their
        fields; conditions are a map keyed by type, so neither can clobber the other's.
        ``resource_version`` makes the apply conditional (409 when the object changed since
        it was read), for writers that build the applied set from what they read.
        """
        metadata: dict[str, Any] = {"name": dm.name, "namespace": dm.namespace, "uid": dm.uid}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DecisionModel",
            "metadata": metadata,
            "status": status,
        }
        result: dict[str, Any] = self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            dm.namespace,
            PLURAL,
            dm.name,
            body,
            field_manager=field_manager,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        return result

    def remove_dm_annotation(self, dm: DMRef, annotation: str) -> None:
        """A JSON merge patch deleting one annotation, guarded by the UID (a re-created namesake
        keeps its annotations)."""
        self.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            dm.namespace,
            PLURAL,
            dm.name,
            {"metadata": {"uid": dm.uid, "annotations": {annotation: None}}},
            _content_type="application/merge-patch+json",
        )

    def emit_event(
        self,
        dm: DMRef,
        reason: str,
        note: str,
        event_type: str = "Normal",
        action: str = "Rollout",
        now: datetime | None = None,
    ) -> None:
        """An events.k8s.io/v1 Event on the DecisionModel. Notes never carry secrets."""
        at = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": f"{dm.name}.{uuid.uuid4().hex[:16]}",
                "namespace": dm.namespace,
            },
            "eventTime": at,
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "note": note[:1024],
            "type": event_type,
            "regarding": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "DecisionModel",
                "name": dm.name,
                "namespace": dm.namespace,
                "uid": dm.uid,
            },
        }
        self.events.create_namespaced_event(dm.namespace, body)

    # -- owned objects ---------------------------------------------------------------------
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        ops = self.kinds[kind]
        try:
            obj: dict[str, Any] = self.raw(ops.read, name, namespace)
            return obj
        except NotFound:
            return None

    def create_or_adopt(self, obj: dict[str, Any], owner_uid: str) -> dict[str, Any]:
        """Create ``obj``; if it exists and is ours (controller owner UID), return it as is.

        Raises ResourceConflict when an object of that name exists with another controller
        owner, or none: dmrollout never modifies or deletes what it does not own.
        """
        kind, meta = obj["kind"], obj["metadata"]
        ops = self.kinds[kind]
        try:
            created: dict[str, Any] = self.raw(ops.create, meta["namespace"], obj)
            return created
        except Conflict:
            pass
        existing = self.get(kind, meta["namespace"], meta["name"])
        if existing is None:  # deleted in between; the retry of the activity creates it
            raise ObjectNotSettled(f"{kind} {meta['name']} vanished while being adopted")
        if existing["metadata"].get("deletionTimestamp"):
            raise ObjectNotSettled(f"{kind} {meta['name']} is being deleted; retrying")
        self.check_owned(existing, owner_uid)
        return existing

    def get_or_create(self, obj: dict[str, Any], owner_uid: str) -> dict[str, Any]:
        """create_or_adopt for an object that usually exists (the steady state re-checks it
        every minute): one read when it is there and ours, instead of a create answered 409
        and then a read (issue 14: ~112 requests per rollout, a create per reconcile)."""
        meta = obj["metadata"]
        existing = self.get(obj["kind"], meta["namespace"], meta["name"])
        if existing is None or existing["metadata"].get("deletionTimestamp"):
            return self.create_or_adopt(obj, owner_uid)
        self.check_owned(existing, owner_uid)
        return existing

    async def ensure_owned(
        self,
        obj: dict[str, Any],
        owner_uid: str,
        poll_interval: float,
        on_wait: Callable[[str], None] | None = None,
        settling: Callable[[], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        """create_or_adopt that waits out a namesake being deleted (e.g. the store PVC of a
        revision deleted a moment ago and rolled out again), calling ``on_wait`` (a heartbeat)
        and ``settling`` (what shows the wait) each round. ResourceConflict for a foreign
        object is raised at once."""
        while True:
            try:
                return await self.run(self.create_or_adopt, obj, owner_uid)
            except ObjectNotSettled as e:
                if on_wait is not None:
                    on_wait(str(e))
                if settling is not None:
                    await settling()
                # Polled, not watched: a namesake being deleted is rare, and a watch would
                # need list and watch on every kind the worker creates (docs/rbac.md).
                await asyncio.sleep(poll_interval)

    @staticmethod
    def controller_uid(obj: dict[str, Any]) -> str | None:
        for ref in obj["metadata"].get("ownerReferences", []) or []:
            if ref.get("controller"):
                return str(ref.get("uid"))
        return None

    def check_owned(self, obj: dict[str, Any], owner_uid: str) -> None:
        if self.controller_uid(obj) != owner_uid:
            meta = obj["metadata"]
            raise ResourceConflict(
                f"{obj.get('kind', 'object')} {meta['namespace']}/{meta['name']} exists and is "
                "not owned by this DecisionModel; dmrollout never modifies a foreign object: "
                "rename or remove it"
            )

    def delete_owned(self, kind: str, namespace: str, name: str, owner_uid: str) -> bool:
        """Delete when it exists and is ours; True when a delete was issued (or already gone)."""
        existing = self.get(kind, namespace, name)
        if existing is None:
            return True
        if self.controller_uid(existing) != owner_uid:
            return False
        ops = self.kinds[kind]
        with contextlib.suppress(NotFound):
            ops.delete(name, namespace, propagation_policy="Background")
        return True

    def list_labelled(
        self, kind: str, namespace: str, selector: dict[str, str]
    ) -> list[dict[str, Any]]:
        """Objects of ``kind`` in ``namespace`` matching the labels (JSON dicts)."""
        label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        body = self.raw(self.kinds[kind].lister, namespace, label_selector=label_selector)
        items: list[dict[str, Any]] = body["items"]
        return items

    def list_revision_pods(self, namespace: str, dm: str, revision: str) -> list[dict[str, Any]]:
        """The serving Pods of one revision: labelled for it *and* controlled by a ReplicaSet of
        its Deployment. A Pod that only carries the labels (anyone who can create Pods can set
        them) is never probed, so it never receives the engine API key nor counts as ready."""
        return serving_pods(self.list_pods(namespace, selector_labels(dm, revision)), dm, revision)

    def list_pods(self, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
        label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        body = self.raw(self.core.list_namespaced_pod, namespace, label_selector=label_selector)
        items: list[dict[str, Any]] = body["items"]
        return items

    def patch_pod_condition(self, namespace: str, pod: str, condition: dict[str, Any]) -> None:
        """Set one Pod condition (a readiness gate) by strategic merge on the type key."""
        self.core.patch_namespaced_pod_status(
            pod, namespace, {"status": {"conditions": [condition]}}
        )

    def read_secret_value(
        self, namespace: str, name: str, key: str
    ) -> tuple[bytes, dict[str, str]]:
        """The decoded value and the Secret's labels (capability check by the caller)."""
        import base64

        body = self.raw(self.core.read_namespaced_secret, name, namespace)
        labels: dict[str, str] = body["metadata"].get("labels", {}) or {}
        data = body.get("data", {}) or {}
        if key not in data:
            raise KeyError(key)
        return base64.b64decode(data[key]), labels

    def read_config_map_value(self, namespace: str, name: str, key: str) -> bytes:
        body = self.raw(self.core.read_namespaced_config_map, name, namespace)
        data = body.get("data", {}) or {}
        if key in data:
            return str(data[key]).encode()
        binary = body.get("binaryData", {}) or {}
        if key in binary:
            import base64

            return base64.b64decode(binary[key])
        raise KeyError(key)


def revision_replica_set(pod: dict[str, Any]) -> str | None:
    """The Deployment a Pod's controlling ReplicaSet belongs to: a ReplicaSet of Deployment
    ``d`` is named ``d-<pod-template-hash>``, the hash the Pod carries as a label."""
    meta = pod["metadata"]
    template_hash = (meta.get("labels") or {}).get(POD_TEMPLATE_HASH)
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "ReplicaSet" and template_hash:
            name = str(ref.get("name", ""))
            suffix = f"-{template_hash}"
            return name[: -len(suffix)] if name.endswith(suffix) else None
    return None


def serving_pods(pods: list[dict[str, Any]], dm: str, revision: str) -> list[dict[str, Any]]:
    """Of Pods labelled for a revision, those its Deployment's ReplicaSets control."""
    return [p for p in pods if revision_replica_set(p) == deployment_name(dm, revision)]


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace the kubeconfig's context (``context``, else the current one) names, as
    kubectl reads it; None when it names none or there is no kubeconfig (in a Pod)."""
    try:
        contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError):
        return None
    chosen = next((c for c in contexts if c["name"] == context), None) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


def dm_selector(dm_name: str) -> dict[str, str]:
    return {LABEL_NAME: dm_name}

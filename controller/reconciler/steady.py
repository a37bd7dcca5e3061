"""Steady state of the stable revision: level-triggered, cheap, never in workflow history.

On every reconcile of a DecisionModel with a stable revision (Pod events, and every
``reinspect_seconds``) the controller:

- keeps the stable's objects as recorded: restores a deleted Deployment, Service or PDB from
  ``status.stableRevision`` (never from the live spec), refuses foreign objects
  (ResourceConflict);
- applies in-place changes: replicas (scale, never above the operator's maximum; PDB only when
  > 1; CacheNotShareable on a store that is not ReadWriteMany), cache size grow
  (CacheSpecImmutable otherwise), API-key Secret change or value rotation (checksum
  annotation on the Pod template rolls the Pods);
- re-inspects every stable Pod (``/api/ps``; warmup first when the gate is not True), sets the
  readiness gate, tolerates transport/401 errors for ``probe_error_window_seconds`` (time, not
  probes) and flips at once on a lost or wrong model;
- derives replicas {desired, modelReady} and Ready / ModelReady / Degraded.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Final

from controller.machinery.cache import DirectReader, ObjectReader, create_or_wait
from controller.reconciler.settings import ControllerSettings
from controller.reconciler.store_recovery import StoreHealth, store_health
from controller.temporal.store_recoveries import StoreRecoveries
from decisionmodel.api import DecisionModel
from decisionmodel.engine.render import (
    render_pdb,
    render_service,
    render_serving_deployment,
)
from decisionmodel.engine.render.labels import (
    ANNOTATION_APIKEY_CHECKSUM,
    ANNOTATION_RETRY,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    deployment_name,
    legacy_store_pvc_name,
    mounts_claim,
    pdb_name,
    prefetch_job_name,
    service_name,
    store_pvc_name,
)
from decisionmodel.engine.runtime_client import RuntimeClient, RuntimeTimeouts, verdict
from decisionmodel.errors import APIKeyInvalid, DmrolloutError, ProbeError, SecretNotAllowed
from decisionmodel.rollout import render_params
from decisionmodel.rollout.contracts import (
    ConditionUpdate,
    DMRef,
    RevisionObjectsInput,
    RevisionRecord,
)
from decisionmodel.rollout.render_params import APIKEY_CHECKSUM_PREFIX
from decisionmodel.rollout.settings import RolloutSettings
from decisionmodel.rollout.spec_mapping import stable_objects_input
from decisionmodel.rollout.unanswered import AnswerWindow
from decisionmodel.vocabulary import ConditionStatus, ConditionType, Reason, StatusKey
from kube.client import Kube
from kube.controller_status import Cond
from kube.errors import Conflict, Forbidden, Invalid
from kube.pod_gate import (
    gate_event,
    gate_reason,
    gate_true,
    is_model_ready,
    is_terminating,
    pod_ip,
    probe_eligible,
    probe_result,
    set_gate,
    state_from_verdict,
)
from kube.secrets import SecretCapability, SecretReader, parse_api_key

log = logging.getLogger("dmrollout.controller.steady")

READY, DEGRADED, MODEL_READY = (
    ConditionType.READY,
    ConditionType.DEGRADED,
    ConditionType.MODEL_READY,
)


@dataclass
class StableHealth:
    desired: int
    model_ready: int
    conditions: list[ConditionUpdate] = field(default_factory=list)
    degraded_reason: str | None = None  # Degraded phase forced (SecretNotAllowed, …)
    probe_transitions: list[str] = field(default_factory=list)


@dataclass
class HeldCandidate:
    """A candidate awaiting approval, as the controller's re-inspection left it."""

    revision: str
    desired: int
    model_ready: int
    not_ready: list[str] = field(default_factory=list)  # "<pod>: <why>"

    def message(self) -> str:
        pods = "; ".join(self.not_ready) or "no Pod yet"
        return (
            f"candidate {self.revision} awaits approval with {self.model_ready}/{self.desired} "
            f"replicas model-ready ({pods[:500]}); its Pods are warmed up and inspected again "
            "as they change, and an approval is refused until all are model-ready; the stable "
            "revision serves meanwhile"
        )


def _quantity_bytes(q: str) -> float:
    units = {
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
    }
    for suffix, factor in units.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * factor
    return float(q)


class SteadyState:
    def __init__(
        self,
        kube: Kube,
        rollout: RolloutSettings,
        settings: ControllerSettings,
        recoveries: StoreRecoveries | None = None,
        reader: ObjectReader | None = None,
    ) -> None:
        self.kube = kube
        # Where objects are read: the controller's watch-fed cache
        # (controller/machinery/cache.py), so a
        # re-inspection costs probes of the Pods and no API read; writes go to the API.
        self.reader: ObjectReader = reader or DirectReader(kube)
        self.rollout = rollout
        self.settings = settings
        # Starts and reads store recovery workflows (seed 001 StoreLost); None: not checked.
        self.recoveries = recoveries
        self.secrets = SecretReader(kube)
        # Pods that do not answer, by UID, on the monotonic clock (decisionmodel.rollout.
        # unanswered; in memory: a restart forgives, harmlessly).
        self.unanswered = AnswerWindow(settings.probe_error_window_seconds)

    async def reconcile(self, model: DecisionModel, stable: RevisionRecord) -> StableHealth:
        inp = await self._stable_input(model, stable)
        dm = inp.dm
        health = StableHealth(desired=inp.replicas, model_ready=0)
        key = await self._api_key(inp, health)
        if key is None:
            return health
        api_key, checksum = key
        conflicts: list[str] = []
        cache_problems: list[ConditionUpdate] = []
        await self._ensure_deployment(inp, checksum, conflicts)
        await self._ensure_pdb(inp, conflicts)
        await self._ensure_service(dm, stable.hash, conflicts)
        await self._cache(inp, cache_problems)
        store = await self._store(model, inp)

        pods = await Kube.run(self.reader.list_revision_pods, dm.namespace, dm.name, stable.hash)
        for pod in pods if store.probe else []:
            result = await self._probe(dm, pod, stable, api_key)
            if result is not None:
                health.probe_transitions.append(result)
        # From the cache this is the same snapshot: a gate just written (and the PodReady the
        # kubelet derives from it) arrives as a Pod event, which reconciles this again.
        pods = await Kube.run(self.reader.list_revision_pods, dm.namespace, dm.name, stable.hash)
        health.model_ready = sum(1 for p in pods if is_model_ready(p) and not is_terminating(p))
        health.conditions += readiness_conditions(health.model_ready, health.desired)
        if conflicts:
            refused = "; ".join(conflicts)
            health.conditions = [c for c in health.conditions if c.type != READY]
            health.conditions.append(
                Cond(READY, ConditionStatus.FALSE, Reason.RESOURCE_CONFLICT, refused)
            )
        elif store.condition is not None:
            health.degraded_reason = store.condition.reason
        health.conditions.append(
            degraded_condition(conflicts, store.condition, health, cache_problems)
        )
        return health

    async def _stable_input(
        self, model: DecisionModel, stable: RevisionRecord
    ) -> RevisionObjectsInput:
        inp = stable_objects_input(model, stable, self.rollout.runtime_version)
        cap = self.rollout.replicas_cap
        if cap is not None and inp.replicas > cap:
            # spec.replicas above the operator's maximum is refused (PlacementRefused, shown by
            # the reconciler): the stable keeps the replicas it runs with.
            inp = inp.model_copy(update={"replicas": await self._current_replicas(inp)})
        return inp

    async def _api_key(
        self, inp: RevisionObjectsInput, health: StableHealth
    ) -> tuple[str | None, str | None] | None:
        """(the engine API key, its checksum for the Pod template), both None without
        spec.auth; None when the key cannot be used (``health`` then says why: Degraded)."""
        if inp.api_key is None:
            return None, None
        dm = inp.dm
        try:
            found = await self.secrets.read_entry(
                dm.namespace, inp.api_key, SecretCapability.API_KEY
            )
            # One read serves both.
            api_key = parse_api_key(found.value, dm.namespace, inp.api_key)
            return api_key, render_params.apikey_checksum(found.value, found.uid)
        except (SecretNotAllowed, APIKeyInvalid) as e:
            reason, message = e.reason, str(e)
        except DmrolloutError as e:  # Secret missing: same treatment as unusable
            reason, message = Reason.API_KEY_INVALID, str(e)
        health.degraded_reason = reason
        health.conditions.append(Cond(DEGRADED, ConditionStatus.TRUE, reason, message))
        health.conditions.append(Cond(READY, ConditionStatus.FALSE, reason, message))
        return None

    async def held_candidate(
        self, model: DecisionModel, candidate: RevisionRecord
    ) -> HeldCandidate | None:
        """A candidate awaiting approval is looked after like the stable while it waits (issue
        34): each Pod warmed up when its gate is not True, inspected, gated. A Pod replaced
        meanwhile (deleted, evicted) is model-ready again before anyone approves, and one that
        lost its model loses its gate now, not at promotion. None: the API key cannot be read
        (the stable's conditions say why)."""
        inp = stable_objects_input(model, candidate, self.rollout.runtime_version)
        dm = inp.dm
        try:
            api_key = await self.secrets.api_key(dm.namespace, inp.api_key)
        except DmrolloutError:
            return None
        pods = await Kube.run(self.reader.list_revision_pods, dm.namespace, dm.name, candidate.hash)
        for pod in pods:
            await self._probe(dm, pod, candidate, api_key)
        # The cache's snapshot: a gate just written comes back as a Pod event (a reconcile).
        pods = await Kube.run(self.reader.list_revision_pods, dm.namespace, dm.name, candidate.hash)
        live = [p for p in pods if not is_terminating(p)]
        held = HeldCandidate(candidate.hash, inp.replicas, 0)
        for pod in live:
            if is_model_ready(pod):
                held.model_ready += 1
            else:
                why = gate_reason(pod) or "starting, not warmed up yet"
                held.not_ready.append(f"{pod['metadata']['name']}: {why}")
        return held

    async def _store(self, model: DecisionModel, inp: RevisionObjectsInput) -> StoreHealth:
        """The stable's store: lost, being recovered, failed to recover, or being deleted."""
        if self.recoveries is None:
            return StoreHealth()
        if await self._on_legacy_store(inp):
            return StoreHealth()
        name = store_pvc_name(inp.dm.name, inp.record.hash)
        pvc = await Kube.run(self.reader.get, "PersistentVolumeClaim", inp.dm.namespace, name)
        retry = (model.metadata.annotations or {}).get(ANNOTATION_RETRY)
        health = await store_health(self.recoveries, inp, pvc, retry)
        if health.condition is not None and health.condition.reason == Reason.STORE_TERMINATING:
            # The finished prefetch Job's Pod references the PVC too and can keep it Terminating
            # (seen: the PVC outlived the stable Pods); it is ours and done: remove it.
            job = prefetch_job_name(inp.dm.name, inp.record.hash)
            if await Kube.run(self.reader.get, "Job", inp.dm.namespace, job) is not None:
                await Kube.run(self.kube.delete_owned, "Job", inp.dm.namespace, job, inp.dm.uid)
        return health

    async def _current_replicas(self, inp: RevisionObjectsInput) -> int:
        """The stable Deployment's replicas as they are (not scaled either way: a maximum
        lowered under a running stable does not shrink it); a deleted one is restored with the
        maximum."""
        name = deployment_name(inp.dm.name, inp.record.hash)
        current = await Kube.run(self.reader.get, "Deployment", inp.dm.namespace, name)
        have = (current or {}).get("spec", {}).get("replicas")
        return have if isinstance(have, int) and have >= 1 else self.rollout.max_replicas

    # -- objects ---------------------------------------------------------------------------
    async def _ensure_deployment(
        self, inp: RevisionObjectsInput, checksum: str | None, conflicts: list[str]
    ) -> None:
        desired = render_serving_deployment(
            render_params.serving_params(inp, self._restore_settings(inp), checksum, recorded=True)
        )
        name = desired["metadata"]["name"]
        current = await Kube.run(self.reader.get, "Deployment", inp.dm.namespace, name)
        if current is None:
            await self._restore(desired, "stable Deployment")
            return
        if Kube.controller_uid(current) != inp.dm.uid:
            conflicts.append(f"Deployment {name} is not owned by this DecisionModel")
            return
        await self._take_over("Deployment", current)
        patch: dict[str, Any] = {}
        if current["spec"].get("replicas") != inp.replicas:
            patch.setdefault("spec", {})["replicas"] = inp.replicas
        want = (desired["spec"]["template"]["metadata"].get("annotations") or {}).get(
            ANNOTATION_APIKEY_CHECKSUM
        )
        same_ref = _api_key_env(current) == _api_key_env(desired)
        action = key_rotation(current, want, same_ref)
        if action == ROLL:
            # Rotation or a new Secret reference: the new template rolls the Pods per strategy.
            patch.setdefault("spec", {})["template"] = copy.deepcopy(desired["spec"]["template"])
        elif action == RECORD:
            # Seed 001: "On upgrade, the first reconcile only records the checksum".
            log.info("recording the API-key checksum of %s/%s (no roll)", inp.dm.namespace, name)
            patch["metadata"] = {"annotations": {ANNOTATION_APIKEY_CHECKSUM: want}}
        if patch:
            await Kube.run(self.kube.kinds["Deployment"].patch, name, inp.dm.namespace, patch)

    def _restore_settings(self, inp: RevisionObjectsInput) -> RolloutSettings:
        if inp.revision.image:
            # A recorded override image was allowed when it was promoted: restoring it is not a
            # new override.
            return self.rollout.model_copy(update={"allow_image_override": True})
        return self.rollout

    async def _ensure_pdb(self, inp: RevisionObjectsInput, conflicts: list[str]) -> None:
        name = pdb_name(inp.dm.name, inp.record.hash)
        current = await Kube.run(self.reader.get, "PodDisruptionBudget", inp.dm.namespace, name)
        if inp.replicas > 1:
            if current is None or current["metadata"].get("deletionTimestamp"):
                pdb = render_pdb(render_params.revision_params(inp.dm, inp.record.hash))
                await Kube.run(create_or_wait, self.kube, pdb)
            elif Kube.controller_uid(current) != inp.dm.uid:
                conflicts.append(f"PodDisruptionBudget {name} is not owned by this DecisionModel")
        elif current is not None:
            await Kube.run(
                self.kube.delete_owned, "PodDisruptionBudget", inp.dm.namespace, name, inp.dm.uid
            )

    async def _ensure_service(self, dm: DMRef, stable: str, conflicts: list[str]) -> None:
        name = service_name(dm.name)
        current = await Kube.run(self.reader.get, "Service", dm.namespace, name)
        desired = render_service(render_params.service_params(dm, stable))
        if current is None:
            await self._restore(desired, "Service")
            return
        if Kube.controller_uid(current) != dm.uid:
            conflicts.append(f"Service {name} is not owned by this DecisionModel")
            return
        await self._take_over("Service", current)
        selector = current["spec"].get("selector") or {}
        if selector == desired["spec"]["selector"]:
            return
        # status.stableRevision is written before the Service switch (crash-safe order); a
        # promotion cut between the two is completed here, from the recorded stable. Recorded
        # now, not as the cache last showed it: a promotion that had just switched the Service
        # was switched back for 60 ms by a reconcile reading the stable from before it
        # (explorer seed 4451). The Service's resourceVersion makes the patch lose to any
        # switch since this read.
        fresh = await Kube.run(self.kube.get_dm, dm)
        recorded = ((fresh.get("status") or {}).get(StatusKey.STABLE_REVISION) or {}).get("hash")
        if recorded != stable:
            return
        log.info(
            "Service %s/%s selects %s; switching to the stable %s",
            dm.namespace,
            name,
            selector.get("decisionmodel.io/revision"),
            stable,
        )
        patch = {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "spec": {"selector": desired["spec"]["selector"]},
        }
        try:
            await Kube.run(self.kube.kinds["Service"].patch, name, dm.namespace, patch)
        except Conflict:  # switched since this read: the next reconcile looks again
            log.info(
                "Service %s/%s changed since it was read; left to the next reconcile",
                dm.namespace,
                name,
            )

    async def _cache(self, inp: RevisionObjectsInput, problems: list[ConditionUpdate]) -> None:
        modes = inp.cache.access_modes
        if inp.replicas > 1 and "ReadWriteMany" not in modes:
            problems.append(
                Cond(
                    DEGRADED,
                    ConditionStatus.TRUE,
                    Reason.CACHE_NOT_SHAREABLE,
                    f"replicas {inp.replicas} with a {'/'.join(modes)} store: Pods on other nodes "
                    "cannot attach it; set spec.cache.accessModes [ReadWriteMany] and an RWX class",
                )
            )
        name = store_pvc_name(inp.dm.name, inp.record.hash)
        pvc = await Kube.run(self.reader.get, "PersistentVolumeClaim", inp.dm.namespace, name)
        if pvc is None or Kube.controller_uid(pvc) != inp.dm.uid:
            return
        await self._take_over("PersistentVolumeClaim", pvc)
        spec = pvc["spec"]
        current = spec["resources"]["requests"]["storage"]
        immutable: list[str] = []
        if sorted(spec.get("accessModes") or []) != sorted(modes):
            immutable.append("accessModes changed (PVC access modes are immutable)")
        if (
            inp.cache.storage_class_name
            and spec.get("storageClassName") != inp.cache.storage_class_name
        ):
            immutable.append("storageClassName changed")
        if _quantity_bytes(inp.cache.size) < _quantity_bytes(current):
            immutable.append(f"size {inp.cache.size} < {current} (PVCs cannot shrink)")
        elif _quantity_bytes(inp.cache.size) > _quantity_bytes(current):
            try:
                await Kube.run(
                    self.kube.kinds["PersistentVolumeClaim"].patch,
                    name,
                    inp.dm.namespace,
                    {"spec": {"resources": {"requests": {"storage": inp.cache.size}}}},
                )
            except (Forbidden, Invalid):
                immutable.append(
                    f"size grow to {inp.cache.size} refused: the StorageClass does not allow "
                    "volume expansion"
                )
        if immutable:
            problems.append(
                Cond(
                    DEGRADED,
                    ConditionStatus.TRUE,
                    Reason.CACHE_SPEC_IMMUTABLE,
                    "; ".join(immutable)
                    + ": the store PVC is left as is; a new revision provisions from spec.cache",
                )
            )

    async def _on_legacy_store(self, inp: RevisionObjectsInput) -> bool:
        """A stable promoted before stores were per revision mounts the shared ``<dm>-store``
        until its next promotion (seed 000 "Migration"): while that PVC is there, its own
        ``<dm>-store-<rev>`` is not missing, so no StoreLost and no recovery. (Without it, the
        usual recovery provisions the per-revision store.)"""
        dep = await Kube.run(
            self.reader.get,
            "Deployment",
            inp.dm.namespace,
            deployment_name(inp.dm.name, inp.record.hash),
        )
        legacy = legacy_store_pvc_name(inp.dm.name)
        if dep is None or not mounts_claim(dep, legacy):
            return False
        pvc = await Kube.run(self.reader.get, "PersistentVolumeClaim", inp.dm.namespace, legacy)
        if pvc is None or pvc["metadata"].get("deletionTimestamp"):
            return False
        await self._take_over("PersistentVolumeClaim", pvc)
        return True

    async def _take_over(self, kind: str, obj: dict[str, Any]) -> None:
        """A stable object of this DecisionModel without dmrollout's label was made by the
        reference operator (same group and kind, so the same owner): label it as dmrollout's,
        metadata only, so nothing restarts and later changes pass the admission policy
        (docs/migration.md). PDBs and Jobs are never changed, only deleted, which the policy
        allows for such objects as they are."""
        meta = obj["metadata"]
        if (meta.get("labels") or {}).get(LABEL_MANAGED_BY) == MANAGED_BY:
            return
        log.info(
            "taking over %s %s/%s (made before dmrollout)", kind, meta["namespace"], meta["name"]
        )
        label = {"metadata": {"labels": {LABEL_MANAGED_BY: MANAGED_BY}}}
        await Kube.run(self.kube.kinds[kind].patch, meta["name"], meta["namespace"], label)

    # -- probing ---------------------------------------------------------------------------
    async def _restore(self, desired: dict[str, Any], what: str) -> None:
        """Create an object the cache does not hold. A 409 means it exists and the cache has not
        seen it yet (just created by a rollout, its watch event on the way): nothing to say."""
        meta = desired["metadata"]
        if await Kube.run(create_or_wait, self.kube, desired) is not None:
            log.info("restored deleted %s %s/%s", what, meta["namespace"], meta["name"])

    async def _probe(
        self, dm: DMRef, pod: dict[str, Any], stable: RevisionRecord, api_key: str | None
    ) -> str | None:
        """Inspect one Pod and set its gate; the probe-result label when the gate changed."""
        if not probe_eligible(pod):
            return None
        uid = pod["metadata"]["uid"]
        ip = pod_ip(pod)
        assert ip is not None
        client = RuntimeClient.for_pod(
            ip,
            api_key=api_key,
            timeouts=RuntimeTimeouts(),
            default_registry=self.rollout.ollaya_registry,
        )
        error: BaseException | None = None
        entry = None
        try:
            async with client:
                if not gate_true(pod):
                    await client.warmup(stable.model)
                entry = await client.inspect(stable.model)
        except (DmrolloutError, OSError) as e:
            error = e
        found = verdict(stable.digest, stable.device, entry, error)
        transport_error = (
            error is not None and isinstance(error, ProbeError | OSError) and entry is None
        )
        if transport_error and gate_true(pod):
            if self.unanswered.tolerates(uid, time.monotonic()):
                return None  # tolerated (e.g. a 401 while an API-key rotation rolls the Pods)
        else:
            self.unanswered.answered(uid)
        state = state_from_verdict(found)
        if found.reason == Reason.DIGEST_MISMATCH:
            log.warning("Pod %s reports another digest", pod["metadata"]["name"])
        written = await set_gate(self.kube, pod, state)
        if written:
            await gate_event(self.kube, dm, pod, found)
        return probe_result(found) if written else None


ROLL: Final = "roll"
RECORD: Final = "record"


def key_rotation(current: dict[str, Any], want: str | None, same_ref: bool) -> str | None:
    """What the stable's Deployment needs for its API key: ROLL (the value or the Secret
    reference changed: a new template), RECORD (only write the checksum on the Deployment's
    metadata), None (nothing). Pure.

    The checksum dmrollout compares is its own (``APIKEY_CHECKSUM_PREFIX``): the Pod
    template's, or, for a Deployment another operator made (the reference's template holds its
    own checksum or none), the one recorded on the Deployment. A Deployment with neither, whose
    Pods already read the same Secret key, is an upgrade: its checksum is recorded and nothing
    rolls (seed 001); a roll happens only when the value changes afterwards."""
    if not same_ref:
        return ROLL
    if want is None:
        return None
    template = (current["spec"]["template"]["metadata"].get("annotations") or {}).get(
        ANNOTATION_APIKEY_CHECKSUM
    )
    recorded = (current["metadata"].get("annotations") or {}).get(ANNOTATION_APIKEY_CHECKSUM)
    ours = [c for c in (template, recorded) if c and c.startswith(APIKEY_CHECKSUM_PREFIX)]
    if not ours:
        return RECORD
    if template is not None and template.startswith(APIKEY_CHECKSUM_PREFIX):
        return None if template == want else ROLL
    return None if recorded == want else ROLL


def _api_key_env(deployment: dict[str, Any]) -> dict[str, Any] | None:
    for container in deployment["spec"]["template"]["spec"].get("containers", []):
        for env in container.get("env", []) or []:
            if env.get("name") == "OLLAYA_API_KEY":
                ref: dict[str, Any] = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
                return {"name": ref.get("name"), "key": ref.get("key")}
    return None


__all__ = ["HeldCandidate", "StableHealth", "SteadyState", "deployment_name"]


def readiness_conditions(ready: int, desired: int) -> list[ConditionUpdate]:
    """Ready and ModelReady from the stable's model-ready replicas (seed 001): serving while
    one is, ModelReady only when all are."""
    msg = f"{ready}/{desired} replicas model-ready"
    if ready >= desired:
        return [
            Cond(READY, ConditionStatus.TRUE, Reason.SERVING, msg),
            Cond(MODEL_READY, ConditionStatus.TRUE, Reason.MODEL_READY, msg),
        ]
    if ready > 0:
        return [
            Cond(READY, ConditionStatus.TRUE, Reason.REPLICAS_NOT_MODEL_READY, msg),
            Cond(MODEL_READY, ConditionStatus.FALSE, Reason.REPLICAS_NOT_MODEL_READY, msg),
        ]
    return [
        Cond(READY, ConditionStatus.FALSE, Reason.NO_MODEL_READY_PODS, msg),
        Cond(MODEL_READY, ConditionStatus.FALSE, Reason.NO_MODEL_READY_PODS, msg),
    ]


def degraded_condition(
    conflicts: list[str],
    store: ConditionUpdate | None,
    health: StableHealth,
    cache_problems: list[ConditionUpdate],
) -> ConditionUpdate:
    """Degraded: the first of a foreign object in the way, the store, missing replicas, the
    shared cache; False (AsExpected) when none."""
    ready, desired = health.model_ready, health.desired
    if conflicts:
        return Cond(DEGRADED, ConditionStatus.TRUE, Reason.RESOURCE_CONFLICT, "; ".join(conflicts))
    if store is not None:
        return store
    if ready < desired:
        reason = Reason.REPLICAS_NOT_MODEL_READY if ready else Reason.NO_MODEL_READY_PODS
        return Cond(
            DEGRADED, ConditionStatus.TRUE, reason, f"{ready}/{desired} replicas model-ready"
        )
    if cache_problems:
        return cache_problems[0]
    return Cond(DEGRADED, ConditionStatus.FALSE, Reason.AS_EXPECTED, "")

"""Every in-place setting reaches the serving stable, or is refused with a reason (issue 37,
item 3).

``InPlace`` (replicas, the store, the API key) is applied to whichever revision serves, never
part of its identity. A field added there that the steady state does not apply would reach only
the next revision, silently. Here the stable's objects are rendered from one set of in-place
settings, the steady state is given another that differs in exactly one field (or one field of
the store), and it must write the change (a patch, a create or a delete) or name it on a
condition. A field of ``InPlace`` or ``CachePolicy`` with no case here fails the first test.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from controller.reconciler.settings import ControllerSettings
from controller.reconciler.steady import SteadyState
from decisionmodel.engine.render import render_pdb, render_serving_deployment, render_store_pvc
from decisionmodel.rollout import render_params
from decisionmodel.rollout.contracts import (
    CachePolicy,
    ConditionUpdate,
    DMRef,
    InPlace,
    KeyRef,
    RevisionObjectsInput,
    RevisionRecord,
    RevisionSpec,
)
from decisionmodel.rollout.settings import RolloutSettings

DM = DMRef(namespace="ns", name="m", uid="u1", generation=2)
RECORD = RevisionRecord(hash="0123456789abcdef", model="laya:en", digest="a" * 64)
BASE = RevisionObjectsInput(
    dm=DM,
    record=RECORD,
    revision=RevisionSpec(model="laya:en", digest="a" * 64),
    store_manifest_path="manifests/laya/en",
    replicas=2,
    cache=CachePolicy(size="10Gi", storage_class_name="fast", access_modes=["ReadWriteMany"]),
    api_key=KeyRef(kind="Secret", name="runtime-key", key="key"),
)

# One change per in-place field (and per field of the store): the settings the stable gets next.
CHANGES: dict[str, dict[str, Any]] = {
    "replicas": {"replicas": 3},
    "cache.size": {"cache": BASE.cache.model_copy(update={"size": "20Gi"})},
    "cache.storage_class_name": {
        "cache": BASE.cache.model_copy(update={"storage_class_name": "slow"})
    },
    "cache.access_modes": {
        "cache": BASE.cache.model_copy(update={"access_modes": ["ReadWriteOnce"]})
    },
    "cache.download_token": {
        "cache": BASE.cache.model_copy(
            update={"download_token": KeyRef(kind="Secret", name="dl", key="token")}
        )
    },
    "api_key": {"api_key": KeyRef(kind="Secret", name="other-key", key="key")},
}
# A store's download token is read only by the prefetch Job that fills a new store: the serving
# stable has no use for it (its store is filled), so there is nothing to apply in place.
NOTHING_TO_APPLY = {"cache.download_token"}


def _owned(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = [{"controller": True, "uid": DM.uid}]
    obj["metadata"].setdefault("labels", {})["app.kubernetes.io/managed-by"] = "dmrollout"
    return obj


class FakeKube:
    """Records every write the steady state makes."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, Any]] = []
        self.kinds = {
            kind: SimpleNamespace(patch=self._patch(kind), create=self._create(kind))
            for kind in ("Deployment", "PodDisruptionBudget", "PersistentVolumeClaim")
        }

    def _patch(self, kind: str) -> Any:
        return lambda name, namespace, body: self.writes.append(("patch", kind, body))

    def _create(self, kind: str) -> Any:
        def create(namespace: str, body: Any, **_: Any) -> Any:
            self.writes.append(("create", kind, body))
            return SimpleNamespace(data=b"{}")

        return create

    def raw(self, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        fn(*args)
        return {}

    def delete_owned(self, kind: str, namespace: str, name: str, uid: str) -> None:
        self.writes.append(("delete", kind, name))


class Reader:
    """The stable's objects as rendered from ``BASE``."""

    def __init__(self, settings: RolloutSettings, checksum: str) -> None:
        deployment = render_serving_deployment(
            render_params.serving_params(BASE, settings, checksum, recorded=True)
        )
        self.objects = {
            "Deployment": _owned(deployment),
            "PodDisruptionBudget": _owned(
                render_pdb(render_params.revision_params(DM, RECORD.hash))
            ),
            "PersistentVolumeClaim": _owned(render_store_pvc(render_params.store_params(BASE))),
        }

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(kind)


CHECKSUM = render_params.apikey_checksum(b"the key", "secret-uid")


def _steady(kube: FakeKube) -> SteadyState:
    """The steady state over the stable's objects as rendered from ``BASE``."""
    settings = RolloutSettings()
    return SteadyState(
        kube,  # type: ignore[arg-type]
        settings,
        ControllerSettings(),
        reader=Reader(settings, CHECKSUM),  # type: ignore[arg-type]
    )


def _fields() -> set[str]:
    top = {name for name in InPlace.model_fields if name != "cache"}
    return top | {f"cache.{name}" for name in CachePolicy.model_fields}


def test_every_in_place_field_has_a_case_here() -> None:
    assert _fields() == set(CHANGES), "add a change for the new in-place field to CHANGES"


@pytest.mark.parametrize("field", sorted(CHANGES))
async def test_an_in_place_change_is_applied_to_the_stable_or_refused(field: str) -> None:
    kube = FakeKube()
    steady = _steady(kube)
    changed = BASE.model_copy(update=CHANGES[field])
    problems: list[ConditionUpdate] = []
    conflicts: list[str] = []
    await steady._ensure_deployment(changed, CHECKSUM, conflicts)
    await steady._ensure_pdb(changed, conflicts)
    await steady._cache(changed, problems)
    assert conflicts == []
    if field in NOTHING_TO_APPLY:
        assert problems == []
        assert kube.writes == [], kube.writes
        return
    said = [p for p in problems if p.status == "True"]
    assert kube.writes or said, f"{field}: the steady state neither applied nor refused it"


async def test_the_same_settings_write_nothing() -> None:
    """The check above means something: with nothing changed, nothing is written or said."""
    kube = FakeKube()
    steady = _steady(kube)
    problems: list[ConditionUpdate] = []
    await steady._ensure_deployment(BASE, CHECKSUM, [])
    await steady._ensure_pdb(BASE, [])
    await steady._cache(BASE, problems)
    assert kube.writes == [] and problems == []

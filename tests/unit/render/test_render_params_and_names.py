"""Params validation, the image helper and the name helpers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from decisionmodel.engine.params import (
    OwnerRef,
    PrefetchParams,
    Scheduling,
    SecretKeyRef,
    ServingParams,
    StoreParams,
    default_image,
)
from decisionmodel.engine.render import labels as L

DIGEST = "ab" * 32


def test_default_image() -> None:
    assert default_image() == "ghcr.io/ollaya-dev/ollaya:0.10.0"
    assert default_image("0.10.0", "cuda") == "ghcr.io/ollaya-dev/ollaya:0.10.0-cuda"
    assert default_image("0.12.1", "cpu") == "ghcr.io/ollaya-dev/ollaya:0.12.1"
    with pytest.raises(ValueError):
        default_image("v0.10.0")


def test_names_and_length_budget() -> None:
    dm = "a" * 43  # the longest DecisionModel name the API admits
    rev = "0123456789abcdef"
    assert L.deployment_name("m", rev) == "m-0123456789abcdef"
    assert L.pdb_name("m", rev) == "m-0123456789abcdef"
    assert L.store_pvc_name("m", rev) == "m-store-0123456789abcdef"
    assert L.prefetch_job_name("m", rev) == "m-pf-0123456789abcdef"
    assert L.service_name("m") == "m"
    # A Job name must fit a label value (63): 43 + len("-pf-") 4 + 16 = 63.
    assert len(L.prefetch_job_name(dm, rev)) == 63
    assert len(L.deployment_name(dm, rev)) == 60
    assert L.selector_labels("m", rev) == {
        "decisionmodel.io/name": "m",
        "decisionmodel.io/revision": rev,
    }


def test_constants() -> None:
    assert L.READINESS_GATE == "decisionmodel.io/model-ready"
    assert L.HTTP_PORT == 11435
    assert L.ANNOTATION_RETRY == "decisionmodel.io/retry"
    assert L.ANNOTATION_PROMOTE == "decisionmodel.io/promote"
    assert L.ANNOTATION_APIKEY_CHECKSUM == "decisionmodel.io/apikey-checksum"


def test_owner_reference() -> None:
    ref = L.owner_reference(OwnerRef(name="dm", uid="u-1"))
    assert ref == {
        "apiVersion": "decisionmodel.io/v1alpha1",
        "kind": "DecisionModel",
        "name": "dm",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _serving(**over: Any) -> ServingParams:
    fields: dict[str, Any] = {
        "owner": OwnerRef(name="dm", uid="u"),
        "namespace": "ns",
        "revision": "0123456789abcdef",
        "model": "laya:en",
        "digest": DIGEST,
        "image": "img",
        "store_claim_name": "dm-store-0123456789abcdef",
    }
    fields.update(over)
    return ServingParams(**fields)


def test_valid_serving_params() -> None:
    p = _serving()
    assert p.dm_name == "dm"
    assert p.device == "cpu"
    assert p.access_modes == ("ReadWriteOnce",)
    with pytest.raises(ValidationError):
        p.replicas = 2  # type: ignore[misc]  # frozen


@pytest.mark.parametrize(
    "over",
    [
        {"owner": {"name": "a" * 44, "uid": "u"}},
        {"namespace": "Not_A_Label"},
        {"revision": "0123456789abcdef0"},  # 17: the Job name would exceed 63
        {"revision": "ABC"},
        {"digest": "sha256:" + DIGEST},
        {"digest": DIGEST.upper()},
        {"model": "-rf"},
        {"model": "laya :en"},
        {"model": ""},
        {"device": "metal"},
        {"replicas": -1},
        {"access_modes": ("ReadOnlyMany",)},
        {"access_modes": ()},
        {"registry_url": "https://user:pw@mirror.corp"},
        {"registry_url": "mirror.corp"},
        {"resources": {"requets": {"cpu": "1"}}},
        {"image": ""},
    ],
)
def test_invalid_serving_params(over: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _serving(**over)


def test_owner_name_limit() -> None:
    OwnerRef(name="a" * 43, uid="u")
    with pytest.raises(ValidationError):
        OwnerRef(name="a" * 44, uid="u")
    with pytest.raises(ValidationError):
        OwnerRef(name="1abc", uid="u")  # DNS-1035: starts with a letter


@pytest.mark.parametrize(
    "path",
    [
        "/models/manifests/ollaya.dev/library/laya/en",
        "manifests/../../etc/passwd",
        "manifests/ollaya.dev//laya/en",
        "blobs/sha256-abc",
        "manifests/a b/c",
    ],
)
def test_invalid_store_manifest_path(path: str) -> None:
    with pytest.raises(ValidationError):
        PrefetchParams(
            owner=OwnerRef(name="dm", uid="u"),
            namespace="ns",
            revision="0123456789abcdef",
            model="laya:en",
            digest=DIGEST,
            digest_pinned=False,
            image="img",
            store_claim_name="c",
            store_manifest_path=path,
        )


def test_camel_case_spec_fragments_validate() -> None:
    s = Scheduling.model_validate(
        {"nodeSelector": {"a": "b"}, "runtimeClassName": "nvidia", "tolerations": []}
    )
    assert (s.node_selector, s.runtime_class_name) == ({"a": "b"}, "nvidia")
    assert SecretKeyRef.model_validate({"name": "s", "key": "k"}) == SecretKeyRef(name="s", key="k")
    with pytest.raises(ValidationError):
        Scheduling.model_validate({"nodeSelectr": {}})


def test_store_params_reject_read_only_many() -> None:
    with pytest.raises(ValidationError):
        StoreParams(
            owner=OwnerRef(name="dm", uid="u"),
            namespace="ns",
            revision="0123456789abcdef",
            access_modes=("ReadOnlyMany",),
        )

"""Fixtures of the renderer tests: golden-file comparison and typical params.

Golden files live in ``golden/``; ``UPDATE_GOLDEN=1`` or ``--update-golden`` rewrites them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from decisionmodel.engine.params import (
    OwnerRef,
    PrefetchParams,
    ProxyEnv,
    Scheduling,
    SecretKeyRef,
    ServiceParams,
    ServingParams,
    StoreParams,
    default_image,
)
from decisionmodel.engine.render.labels import store_pvc_name

GOLDEN_DIR = Path(__file__).parent / "golden"

DM = "support-router"
NS = "tenant-a"
REV = "7c9f0e1d2b3a4c5d"
STABLE_REV = "0a1b2c3d4e5f6a7b"
UID = "6f1c3d2e-8a4b-4c5d-9e6f-0a1b2c3d4e5f"
DIGEST = "c305" + "0" * 56 + "beef"
MANIFEST_PATH = "manifests/ollaya.dev/library/laya/en"


class _Dumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # Multi-line strings (the prefetch script) as literal blocks, so a golden diff is readable.
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(objects: Iterable[dict[str, Any]]) -> str:
    return yaml.dump_all(list(objects), Dumper=_Dumper, sort_keys=False, width=100)


@pytest.fixture
def golden(update_golden: bool) -> Callable[[str, list[dict[str, Any]]], None]:
    """``check(name, objects)``: compare with ``golden/<name>.yaml``, or rewrite it when
    ``--update-golden`` / ``UPDATE_GOLDEN=1`` (the ``update_golden`` fixture of
    tests/conftest.py) is on."""

    def check(name: str, objects: list[dict[str, Any]]) -> None:
        path = GOLDEN_DIR / f"{name}.yaml"
        text = dump_yaml(objects)
        if update_golden:
            path.write_text(text)
            return
        assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 to create it"
        assert text == path.read_text()
        # Round trip: the golden file is what the API server would receive.
        assert list(yaml.safe_load_all(path.read_text())) == objects

    return check


@pytest.fixture
def owner() -> OwnerRef:
    return OwnerRef(name=DM, uid=UID)


@pytest.fixture
def cpu_serving(owner: OwnerRef) -> ServingParams:
    """spec: model laya:en, defaults everywhere else."""
    return ServingParams(
        owner=owner,
        namespace=NS,
        revision=REV,
        model="laya:en",
        digest=DIGEST,
        image=default_image(),
        store_claim_name=store_pvc_name(DM, REV),
    )


@pytest.fixture
def cuda_serving(owner: OwnerRef) -> ServingParams:
    """cuda, RWX store, 3 replicas, scheduling, API key, a mirror registry."""
    return ServingParams(
        owner=owner,
        namespace=NS,
        revision=REV,
        model="registry.example.com/acme/triage:v3",
        digest=DIGEST,
        device="cuda",
        image=default_image("0.10.0", "cuda"),
        store_claim_name=store_pvc_name(DM, REV),
        replicas=3,
        access_modes=("ReadWriteMany",),
        resources={"requests": {"memory": "3500Mi", "cpu": "1"}, "limits": {"memory": "4Gi"}},
        scheduling=Scheduling.model_validate(
            {
                "nodeSelector": {"node.kubernetes.io/instance-type": "g4dn.xlarge"},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
                ],
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "podAffinityTerm": {
                                    "topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": {"matchLabels": {"decisionmodel.io/name": DM}},
                                },
                            }
                        ]
                    }
                },
                "runtimeClassName": "nvidia",
            }
        ),
        api_key_secret_ref=SecretKeyRef(name="support-router-key", key="token"),
        apikey_checksum="sha256:5e884898da28047151d0e56f8dc62927",
        registry_url="https://registry.example.com",
    )


@pytest.fixture
def default_prefetch(owner: OwnerRef) -> PrefetchParams:
    return PrefetchParams(
        owner=owner,
        namespace=NS,
        revision=REV,
        model="laya:en",
        digest=DIGEST,
        digest_pinned=False,
        image=default_image(),
        store_claim_name=store_pvc_name(DM, REV),
        store_manifest_path=MANIFEST_PATH,
    )


@pytest.fixture
def mirror_prefetch(owner: OwnerRef) -> PrefetchParams:
    """A mirror registry and weights endpoint, a proxy, a download token, a pinned digest."""
    return PrefetchParams(
        owner=owner,
        namespace=NS,
        revision=REV,
        model="laya:en",
        digest=DIGEST,
        digest_pinned=True,
        image=default_image(),
        store_claim_name=store_pvc_name(DM, REV),
        store_manifest_path="manifests/mirror.corp_8080/library/laya/en",
        caching_timeout_seconds=900,
        registry_url="http://mirror.corp:8080",
        hf_endpoint="https://hf-mirror.internal",
        proxy=ProxyEnv(
            http_proxy="http://proxy.corp:3128",
            https_proxy="http://user:s3cret@proxy.corp:3128",
            no_proxy="10.96.0.0/12,.svc,.cluster.local",
        ),
        download_token_secret_ref=SecretKeyRef(name="my-hf-token", key="token"),
    )


@pytest.fixture
def store(owner: OwnerRef) -> StoreParams:
    return StoreParams(owner=owner, namespace=NS, revision=REV)


@pytest.fixture
def service(owner: OwnerRef) -> ServiceParams:
    return ServiceParams(owner=owner, namespace=NS, stable_revision=STABLE_REV)

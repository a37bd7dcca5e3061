"""Golden files: the full rendered objects for three typical revisions.

A change in a golden file is a change in what reaches the cluster; review it as such.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from decisionmodel.engine.params import (
    PrefetchParams,
    ServiceParams,
    ServingParams,
    StoreParams,
)
from decisionmodel.engine.render import (
    render_pdb,
    render_prefetch_job,
    render_service,
    render_serving_deployment,
    render_store_pvc,
)

Golden = Callable[[str, list[dict[str, Any]]], None]


def test_cpu_rwo_default(
    golden: Golden,
    cpu_serving: ServingParams,
    default_prefetch: PrefetchParams,
    store: StoreParams,
    service: ServiceParams,
) -> None:
    golden(
        "cpu_rwo_default",
        [
            render_store_pvc(store),
            render_prefetch_job(default_prefetch),
            render_serving_deployment(cpu_serving),
            render_service(service),
        ],
    )


def test_cuda_rwx_replicas3(golden: Golden, cuda_serving: ServingParams) -> None:
    store = StoreParams(
        owner=cuda_serving.owner,
        namespace=cuda_serving.namespace,
        revision=cuda_serving.revision,
        store_size="4Gi",
        access_modes=("ReadWriteMany",),
        storage_class_name="efs-rwx",
    )
    golden(
        "cuda_rwx_replicas3",
        [
            render_store_pvc(store),
            render_serving_deployment(cuda_serving),
            render_pdb(cuda_serving),
        ],
    )


def test_prefetch_mirror_proxy_token(golden: Golden, mirror_prefetch: PrefetchParams) -> None:
    golden("prefetch_mirror_proxy_token", [render_prefetch_job(mirror_prefetch)])


def _reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reverse_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list | tuple):
        return [_reverse_keys(v) for v in value]
    return value


def test_rendering_is_deterministic_in_key_order(cuda_serving: ServingParams) -> None:
    # json.dumps keeps insertion order, so equal strings mean equal key order too.
    first = json.dumps(render_serving_deployment(cuda_serving))
    assert json.dumps(render_serving_deployment(cuda_serving)) == first
    # The same passthrough fragments built in the reverse key order render identically.
    sched = cuda_serving.scheduling
    shuffled = cuda_serving.model_copy(
        update={
            "resources": _reverse_keys(cuda_serving.resources),
            "scheduling": sched.model_copy(
                update={
                    "node_selector": _reverse_keys(sched.node_selector),
                    "affinity": _reverse_keys(sched.affinity),
                    "tolerations": tuple(_reverse_keys(list(sched.tolerations))),
                }
            ),
        }
    )
    assert json.dumps(shuffled.resources) != json.dumps(cuda_serving.resources)
    assert json.dumps(render_serving_deployment(shuffled)) == first

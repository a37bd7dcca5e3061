"""Inspect one model-ready Pod (``/api/ps``) and judge its readiness gate.

Shared by the steps that re-check Pods after the warmup: promote's re-check of a held
candidate, and the post-promotion watch of a new stable. Both ask the same question (does this
Pod still serve the recorded digest, on the recorded device, pinned?) and must judge it alike.
"""

from __future__ import annotations

from typing import Any

from decisionmodel.engine.runtime_client import GateVerdict, RuntimeClient, verdict
from decisionmodel.errors import ProbeError
from decisionmodel.rollout.contracts import RevisionRecord
from kube.pod_gate import pod_ip


async def inspect_pod(
    pod: dict[str, Any],
    model: str,
    record: RevisionRecord,
    api_key: str | None,
    default_registry: str | None,
) -> GateVerdict:
    """The gate verdict for ``pod`` serving ``record`` (``model`` as the spec names it). A
    runtime that does not answer is a ProbeError verdict, never an exception: the caller counts
    Pods, it does not retry them."""
    ip = pod_ip(pod)
    if ip is None:
        return verdict(record.digest, record.device, None, ProbeError("the Pod has no IP"))
    client = RuntimeClient.for_pod(ip, api_key=api_key, default_registry=default_registry)
    try:
        async with client:
            entry = await client.inspect(model)
    except ProbeError as err:
        return verdict(record.digest, record.device, None, err)
    return verdict(record.digest, record.device, entry, None)

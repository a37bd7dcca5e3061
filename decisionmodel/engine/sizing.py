"""Built-in resource requests per measured ``name:tag`` (seed 000, spike 002).

A serving Pod without requests is BestEffort: the first evicted under memory pressure, and
scheduled where it may not fit. So a revision whose ``spec.resources`` sets no ``requests`` gets
the measured ones (memory: the cgroup ``anon`` of the loaded model, CPU, F32, re-measured
2026-10-02, plus a margin for the runtime itself), or a generic default for a model not in the
table. ``spec.resources.requests`` overrides them whole.

The defaults are recorded in the revision (``status.*Revision.resources``) and never in its hash
(the hash is over ``spec.resources``): a running stable keeps the requests it was created with,
and upgrading the operator with a new table starts no rollout (seed 001, "Engine resource
defaults only apply to a new revision").
"""

from __future__ import annotations

from typing import Any, Final

from decisionmodel.engine.names import parse_model_name
from decisionmodel.errors import InvalidModelName

# Measured anon memory: laya:en 3.09 GiB, laya:multilingual 1.85 GiB, nli 3.62 GiB, gliclass
# 2.42 GiB; each + 256 Mi for the runtime, rounded up to 64 Mi.
MEASURED_REQUESTS: Final[dict[str, dict[str, str]]] = {
    "laya:en": {"cpu": "1", "memory": "3456Mi"},
    "laya:multilingual": {"cpu": "1", "memory": "2176Mi"},
    "nli:latest": {"cpu": "1", "memory": "3968Mi"},
    "gliclass:latest": {"cpu": "1", "memory": "2752Mi"},
}
# A model not measured yet: enough for a small model, so the Pod is Burstable, not BestEffort.
DEFAULT_REQUESTS: Final[dict[str, str]] = {"cpu": "500m", "memory": "2Gi"}


def default_requests(model: str) -> dict[str, str]:
    """The built-in requests of ``model`` (any accepted form of the name)."""
    try:
        ref = parse_model_name(model)
    except InvalidModelName:
        return dict(DEFAULT_REQUESTS)
    return dict(MEASURED_REQUESTS.get(f"{ref.model}:{ref.tag}", DEFAULT_REQUESTS))


def effective_resources(model: str, resources: dict[str, Any]) -> dict[str, Any]:
    """``resources`` with the built-in requests when it sets none (limits and claims kept)."""
    if resources.get("requests"):
        return dict(resources)
    return {**resources, "requests": default_requests(model)}

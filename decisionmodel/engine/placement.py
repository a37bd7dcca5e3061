"""The placement guard: where a DecisionModel may put its Pods, as the operator allows it.

Tolerations, node selectors, affinity, runtimeClassName and priorityClassName reach the Pods
that dmrollout creates with dmrollout's rights; without a wall, a DecisionModel editor could
tolerate the control-plane taint and run Pods on control-plane nodes (issue 12, point 3). The
operator's allow-lists (``decisionmodel.rollout.settings``, ``DMROLLOUT_ALLOWED_*``) say what
passes;
``check_placement`` returns one refusal per field outside them, each naming the field, the
refused value and the setting that would allow it.

Key lists hold exact keys and prefix patterns ending in ``*`` (``*`` alone: any key). The
protected keys below are never matched by a pattern, only by an exact entry: tolerating or
selecting them reaches control-plane, cordoned or uninitialised nodes, which a model server
never needs. The empty toleration key (operator Exists: tolerates every taint, control-plane
included) is protected the same way and allowed only by an exact ``""`` entry.

The controller checks the live spec before it starts a rollout (the refusal shows within one
reconcile and nothing starts); the worker checks the workflow input again before it creates
anything (defence in depth: a workflow input is not trusted).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from decisionmodel.errors import PlacementRefused

CONTROL_PLANE_KEYS: Final = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
)
# Taints that keep ordinary Pods off nodes reserved for the cluster itself or not fit to run
# them: control-plane, cordoned (a drain in progress), not yet initialised by the cloud
# provider, reserved for critical add-ons (EKS, k3s), and "" (a toleration of every taint).
PROTECTED_TOLERATION_KEYS: Final = frozenset(
    {
        *CONTROL_PLANE_KEYS,
        "node.kubernetes.io/unschedulable",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "CriticalAddonsOnly",
        "",
    }
)
PROTECTED_NODE_LABEL_KEYS: Final = frozenset(CONTROL_PLANE_KEYS)
DEFAULT_MAX_REPLICAS: Final = 10
# Each refusal is one line of the condition message; a spec with many is summarised.
MAX_REFUSALS_SHOWN: Final = 5

# The settings a refusal names as its fix: environment variable and Helm value.
SETTING_TOLERATIONS: Final = (
    "DMROLLOUT_ALLOWED_TOLERATION_KEYS (Helm placement.allowedTolerationKeys)"
)
SETTING_NODE_SELECTOR: Final = (
    "DMROLLOUT_ALLOWED_NODE_SELECTOR_KEYS (Helm placement.allowedNodeSelectorKeys)"
)
SETTING_AFFINITY: Final = "DMROLLOUT_ALLOWED_AFFINITY_KEYS (Helm placement.allowedAffinityKeys)"
SETTING_RUNTIME_CLASS: Final = (
    "DMROLLOUT_ALLOWED_RUNTIME_CLASSES (Helm placement.allowedRuntimeClasses)"
)
SETTING_PRIORITY_CLASS: Final = (
    "DMROLLOUT_ALLOWED_PRIORITY_CLASSES (Helm placement.allowedPriorityClasses)"
)
SETTING_MAX_REPLICAS: Final = "DMROLLOUT_MAX_REPLICAS (Helm placement.maxReplicas)"


class PlacementPolicy(BaseModel):
    """The operator's allow-lists (from ``RolloutSettings.placement_policy``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    toleration_keys: tuple[str, ...] = ("*",)
    node_selector_keys: tuple[str, ...] = ("*",)
    affinity_keys: tuple[str, ...] = ("*",)
    runtime_classes: tuple[str, ...] = ()
    priority_classes: tuple[str, ...] = ()
    max_replicas: int = Field(default=DEFAULT_MAX_REPLICAS, ge=1)
    # False (the Passthrough profile, the operator's default): nothing is refused.
    enforced: bool = True


@dataclass(frozen=True)
class Refusal:
    """One refused field: its path in the DecisionModel, the value, and the allowing setting."""

    field: str
    value: str
    setting: str
    why: str = ""

    def message(self) -> str:
        why = f" ({self.why})" if self.why else ""
        return (
            f"{self.field} {self.value!r} is refused by the operator's placement policy{why}: "
            f"remove it from the spec, or have the operator allow it in {self.setting}"
        )


def key_allowed(key: str, allowed: Sequence[str], protected: frozenset[str]) -> bool:
    """Exact entries allow any key; patterns (``*``, ``prefix*``) only unprotected ones."""
    if key in allowed:
        return True
    if key in protected:
        return False
    return any(p.endswith("*") and key.startswith(p[:-1]) for p in allowed)


def _why_key(key: str) -> str:
    if key == "":
        return "an empty key with operator Exists tolerates every taint, control-plane included"
    if key in CONTROL_PLANE_KEYS:
        return "it reaches control-plane nodes"
    if key in PROTECTED_TOLERATION_KEYS:
        return "it reaches nodes reserved for the cluster itself"
    return ""


def _dicts(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    # Passthrough fragments: anything not shaped as a list of objects is left to the API
    # server's Pod validation, which refuses it before a Pod exists.
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                yield i, item


def _term_keys(term: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    for part in ("matchExpressions", "matchFields"):
        for j, req in _dicts(term.get(part)):
            yield f"{path}.{part}[{j}].key", str(req.get("key", ""))


def affinity_keys(affinity: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    """(field path, node label key) of every node-affinity requirement. Pod (anti-)affinity
    selects Pods, not nodes: it cannot get a Pod past a taint, which the toleration list
    guards."""
    node = affinity.get("nodeAffinity")
    if not isinstance(node, Mapping):
        return
    base = f"{path}.nodeAffinity"
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, Mapping):
        for i, term in _dicts(required.get("nodeSelectorTerms")):
            where = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
            yield from _term_keys(term, where)
    for i, pref in _dicts(node.get("preferredDuringSchedulingIgnoredDuringExecution")):
        preference = pref.get("preference")
        if isinstance(preference, Mapping):
            where = f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"
            yield from _term_keys(preference, where)


def check_placement(
    scheduling: Mapping[str, Any],
    replicas: int | None,
    policy: PlacementPolicy,
    path: str = "spec.scheduling",
) -> list[Refusal]:
    """Every refused field of ``scheduling`` (wire form, camelCase) and ``replicas``."""
    refusals: list[Refusal] = []
    if not policy.enforced:
        return refusals
    for i, tol in _dicts(scheduling.get("tolerations")):
        key = str(tol.get("key") or "")
        if not key_allowed(key, policy.toleration_keys, PROTECTED_TOLERATION_KEYS):
            field = f"{path}.tolerations[{i}].key"
            refusals.append(Refusal(field, key, SETTING_TOLERATIONS, _why_key(key)))
    selector = scheduling.get("nodeSelector")
    for key in sorted(selector) if isinstance(selector, Mapping) else []:
        if not key_allowed(key, policy.node_selector_keys, PROTECTED_NODE_LABEL_KEYS):
            field = f"{path}.nodeSelector[{key}]"
            refusals.append(Refusal(field, key, SETTING_NODE_SELECTOR, _why_key(key)))
    affinity = scheduling.get("affinity")
    if isinstance(affinity, Mapping):
        for field, key in affinity_keys(affinity, f"{path}.affinity"):
            if not key_allowed(key, policy.affinity_keys, PROTECTED_NODE_LABEL_KEYS):
                refusals.append(Refusal(field, key, SETTING_AFFINITY, _why_key(key)))
    for name, allowed, setting in (
        ("runtimeClassName", policy.runtime_classes, SETTING_RUNTIME_CLASS),
        ("priorityClassName", policy.priority_classes, SETTING_PRIORITY_CLASS),
    ):
        value = scheduling.get(name)
        if value and value not in allowed:
            refusals.append(Refusal(f"{path}.{name}", str(value), setting))
    if replicas is not None and replicas > policy.max_replicas:
        refusals.append(
            Refusal(
                "spec.replicas",
                str(replicas),
                SETTING_MAX_REPLICAS,
                f"the maximum is {policy.max_replicas}",
            )
        )
    return refusals


def refusal_message(refusals: Sequence[Refusal]) -> str:
    """One message for a condition, an Event or an error: the first few refusals."""
    shown = "; ".join(r.message() for r in refusals[:MAX_REFUSALS_SHOWN])
    more = len(refusals) - MAX_REFUSALS_SHOWN
    return shown + (f"; and {more} more refused field(s)" if more > 0 else "")


def guard_placement(
    scheduling: Mapping[str, Any], replicas: int | None, policy: PlacementPolicy
) -> None:
    """Raise PlacementRefused (permanent) when anything is refused."""
    refusals = check_placement(scheduling, replicas, policy)
    if refusals:
        raise PlacementRefused(refusal_message(refusals))

"""The placement guard's pure check (decisionmodel.engine.placement): what the default policy
refuses,
what an operator's allow-list changes, and what a refusal says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from decisionmodel.engine.placement import (
    PlacementPolicy,
    check_placement,
    guard_placement,
    key_allowed,
    refusal_message,
)
from decisionmodel.errors import PlacementRefused
from decisionmodel.rollout.settings import RolloutSettings

DEFAULT = PlacementPolicy()


def tol(key: str | None, operator: str = "Exists") -> dict[str, Any]:
    t: dict[str, Any] = {"operator": operator, "effect": "NoSchedule"}
    if key is not None:
        t["key"] = key
    return t


def fields(scheduling: dict[str, Any], replicas: int | None = None, **policy: Any) -> list[str]:
    return [r.field for r in check_placement(scheduling, replicas, PlacementPolicy(**policy))]


@pytest.mark.parametrize(
    "key",
    [
        "node-role.kubernetes.io/control-plane",
        "node-role.kubernetes.io/master",
        "node.kubernetes.io/unschedulable",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "CriticalAddonsOnly",
        "",
        None,  # no key with Exists: tolerates every taint
    ],
)
def test_the_default_refuses_protected_taints_and_the_match_all_toleration(
    key: str | None,
) -> None:
    assert fields({"tolerations": [tol(key)]}) == ["spec.scheduling.tolerations[0].key"]


@pytest.mark.parametrize("key", ["nvidia.com/gpu", "dedicated", "cloud.google.com/gke-spot"])
def test_the_default_allows_ordinary_taints(key: str) -> None:
    assert fields({"tolerations": [tol(key)]}) == []


def test_patterns_never_match_a_protected_key_but_an_exact_entry_does() -> None:
    cp = "node-role.kubernetes.io/control-plane"
    assert not key_allowed(cp, ["node-role.kubernetes.io/*"], frozenset({cp}))
    assert key_allowed("node-role.kubernetes.io/gpu", ["node-role.kubernetes.io/*"], frozenset())
    assert fields({"tolerations": [tol(cp)]}, toleration_keys=("*", cp)) == []
    assert fields({"tolerations": [tol(None)]}, toleration_keys=("*", "")) == []


def test_a_strict_allow_list_refuses_every_other_key_with_its_index() -> None:
    scheduling = {"tolerations": [tol("dedicated"), tol("spot"), tol("example.com/pool")]}
    got = fields(scheduling, toleration_keys=("dedicated", "example.com/*"))
    assert got == ["spec.scheduling.tolerations[1].key"]


def test_node_selector_and_node_affinity_keys() -> None:
    cp = "node-role.kubernetes.io/control-plane"
    assert fields({"nodeSelector": {cp: "", "zone": "a"}}) == [
        f"spec.scheduling.nodeSelector[{cp}]"
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": cp, "operator": "Exists"}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                        ]
                    },
                }
            ],
        },
        # Pod (anti-)affinity selects Pods, not nodes: not key-checked.
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
    }
    base = "spec.scheduling.affinity.nodeAffinity"
    assert fields({"affinity": affinity}) == [
        f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]"
        ".matchExpressions[0].key"
    ]
    assert fields({"affinity": affinity}, affinity_keys=("zone",)) == [
        f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]"
        ".matchExpressions[0].key",
        f"{base}.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields[0].key",
    ]
    assert fields({"nodeSelector": {"zone": "a"}}, node_selector_keys=("disk",)) == [
        "spec.scheduling.nodeSelector[zone]"
    ]


def test_runtime_and_priority_classes_pass_only_when_listed() -> None:
    scheduling = {"runtimeClassName": "nvidia", "priorityClassName": "system-cluster-critical"}
    assert fields(scheduling) == [
        "spec.scheduling.runtimeClassName",
        "spec.scheduling.priorityClassName",
    ]
    assert (
        fields(
            scheduling,
            runtime_classes=("nvidia",),
            priority_classes=("system-cluster-critical",),
        )
        == []
    )


def test_replicas_above_the_maximum() -> None:
    assert fields({}, 10) == []
    assert fields({}, 11) == ["spec.replicas"]
    assert fields({}, 3, max_replicas=2) == ["spec.replicas"]
    assert fields({}, None, max_replicas=1) == []


def test_a_refusal_names_field_value_and_the_setting_that_allows_it() -> None:
    cp = "node-role.kubernetes.io/control-plane"
    [refusal] = check_placement({"tolerations": [tol(cp)]}, None, DEFAULT)
    text = refusal.message()
    assert "spec.scheduling.tolerations[0].key" in text and repr(cp) in text
    assert "control-plane" in text
    assert "DMROLLOUT_ALLOWED_TOLERATION_KEYS" in text and "placement.allowedTolerationKeys" in text
    [replicas] = check_placement({}, 12, DEFAULT)
    assert (
        "spec.replicas '12'" in replicas.message()
        and "DMROLLOUT_MAX_REPLICAS" in replicas.message()
    )


def test_many_refusals_are_summarised() -> None:
    refusals = check_placement({"tolerations": [tol(None)] * 8}, None, DEFAULT)
    assert len(refusals) == 8
    message = refusal_message(refusals)
    assert "tolerations[4]" in message and "tolerations[5]" not in message
    assert message.endswith("and 3 more refused field(s)")


def test_guard_raises_a_permanent_placement_refused() -> None:
    guard_placement({"tolerations": [tol("dedicated")]}, 2, DEFAULT)
    with pytest.raises(PlacementRefused) as excinfo:
        guard_placement({"runtimeClassName": "kata"}, None, DEFAULT)
    assert excinfo.value.permanent and excinfo.value.reason == "PlacementRefused"
    assert "spec.scheduling.runtimeClassName 'kata'" in str(excinfo.value)


def test_malformed_passthrough_is_left_to_the_api_server() -> None:
    odd: dict[str, Any] = {"tolerations": ["x", 3], "affinity": {"nodeAffinity": []}}
    assert fields(odd) == []


def test_the_settings_read_the_policy_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DMROLLOUT_ALLOWED_TOLERATION_KEYS", json.dumps(["dedicated"]))
    monkeypatch.setenv("DMROLLOUT_ALLOWED_RUNTIME_CLASSES", json.dumps(["nvidia"]))
    monkeypatch.setenv("DMROLLOUT_MAX_REPLICAS", "4")
    monkeypatch.setenv("DMROLLOUT_SCRATCH_SIZE_LIMIT", "512Mi")
    settings = RolloutSettings()
    policy = settings.placement_policy()
    assert policy.toleration_keys == ("dedicated",)
    assert policy.runtime_classes == ("nvidia",)
    assert policy.node_selector_keys == ("*",) and policy.priority_classes == ()
    assert policy.max_replicas == 4 and settings.scratch_size_limit == "512Mi"
    with pytest.raises(ValueError):
        RolloutSettings(scratch_size_limit="lots")

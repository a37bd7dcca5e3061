"""The admission policies ship alike in deploy/ and the chart, and name the accounts the
Deployments run as (behaviour against the real API server: tests/integration/
test_admission_policy.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness.shipped import kustomize, render_chart

KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def _policies(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objs if o["kind"] in KINDS}


def _accounts(objs: list[dict[str, Any]]) -> set[str]:
    return {
        f"system:serviceaccount:{o['metadata']['namespace']}:"
        + o["spec"]["template"]["spec"]["serviceAccountName"]
        for o in objs
        if o["kind"] == "Deployment"
    }


@pytest.mark.parametrize("install", ["deploy", "chart"])
def test_policies_bind_enforced_and_match_exactly_dmrollouts_accounts(
    install: str, tmp_path: Path
) -> None:
    objs = kustomize("deploy") if install == "deploy" else render_chart(tmp=tmp_path)
    found = _policies(objs)
    policies = [o for o in found.values() if o["kind"] == KINDS[0]]
    bindings = [o for o in found.values() if o["kind"] == KINDS[1]]
    assert len(policies) == 3
    assert {b["spec"]["policyName"] for b in bindings} == {p["metadata"]["name"] for p in policies}
    for b in bindings:
        assert b["spec"]["validationActions"] == ["Deny"]
    for p in policies:
        assert p["spec"]["failurePolicy"] == "Fail"
        (condition,) = p["spec"]["matchConditions"]
        named = {
            a.strip(" '\n") for a in condition["expression"].split("[")[1].split("]")[0].split(",")
        }
        assert named == _accounts(objs)


def test_chart_and_deploy_policies_are_the_same_rules(tmp_path: Path) -> None:
    deploy = _policies(kustomize("deploy"))
    chart = _policies(render_chart(tmp=tmp_path, release="dmrollout"))

    def rules(objs: dict[str, dict[str, Any]]) -> list[str]:
        return sorted(
            json.dumps(
                {k: v for k, v in o["spec"].items() if k != "matchConditions"}, sort_keys=True
            )
            for o in objs.values()
            if o["kind"] == KINDS[0]
        )

    assert rules(deploy) == rules(chart)


def test_chart_policy_can_be_turned_off(tmp_path: Path) -> None:
    objs = render_chart("--set", "admissionPolicy.enabled=false", tmp=tmp_path)
    assert not _policies(objs)

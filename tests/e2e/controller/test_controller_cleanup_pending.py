"""A cleanup that keeps failing is visible on the DecisionModel, not only in Temporal (issue 22,
point 7): a rolled-back candidate whose Deployment cannot be deleted (an admission policy refuses
the delete) shows CleanupPending=True with the objects and the workflow, the controller exports
decisionmodel_cleanup_pending 1; once the policy is gone the Deployment goes and the condition
and the series clear by themselves."""

from __future__ import annotations

import subprocess
from typing import Any

from harness.helpers import eventually
from harness.rollout_harness import ControllerProcess, RolloutHarness, golden_jsonl, put_model

DM = "stuckclean"


def deny_deletes(h: RolloutHarness, policy: str) -> list[dict[str, Any]]:
    """A policy refusing DELETE of this DecisionModel's Deployments in the test's namespace."""
    label = "decisionmodel.io/name"
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": h.namespace}
                    },
                    "resourceRules": [
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "resources": ["deployments"],
                            "operations": ["DELETE"],
                        }
                    ],
                },
                "validations": [
                    {
                        "expression": f"!has(oldObject.metadata.labels) || "
                        f"!('{label}' in oldObject.metadata.labels) || "
                        f"oldObject.metadata.labels['{label}'] != '{DM}'",
                        "message": "deletes of this DecisionModel's Deployments are refused",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": policy},
            "spec": {"policyName": policy, "validationActions": ["Deny"]},
        },
    ]


def refused(h: RolloutHarness, deployment: str) -> bool:
    """The policy is in force: a server-side dry-run delete goes through admission."""
    try:
        h.kubectl("delete", "deployment", deployment, "--dry-run=server")
    except subprocess.CalledProcessError as e:
        return "refused" in (e.stderr or "") + (e.stdout or "")
    return False


def cleanup_pending(h: RolloutHarness) -> dict[str, Any] | None:
    for c in h.status(DM).get("conditions") or []:
        if c["type"] == "CleanupPending":
            return dict(c)
    return None


def series(controller: ControllerProcess, namespace: str) -> float | None:
    for line in controller.metrics().splitlines():
        labels = (f'name="{DM}"', f'namespace="{namespace}"')
        if line.startswith("decisionmodel_cleanup_pending{") and all(x in line for x in labels):
            return float(line.rsplit(" ", 1)[1])
    return None


async def test_a_refused_cleanup_shows_on_the_decision_model_and_clears_after_the_fix(
    ctl: RolloutHarness, controller: ControllerProcess
) -> None:
    put_model("laya", "weak", accuracy=0.30, revision="weak")
    ctl.golden_configmap("golden-clean", golden_jsonl(20))
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden-clean", "key": "cases.jsonl"}},
        "minAccuracy": "0.80",
    }
    ctl.create_dm(DM, {"model": "laya:en", "rollout": {"evaluation": evaluation}})
    await eventually(lambda: ctl.status(DM).get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status(DM)["stableRevision"]["hash"]
    policy = f"deny-delete-{ctl.namespace}"
    objects = deny_deletes(ctl, policy)
    for obj in objects:
        ctl.cluster.apply(obj)
    try:
        await eventually(lambda: refused(ctl, f"{DM}-{stable}"), 60, what="policy in force")
        ctl.update_spec(DM, {"model": "laya:weak"})
        await eventually(lambda: cleanup_pending(ctl) is not None, 120, what="CleanupPending")
        pending = cleanup_pending(ctl)
        assert pending is not None
        assert (pending["status"], pending["reason"]) == ("True", "CleanupPending"), pending
        candidate = ctl.status(DM)["failedRevision"]["hash"]
        assert f"Deployment/{DM}-{candidate}" in pending["message"], pending
        assert f"rollout/{ctl.namespace}/{DM}/" in pending["message"], pending
        assert ctl.status(DM)["phase"] == "RolledBack"
        assert ctl.get("Deployment", f"{DM}-{candidate}") is not None  # still there: refused
        await eventually(lambda: series(controller, ctl.namespace) == 1.0, 60, what="series 1")
    finally:
        for obj in reversed(objects):
            kind, name = obj["kind"].lower(), obj["metadata"]["name"]
            ctl.kubectl("delete", kind, name, "--ignore-not-found")
    await eventually(
        lambda: (cleanup_pending(ctl) or {}).get("reason") == "CleanupDone", 120, what="cleared"
    )
    await eventually(
        lambda: ctl.get("Deployment", f"{DM}-{candidate}") is None, 60, what="candidate deleted"
    )
    assert ctl.get("Deployment", f"{DM}-{stable}") is not None  # the stable was never touched
    await eventually(lambda: series(controller, ctl.namespace) == 0.0, 60, what="series 0")

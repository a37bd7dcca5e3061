"""A guard that holds a rollout shows at once as a condition naming the fix, and the rollout
goes on by itself soon after the fix, well before the phase deadline (issue 11, point 3)."""

from __future__ import annotations

import json

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness, golden_jsonl, put_model

# The fix must take effect within this, far below the default phase deadlines (10 and 30 min):
# the step is retried at most 30 s apart.
AFTER_FIX = 60


def secret(h: RolloutHarness, name: str, data: dict[str, str], labels: dict[str, str]) -> None:
    h.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": h.namespace, "labels": labels},
            "stringData": data,
        }
    )


def warning_reasons(h: RolloutHarness) -> list[str]:
    events = json.loads(h.kubectl("get", "events", "-o", "json"))["items"]
    return [e.get("reason", "") for e in events if e.get("type") == "Warning"]


async def test_an_unlabelled_api_key_secret_shows_at_once_and_goes_on_after_the_label(
    ctl: RolloutHarness,
) -> None:
    secret(ctl, "key", {"token": "k-123"}, {})
    auth = {"apiKeySecretRef": {"name": "key", "key": "token"}}
    ctl.create_dm("unlabelled", {"model": "laya:en", "auth": auth})
    shown = await eventually(
        lambda: ctl.held("unlabelled", "Promoted", "SecretNotAllowed"), 60, what="condition"
    )
    assert 'decisionmodel.io/api-key: "true"' in shown["message"] or "api-key" in shown["message"]
    assert "k-123" not in json.dumps(ctl.status("unlabelled"))
    assert "SecretNotAllowed" in warning_reasons(ctl)
    ctl.kubectl("label", "secret", "key", "decisionmodel.io/api-key=true")
    await eventually(
        lambda: ctl.status("unlabelled").get("phase") == "Ready", AFTER_FIX + 30, what="Ready"
    )


async def test_an_unlabelled_dataset_secret_holds_evaluation_then_goes_on(
    ctl: RolloutHarness,
) -> None:
    put_model("laya", "ds2", accuracy=0.95, revision="ds2")
    secret(ctl, "golden", {"cases.jsonl": golden_jsonl(10)}, {})
    evaluation = {
        "datasetRef": {"secretRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.50",
    }
    ctl.create_dm("dataset", {"model": "laya:en"})
    await eventually(lambda: ctl.status("dataset").get("phase") == "Ready", 90, what="Ready")
    ctl.update_spec("dataset", {"model": "laya:ds2", "rollout": {"evaluation": evaluation}})
    shown = await eventually(
        lambda: ctl.held("dataset", "Evaluated", "SecretNotAllowed"), 90, what="Evaluated"
    )
    assert "eval-dataset" in shown["message"]
    assert ctl.status("dataset")["phase"] == "Evaluating"
    ctl.kubectl("label", "secret", "golden", "decisionmodel.io/eval-dataset=true")
    await eventually(
        lambda: (ctl.status("dataset").get("stableRevision") or {}).get("model") == "laya:ds2",
        AFTER_FIX + 30,
        what="promoted after the label",
    )


async def test_a_foreign_object_is_a_resource_conflict_until_it_is_removed(
    ctl: RolloutHarness,
) -> None:
    from harness.rollout_harness import registry_digest

    from controller.reconciler.dispatch import DispatchSettings, desired_revision
    from decisionmodel.api import DecisionModel

    digest = registry_digest("laya", "en")
    spec = {"model": "laya:en", "digest": digest}
    probe = DecisionModel.from_k8s(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModel",
            "metadata": {"name": "foreign", "namespace": ctl.namespace},
            "spec": spec,
        }
    )
    revision = desired_revision(probe, DispatchSettings()).requested_hash
    ctl.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"foreign-store-{revision}", "namespace": ctl.namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    ctl.create_dm("foreign", spec)
    shown = await eventually(
        lambda: ctl.held("foreign", "Cached", "ResourceConflict"), 90, what="conflict shown"
    )
    assert f"foreign-store-{revision}" in shown["message"] and "remove" in shown["message"]
    ctl.kubectl("delete", "pvc", f"foreign-store-{revision}", "--wait=false")
    await eventually(
        lambda: ctl.status("foreign").get("phase") == "Ready", AFTER_FIX + 60, what="Ready"
    )

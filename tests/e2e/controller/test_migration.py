"""docs/migration.md followed on the local cluster (issue 34): reference-made DecisionModels in two
namespaces, none of them the release's, are all managed, keep serving and do not roll.

"Reference-made" means what the Go reference leaves behind: the stable's objects named by the
reference's own revision hash (decisionmodel.rollout.reference_identity, checked against known
answers of its code), no dmrollout label on them, a status of the reference's shape (no
status.rollout, no dmrollout-only condition, placement recorded as its hash or "none", no field
manager of dmrollout's, the readiness gate set). They are made here from a revision dmrollout
rolled out first, renamed to the reference's hash: one spec with an unquoted quantity (cpu: 1),
one with scheduling, where the two hashes differ.

The controller then runs as the guide installs it: the watched namespaces are the ones the chart
renders from the guide's values block (every namespace there, which on this shared cluster
stands for the two namespaces of this test).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.helpers import eventually
from harness.rollout_harness import ControllerProcess, RolloutHarness, WorkerProcess
from harness.shipped import ROOT, render_chart
from harness.supervised import free_port
from temporalio.client import Client
from test_cli_verbs import run
from test_controller import phase, workflows_of

from decisionmodel.rollout.contracts import RevisionIdentity
from decisionmodel.rollout.reference_identity import reference_placement, reference_revision_hash
from kube.client import CONTROLLER_FIELD_MANAGER
from localenv.cluster import LocalCluster
from localenv.env import LocalEnv

MANAGED_BY = "app.kubernetes.io/managed-by"
DM = "legacy"
SPECS: dict[str, dict[str, Any]] = {
    # An unquoted quantity: the reference hashes it as "1", dmrollout as the number 1.
    "a": {"model": "laya:en", "resources": {"requests": {"cpu": 1, "memory": "64Mi"}}},
    # Scheduling: the reference hashes its fields in Go's declaration order.
    "b": {
        "model": "laya:en",
        "scheduling": {
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
        },
    },
}
DMROLLOUT_ONLY_CONDITIONS = {"TemporalReachable", "Stalled", "Reconciling", "CleanupPending"}


def guide_watch_scope(tmp: Path) -> list[str]:
    """DMROLLOUT_CONTROLLER_WATCH_NAMESPACES of the controller the guide installs."""
    steps = (ROOT / "docs" / "migration.md").read_text().split("## What happens")[0]
    block = re.search(r"migration-values.*?```yaml\n(.*?)```", steps, re.S)
    values = tmp / "values.yaml"
    values.write_text(block[1] if block else "{}\n")
    objs = render_chart("-f", str(values), tmp=tmp, release="dmrollout")
    (deployment,) = [
        o
        for o in objs
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "dmrollout-controller"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    scope: list[str] = json.loads(env["DMROLLOUT_CONTROLLER_WATCH_NAMESPACES"])
    return scope


@pytest.fixture
def harnesses(
    crd: LocalCluster, temporal_client: Client, ctl_queue: str
) -> dict[str, RolloutHarness]:
    return {k: RolloutHarness(crd, temporal_client, ctl_queue) for k in SPECS}


@pytest.fixture
def controllers(
    crd: LocalCluster,
    ctl_worker: WorkerProcess,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
) -> Iterator[list[ControllerProcess]]:
    started: list[ControllerProcess] = []
    yield started
    for c in started:
        c.stop()


def start_controller(
    crd: LocalCluster, env: LocalEnv, queue: str, logs: Path, namespaces: list[str], n: int
) -> ControllerProcess:
    c = ControllerProcess(
        crd,
        env.temporal.address,
        queue,
        logs,
        health_port=free_port(),
        identity=f"migration-{n}",
        extra_args=("--watch-namespaces", ",".join(namespaces)),
        # Its own Lease: the e2e session's other controller elects on the default one.
        extra_env={
            "DMROLLOUT_CONTROLLER_LEASE_NAME": "dmrollout-migration",
            "DMROLLOUT_CONTROLLER_REINSPECT_SECONDS": "5",
        },
    )
    c.start()
    return c


def reference_hash(h: RolloutHarness, spec: dict[str, Any]) -> str:
    """The hash the reference records for this DecisionModel's stable revision."""
    stable = h.status(DM)["stableRevision"]
    revision = RevisionIdentity(
        model=stable["model"],
        digest=stable["digest"],
        device=stable["device"],
        image=stable["image"],
        resources=spec.get("resources", {}),
        scheduling=spec.get("scheduling", {}),
    )
    return reference_revision_hash(revision)


def copied(obj: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``obj`` as a new object of revision ``new``: every mention of ``old`` (its name, labels,
    claim, selector) renamed, server-set fields and dmrollout's label dropped."""
    out: dict[str, Any] = json.loads(json.dumps(obj).replace(old, new))
    meta = out["metadata"]
    for field in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
        meta.pop(field, None)
    meta.pop("finalizers", None)
    meta.get("labels", {}).pop(MANAGED_BY, None)
    annotations = meta.get("annotations", {})
    for key in list(annotations):
        if key.startswith(("pv.kubernetes.io/", "volume.", "deployment.kubernetes.io/")):
            del annotations[key]
    out.pop("status", None)
    spec = out["spec"]
    spec.pop("volumeName", None)
    if out["kind"] == "Job":  # the Job controller sets its own selector and Pod labels
        spec.pop("selector", None)
        labels = spec["template"]["metadata"]["labels"]
        for key in list(labels):
            if "controller-uid" in key or "job-name" in key:
                del labels[key]
    return out


async def as_the_reference_made_it(h: RolloutHarness, spec: dict[str, Any]) -> str:
    """Renames the stable's objects to the reference's hash, as the reference would have named
    them, and writes the status the reference writes. Returns the reference hash."""
    old = h.status(DM)["stableRevision"]["hash"]
    new = reference_hash(h, spec)
    assert new != old, "the two hashes agree for this spec: nothing to show"
    pvc, job = h.get("pvc", f"{DM}-store-{old}"), h.get("job", f"{DM}-pf-{old}")
    assert pvc is not None and job is not None
    h.kubectl("create", "-f", "-", input=json.dumps(copied(pvc, old, new)))
    h.kubectl("create", "-f", "-", input=json.dumps(copied(job, old, new)))
    await eventually(
        lambda: (h.get("job", f"{DM}-pf-{new}") or {}).get("status", {}).get("succeeded"),
        90,
        what="the reference's prefetch",
    )
    deployment = h.get("deployment", f"{DM}-{old}")
    assert deployment is not None
    h.kubectl("create", "-f", "-", input=json.dumps(copied(deployment, old, new)))
    h.kubectl("label", "service", DM, f"{MANAGED_BY}-")
    selector = {"spec": {"selector": {"decisionmodel.io/revision": new}}}
    h.kubectl("patch", "service", DM, "--type=merge", "-p", json.dumps(selector))
    for kind, name in (("deployment", f"{DM}-{old}"), ("job", f"{DM}-pf-{old}")):
        h.kubectl("delete", kind, name, "--wait=false")
    h.kubectl("delete", "pvc", f"{DM}-store-{old}", "--wait=false")
    h.kubectl("patch", "dm", DM, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": reference_status(h, spec, new)}
    ))  # fmt: skip
    # Written by the reference's manager, never by dmrollout's (an empty entry clears them).
    h.kubectl("patch", "dm", DM, "--type=merge", "-p", '{"metadata":{"managedFields":[{}]}}')
    await eventually(lambda: len(h.pods(DM, new)) == 1, 60, what="the reference's Pod")
    await eventually(
        lambda: all(p["status"].get("podIP") for p in h.pods(DM, new)), 60, what="Pod running"
    )
    gate_as_the_reference_left_it(h, new)
    return new


def reference_status(h: RolloutHarness, spec: dict[str, Any], new: str) -> dict[str, Any]:
    status = h.status(DM)
    stable = {k: v for k, v in status["stableRevision"].items() if k not in ("scheduling", "hash")}
    stable["hash"] = new
    stable["resources"] = spec.get("resources", {})
    stable["placement"] = reference_placement(spec.get("scheduling")) or "none"
    conditions = [
        c for c in status.get("conditions", []) if c["type"] not in DMROLLOUT_ONLY_CONDITIONS
    ]
    # A merge patch: null removes what the reference never wrote.
    return {
        "stableRevision": stable,
        "conditions": conditions,
        "rollout": None,
        "candidateRevision": None,
        "phase": "Ready",
    }


def pod_template(h: RolloutHarness, revision: str) -> dict[str, Any]:
    deployment = h.get("deployment", f"{DM}-{revision}")
    assert deployment is not None
    template: dict[str, Any] = deployment["spec"]["template"]
    return template


def managed(h: RolloutHarness) -> bool:
    """Taken over (its Service labelled) and its status written by dmrollout's controller (the
    guide's check: a field manager of that name)."""
    service = h.get("service", DM) or {}
    labelled = (service["metadata"].get("labels") or {}).get(MANAGED_BY) == "dmrollout"
    dm = h.cluster.kubectl(
        "-n", h.namespace, "get", "dm", DM, "--show-managed-fields", "-o", "json"
    ).stdout
    managers = {f["manager"] for f in json.loads(dm)["metadata"].get("managedFields", [])}
    return labelled and CONTROLLER_FIELD_MANAGER in managers


def listed_managed(h: RolloutHarness, namespaces: list[str]) -> dict[str, bool]:
    rows = json.loads(run(h, "get", "-A", "-o", "json").stdout)
    return {r["namespace"]: r["managed"] for r in rows if r["namespace"] in namespaces}


def gate_as_the_reference_left_it(h: RolloutHarness, revision: str) -> None:
    """The reference had set its readiness gate on the stable's Pods."""
    for pod in h.pods(DM, revision):
        gate = {"type": "decisionmodel.io/model-ready", "status": "True", "reason": "ModelReady"}
        h.kubectl(
            "patch", "pod", pod["metadata"]["name"], "--subresource=status", "--type=strategic",
            "-p", json.dumps({"status": {"conditions": [gate]}}),
        )  # fmt: skip


async def test_following_the_guide_keeps_every_reference_decision_model_managed_and_unrolled(
    crd: LocalCluster,
    local_env: LocalEnv,
    ctl_queue: str,
    ctl_logs: Path,
    harnesses: dict[str, RolloutHarness],
    controllers: list[ControllerProcess],
    tmp_path: Path,
) -> None:
    namespaces = [h.namespace for h in harnesses.values()]
    controllers.append(start_controller(crd, local_env, ctl_queue, ctl_logs, namespaces, 0))
    for key, h in harnesses.items():
        h.create_dm(DM, SPECS[key])
    for h in harnesses.values():
        await eventually(lambda h=h: phase(h, DM) == "Ready", 120, what=f"{h.namespace} Ready")
    controllers[0].stop()  # the reference operator, stopped (guide step 2)

    revisions = {k: await as_the_reference_made_it(h, SPECS[k]) for k, h in harnesses.items()}
    before = {
        k: (pod_template(h, revisions[k]), {p["metadata"]["uid"] for p in h.pods(DM, revisions[k])})
        for k, h in harnesses.items()
    }
    runs = {k: len(await workflows_of(h, DM)) for k, h in harnesses.items()}
    # `dmrollout get` says which DecisionModels no dmrollout controller has written.
    some = next(iter(harnesses.values()))
    assert not any(listed_managed(some, namespaces).values())
    listing = run(some, "get", "-A")
    assert all(f"{ns}/{DM}" in listing.stderr for ns in namespaces), listing.stderr

    # Guide step 4: the controller watches what the chart renders from the guide's values.
    scope = guide_watch_scope(tmp_path)
    watched = [ns for ns in namespaces if not scope or ns in scope]
    controllers.append(
        start_controller(crd, local_env, ctl_queue, ctl_logs, watched or ["none"], 1)
    )

    # Guide step 5: every DecisionModel managed, serving on its stable, nothing rolled.
    for key, h in harnesses.items():
        await eventually(lambda h=h: managed(h), 60, what=f"{h.namespace} managed")
        await eventually(lambda h=h: phase(h, DM) == "Ready", 60, what=f"{h.namespace} Ready")
        await eventually(
            lambda h=h: (h.status(DM).get("replicas") or {}).get("modelReady") == 1,
            60,
            what=f"{h.namespace} serving",
        )
        assert h.status(DM)["stableRevision"]["hash"] == revisions[key]
        assert h.names("deployment") == [f"{DM}-{revisions[key]}"]
        template, pods = before[key]
        assert pod_template(h, revisions[key]) == template
        assert {p["metadata"]["uid"] for p in h.pods(DM, revisions[key])} == pods
        assert len(await workflows_of(h, DM)) == runs[key], "a rollout started"
        assert h.status(DM).get("candidateRevision") is None
    assert all(listed_managed(some, namespaces).values())

"""Signed decision records that outlive the workflow history (issue 38, item 6).

A worker with a records namespace: the first promotion waits for its record while the signing
key Secret is missing (Promoted=False/DecisionRecordUnwritten naming the fix, the Service not
created) and goes on once the Secret exists; then a hold, an abort (rollback) and an approved
promotion each leave a record. ``dmrollout verify`` passes, also after the runs' histories are
deleted (what the namespace's retention does), and fails naming the problem when a record is
altered by one byte, removed from the middle or the end of the chain, or checked with another
key. cosign verifies a record against the model digest.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from harness.cosign import cosign_verifies
from harness.decision_records import KEY_SECRET, create_key_secret, grant_records
from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import RolloutHarness, put_model, rollout_settings
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHandle

from controller.worker.run import build_worker
from decisionmodel.records.dsse import public_pem
from decisionmodel.rollout.contracts import Phase, RolloutOutcome, RolloutProgress, RolloutResult
from kube.client import Kube
from localenv.cluster import LocalCluster
from workflows.rollout import RolloutWorkflow

REPO = Path(__file__).resolve().parents[2]
SEQUENCE = "decisionmodel.io/sequence"


class Records:
    def __init__(self, harness: RolloutHarness, namespace: str, key: ec.EllipticCurvePrivateKey):
        self.harness, self.namespace, self.key = harness, namespace, key

    def secret(self) -> None:
        create_key_secret(self.harness.cluster, self.namespace, self.key)

    def config_maps(self) -> list[dict[str, Any]]:
        out = self.harness.cluster.kubectl(
            "-n", self.namespace, "get", "configmaps", "-l", "decisionmodel.io/decision-record",
            "-o", "json",
        ).stdout  # fmt: skip
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return sorted(
            items, key=lambda c: int(c["metadata"]["labels"]["decisionmodel.io/sequence"])
        )

    def predicates(self) -> list[dict[str, Any]]:
        found = []
        for cm in self.config_maps():
            envelope = json.loads(cm["data"]["envelope.json"])
            found.append(json.loads(base64.b64decode(envelope["payload"]))["predicate"])
        return found

    def replace(self, cm: dict[str, Any], envelope: str | None) -> None:
        """Delete a record (immutable: it cannot be edited) and, with ``envelope``, put one back
        under its name and labels, as someone with access to the namespace could."""
        name = cm["metadata"]["name"]
        self.harness.cluster.kubectl(
            "-n", self.namespace, "delete", "configmap", name, "--ignore-not-found"
        )
        if envelope is not None:
            self.harness.cluster.apply(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": name,
                        "namespace": self.namespace,
                        "labels": cm["metadata"]["labels"],
                    },
                    "data": {"envelope.json": envelope},
                }
            )

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "DMROLLOUT_KUBECONFIG": str(self.harness.cluster.kubeconfig),
            "DMROLLOUT_TEMPORAL_TASK_QUEUE": self.harness.task_queue,
        }
        return subprocess.run(
            [sys.executable, "-m", "controller.cli", *args],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def verify(self, dm: str, key: Path, *more: str) -> subprocess.CompletedProcess[str]:
        return self.cli(
            "verify", dm, "-n", self.harness.namespace, "--key", str(key),
            "--records-namespace", self.namespace, *more,
        )  # fmt: skip


@pytest.fixture
async def records(
    crd: LocalCluster, temporal_client: Client, simulators: object
) -> AsyncIterator[Records]:
    namespace = f"records-{uuid.uuid4().hex[:8]}"
    grant_records(crd, namespace)
    queue = f"records-{uuid.uuid4().hex[:8]}"
    settings = rollout_settings(crd).model_copy(update={"decision_records_namespace": namespace})
    worker = build_worker(temporal_client, Kube.from_config(settings.kubeconfig), settings, queue)
    async with worker:
        harness = RolloutHarness(crd, temporal_client, queue)
        yield Records(harness, namespace, ec.generate_private_key(ec.SECP256R1()))


async def held(handle: WorkflowHandle[Any, RolloutOutcome]) -> RolloutProgress:
    async def awaiting() -> RolloutProgress:
        p = await handle.query(RolloutWorkflow.progress)
        assert p.phase == Phase.AWAITING_PROMOTION, p.phase
        return p

    return await async_assert_eventually(awaiting, 90, what="AwaitingPromotion")


async def test_decisions_leave_a_signed_chain_that_outlives_the_history(
    records: Records, tmp_path: Path, temporal_client: Client
) -> None:
    h = records.harness
    h.create_dm("rec", {"model": "laya:en"})
    # No signing key yet: the promotion waits, says why on Promoted, and switches nothing.
    first = await h.start(h.input_for("rec", decision_records=True))
    unwritten = await eventually(
        lambda: h.held("rec", "Promoted", "DecisionRecordUnwritten"), 90, what="record unwritten"
    )
    assert unwritten is not None and KEY_SECRET in unwritten["message"]
    assert "create secret generic" in unwritten["message"]
    assert h.get("service", "rec") is None
    records.secret()
    assert (await asyncio.wait_for(first.result(), 120)).result == RolloutResult.PROMOTED

    # A held candidate (Hold), aborted (RollBack); another held and approved (Promote).
    put_model("laya", "manual")
    put_model("laya", "manual2")
    h.update_spec("rec", {"model": "laya:manual", "rollout": {"promotion": "Manual"}})
    aborted = await h.start(h.input_for("rec", decision_records=True))
    await held(aborted)
    await aborted.signal(RolloutWorkflow.abort, "changed my mind")
    assert (await asyncio.wait_for(aborted.result(), 120)).result == RolloutResult.ROLLED_BACK
    h.update_spec("rec", {"model": "laya:manual2"})
    approved = await h.start(h.input_for("rec", decision_records=True))
    waiting = await held(approved)
    assert waiting.expected_approval is not None
    # Approved from the CLI: the record names the Kubernetes user the API server vouched for.
    # (in a thread: the worker answering the CLI's query runs in this event loop)
    cli = await asyncio.to_thread(records.cli, "promote", "rec", "-n", h.namespace)
    assert cli.returncode == 0, cli.stderr
    promoted = await asyncio.wait_for(approved.result(), 120)
    assert promoted.result == RolloutResult.PROMOTED

    def five() -> list[dict[str, Any]] | None:
        found = records.predicates()
        return found if len(found) == 5 else None

    try:
        predicates = await eventually(five, 30, what="five records")
    except AssertionError as e:
        seen = [
            (p["decision"], p["sequence"], p["run"]["runId"][-6:]) for p in records.predicates()
        ]
        raise AssertionError(f"{e}\nrecords written: {seen}") from e
    assert predicates is not None
    assert [p["decision"] for p in predicates] == ["Promote", "Hold", "RollBack", "Hold", "Promote"]
    assert predicates[2]["reason"] == "Aborted"
    assert predicates[4]["approval"]["token"] == waiting.expected_approval
    approver = predicates[4]["approval"]["by"]
    assert approver.startswith("dmrollout-cli kubernetes-user=") and "=unknown" not in approver
    assert predicates[4]["approval"]["via"] == "update approve"
    assert predicates[4]["revision"]["hash"] == promoted.revision
    head = h.status("rec")["decisionRecord"]
    assert head["sequence"] == 5 and head["decision"] == "Promote"
    text = json.dumps(predicates)
    assert "key.pem" not in text and "BEGIN" not in text

    pub, other = tmp_path / "records.pub", tmp_path / "other.pub"
    pub.write_bytes(public_pem(records.key))
    other.write_bytes(public_pem(ec.generate_private_key(ec.SECP256R1())))
    ok = records.verify("rec", pub)
    assert ok.returncode == 0, ok.stderr
    assert "verified" in ok.stdout and ok.stdout.count("\n  #") == 5, ok.stdout

    # The histories go (what retention does): the records stay and still verify.
    for handle in (first, aborted, approved):
        await temporal_client.workflow_service.delete_workflow_execution(
            DeleteWorkflowExecutionRequest(
                namespace=temporal_client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=handle.id),
            )
        )
    assert records.verify("rec", pub).returncode == 0
    one = records.verify("rec", pub, "--revision", str(promoted.revision), "-o", "json")
    shown = json.loads(one.stdout)[0]["records"]
    assert [r["predicate"]["decision"] for r in shown] == ["Hold", "Promote"]

    # cosign checks a record too, against the model digest it is about.
    cms = records.config_maps()
    envelope = tmp_path / "record.json"
    envelope.write_text(cms[4]["data"]["envelope.json"])
    assert cosign_verifies(pub, envelope, predicates[4]["revision"]["digest"]).returncode == 0

    await _tampering_fails(records, cms, pub, other)


def one_byte_altered(envelope: str) -> str:
    """The envelope with one byte of its statement changed (the decision's message)."""
    body = json.loads(envelope)
    statement = base64.b64decode(body["payload"])
    at = statement.index(b'"message":"') + len(b'"message":"')
    changed = statement[:at] + bytes([statement[at] ^ 0x01]) + statement[at + 1 :]
    body["payload"] = base64.b64encode(changed).decode()
    return json.dumps(body)


async def _tampering_fails(
    records: Records, cms: list[dict[str, Any]], pub: Path, other: Path
) -> None:
    def fails(why: str, key: Path = pub) -> None:
        r = records.verify("rec", key)
        assert r.returncode == 1 and why in r.stderr, (r.returncode, r.stdout, r.stderr)

    fails("signed by another key", other)
    original = cms[1]["data"]["envelope.json"]
    records.replace(cms[1], one_byte_altered(original))
    fails("altered")
    records.replace(cms[1], original)
    records.replace(cms[2], None)  # removed from the middle
    fails("missing")
    records.replace(cms[2], cms[2]["data"]["envelope.json"])
    records.replace(cms[4], None)  # the newest removed: status still names it
    fails("the newest record, #5")
    records.replace(cms[4], cms[4]["data"]["envelope.json"])
    r = records.verify("rec", pub)
    assert r.returncode == 0, r.stderr

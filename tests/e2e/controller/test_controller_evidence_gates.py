"""Issue 24, points 3, 4, 5 and 7: a gate whose interval straddles its threshold is
inconclusive, and the rollout does what ``onInconclusive`` says; a regression confined to one
slice fails that slice's gate while the overall gates pass.

Hold parks the candidate in AwaitingPromotion with the evidence (status, ``dmrollout status``,
the Promoted condition); a promote bound to other evidence is refused; ``dmrollout promote``
with the evidence shown promotes, and the decision record is in status and the workflow's
result. ``dmrollout reject`` and ``onInconclusive: Reject`` roll the candidate back with
InconclusiveRejected while the stable serves.

The candidate's accuracy on the golden set is known exactly (the simulator's answers are a
function of the case), so the threshold is put 0.02 under it: well inside a 60-case interval.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from harness.helpers import eventually
from harness.rollout_harness import RolloutHarness, put_model

from controller.temporal.rollouts import revision_query
from simulators.answers import expected_accuracy, make_golden_set

CASES = 60


def run(ctl: RolloutHarness, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DMROLLOUT_KUBECONFIG": str(ctl.cluster.kubeconfig),
        "DMROLLOUT_TEMPORAL_TASK_QUEUE": ctl.task_queue,
    }
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args, "-n", ctl.namespace],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


def condition(ctl: RolloutHarness, name: str, type_: str) -> dict[str, Any]:
    for c in ctl.status(name).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


def unsure_evaluation(ctl: RolloutHarness, accuracy: float, **more: str) -> dict[str, Any]:
    """A golden set and a minAccuracy 0.02 under what a model of ``accuracy`` scores on it."""
    cases = make_golden_set(CASES, seed=5)
    ctl.golden_configmap("golden", "".join(json.dumps(c) + "\n" for c in cases))
    observed = expected_accuracy(cases, accuracy, 0.8)
    return {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": f"{observed - 0.02:.2f}",
        "confidence": "0.95",
        **more,
    }


async def held(ctl: RolloutHarness, name: str) -> dict[str, Any]:
    return await eventually(
        lambda: (
            ctl.status(name).get("phase") == "AwaitingPromotion"
            and condition(ctl, name, "Promoted").get("reason") == "EvaluationInconclusive"
            and ctl.status(name)["evaluation"]
        ),
        240,
        what="held on an inconclusive evaluation",
    )


async def test_inconclusive_holds_and_the_evidence_shown_promotes(ctl: RolloutHarness) -> None:
    put_model("laya", "unsure", accuracy=0.85, confidence=0.8, revision="unsure")
    evaluation = unsure_evaluation(ctl, 0.85)
    ctl.create_dm("unsure", {"model": "laya:en"})
    await eventually(lambda: ctl.status("unsure").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("unsure")["stableRevision"]["hash"]
    ctl.update_spec("unsure", {"model": "laya:unsure", "rollout": {"evaluation": evaluation}})

    ev = await held(ctl, "unsure")
    decision = ev["decision"]
    assert ev["result"] == decision["result"] == "Inconclusive"
    [gate] = decision["gates"]
    threshold = float(evaluation["minAccuracy"])
    assert gate["gate"] == "minAccuracy" and gate["verdict"] == "Inconclusive"
    assert float(gate["interval"]["lower"]) < threshold <= float(gate["interval"]["upper"])
    assert gate["moreCases"] > 0 and gate["interval"]["cases"] == CASES
    figures = {f["figure"] for f in decision["figures"]}
    assert {"accuracy", "ECE", "accuracy candidate-stable", "negative flips"} <= figures
    assert "about" in condition(ctl, "unsure", "Promoted")["message"]
    assert ctl.status("unsure")["stableRevision"]["hash"] == stable  # nothing moved

    shown = run(ctl, "status", "unsure")
    assert "gate       minAccuracy Inconclusive: accuracy" in shown.stdout, shown.stdout
    [rollout] = json.loads(run(ctl, "status", "unsure", "-o", "json").stdout)["rollouts"]
    token = rollout["expectedApproval"]
    assert token.endswith("." + decision["evidence"])

    # An approval given on other evidence is refused; nothing is promoted.
    stale = token.rsplit(".", 1)[0] + "." + "0" * 16
    refused = run(ctl, "promote", "unsure", "--approval", stale)
    assert refused.returncode == 1 and "does not match" in refused.stderr, refused.stderr
    assert ctl.status("unsure")["phase"] == "AwaitingPromotion"

    approved = run(ctl, "promote", "unsure", "--approval", token)
    assert approved.returncode == 0, approved.stderr
    await eventually(
        lambda: (ctl.status("unsure").get("stableRevision") or {}).get("model") == "laya:unsure",
        120,
        what="promoted on the evidence shown",
    )
    # The decision record is the workflow's result too (the audit trail).
    revision = ctl.status("unsure")["stableRevision"]["hash"]
    query = revision_query(ctl.namespace, "unsure", revision)
    [wf] = [w async for w in ctl.client.list_workflows(query)]
    result = await ctl.client.get_workflow_handle(wf.id).result()
    assert result["decision"]["evidence"] == decision["evidence"]


async def test_reject_and_on_inconclusive_reject_keep_the_stable(ctl: RolloutHarness) -> None:
    put_model("laya", "unsure2", accuracy=0.85, confidence=0.8, revision="unsure2")
    put_model("laya", "unsure3", accuracy=0.85, confidence=0.8, revision="unsure3")
    evaluation = unsure_evaluation(ctl, 0.85)
    ctl.create_dm("doubt", {"model": "laya:en"})
    await eventually(lambda: ctl.status("doubt").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("doubt")["stableRevision"]["hash"]

    ctl.update_spec("doubt", {"model": "laya:unsure2", "rollout": {"evaluation": evaluation}})
    await held(ctl, "doubt")
    rejected = run(ctl, "reject", "doubt")
    assert rejected.returncode == 0, rejected.stderr
    failed = await eventually(
        lambda: ctl.status("doubt").get("failedRevision"), 120, what="rejected"
    )
    assert (
        failed["reason"] == "InconclusiveRejected" and "rejected by a person" in failed["message"]
    )
    assert ctl.status("doubt")["stableRevision"]["hash"] == stable

    rejecting = {**evaluation, "onInconclusive": "Reject"}
    ctl.update_spec("doubt", {"model": "laya:unsure3", "rollout": {"evaluation": rejecting}})
    failed = await eventually(
        lambda: (
            (f := ctl.status("doubt").get("failedRevision") or {}).get("model") == "laya:unsure3"
            and f
        ),
        240,
        what="rolled back by onInconclusive Reject",
    )
    assert failed["reason"] == "InconclusiveRejected"
    assert "minAccuracy Inconclusive" in failed["message"]
    assert ctl.status("doubt")["stableRevision"]["hash"] == stable
    assert ctl.status("doubt")["phase"] == "RolledBack"


async def test_a_regression_in_one_slice_fails_its_gate_while_the_overall_gates_pass(
    ctl: RolloutHarness,
) -> None:
    """10 % of the cases are the slice "fragile"; the candidate gets them wrong (half its pairs
    still land: a wrong score level can fall within the tolerance) and the rest better than the
    stable. Overall it passes minAccuracy and maxAccuracyDrop; the slice
    gate fails it, and the stable keeps serving."""
    marker = "FRAGILE-SEGMENT"
    cases = make_golden_set(100, seed=6)
    for i, c in enumerate(cases):
        c["slice"] = "fragile" if i < 10 else "main"
        if i < 10:
            c["state"] = f"{marker} {c['state']}"
    ctl.golden_configmap("golden", "".join(json.dumps(c) + "\n" for c in cases))
    put_model("laya", "sliced", accuracy=0.95, weak_marker=marker, weak_accuracy=0.0)
    ctl.create_dm("sliced", {"model": "laya:en"})
    await eventually(lambda: ctl.status("sliced").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("sliced")["stableRevision"]["hash"]
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.70",
        "maxAccuracyDrop": "0.20",
        "confidence": "0.95",
        "slices": {"minAccuracy": "0.85", "minCases": 10},
    }
    ctl.update_spec("sliced", {"model": "laya:sliced", "rollout": {"evaluation": evaluation}})
    failed = await eventually(
        lambda: ctl.status("sliced").get("failedRevision"), 240, what="rolled back"
    )
    assert failed["reason"] == "EvaluationFailed"
    assert "slices[fragile].minAccuracy Failed" in failed["message"]
    verdicts = {
        g["gate"]: g["verdict"] for g in ctl.status("sliced")["evaluation"]["decision"]["gates"]
    }
    assert verdicts == {
        "minAccuracy": "Passed",
        "maxAccuracyDrop": "Passed",
        "slices[fragile].minAccuracy": "Failed",
        "slices[main].minAccuracy": "Passed",
    }
    assert ctl.status("sliced")["stableRevision"]["hash"] == stable
    assert marker not in json.dumps(ctl.dm("sliced"))  # a slice's name shows, its cases do not


async def test_a_sequential_evaluation_fails_a_regressed_slice_on_its_own_test(
    ctl: RolloutHarness,
) -> None:
    """Issue 35 item 4: with sequential, each slice is judged by its own betting test at its
    Bonferroni share: a slice the candidate gets wrong (one case in ten, spread through the
    dataset) fails it and the stable keeps serving; the ledger keeps each slice's test."""
    marker = "FRAGILE-SEQ"
    cases = make_golden_set(300, seed=15)
    for i, c in enumerate(cases):
        c["slice"] = "fragile" if i % 10 == 0 else "main"
        if i % 10 == 0:
            c["state"] = f"{marker} {c['state']}"
    ctl.golden_configmap("golden-seqslice", "".join(json.dumps(c) + "\n" for c in cases))
    put_model("laya", "seqsliced", accuracy=0.95, weak_marker=marker, weak_accuracy=0.0)
    ctl.create_dm("seqsliced", {"model": "laya:en"})
    await eventually(lambda: ctl.status("seqsliced").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("seqsliced")["stableRevision"]["hash"]
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden-seqslice", "key": "cases.jsonl"}},
        "minAccuracy": "0.60",
        "confidence": "0.95",
        "sequential": True,
        "slices": {"minAccuracy": "0.85", "minCases": 10},
    }
    spec = {"model": "laya:seqsliced", "rollout": {"evaluation": evaluation}}
    ctl.update_spec("seqsliced", spec)
    failed = await eventually(
        lambda: ctl.status("seqsliced").get("failedRevision"), 240, what="rolled back"
    )
    assert failed["reason"] == "EvaluationFailed"
    decision = ctl.status("seqsliced")["evaluation"]["decision"]
    verdicts = {g["gate"]: g["verdict"] for g in decision["gates"]}
    assert verdicts["slices[fragile].minAccuracy"] == "Failed"
    assert all(g.get("sequential") for g in decision["gates"])
    test = ledger_entry(ctl, "seqsliced", failed["hash"])
    shares = {g["gate"]: g.get("comparisons") for g in test["gates"]}
    assert shares == {"slices[fragile].minAccuracy": 2, "slices[main].minAccuracy": 2}
    assert ctl.status("seqsliced")["stableRevision"]["hash"] == stable


def ledger_entry(ctl: RolloutHarness, name: str, revision: str) -> dict[str, Any]:
    for entry in ctl.status(name).get("evaluationLedger") or []:
        if entry.get("revision") == revision:
            return dict(entry)
    return {}


async def test_sequential_evaluation_stops_early_and_a_retry_continues_its_test(
    ctl: RolloutHarness,
) -> None:
    """Issue 35 item 4: a candidate clearly above minAccuracy promotes after fewer cases than
    the dataset holds (status and the workflow's result say so); a candidate at its gate is
    undecided and rejected, and a retry once cases are appended continues the same test."""
    put_model("laya", "seqgood", accuracy=0.95, confidence=0.8, revision="seqgood")
    put_model("laya", "seqgate", accuracy=0.85, confidence=0.8, revision="seqgate")
    many = make_golden_set(300, seed=8)
    ctl.golden_configmap("golden-seq", "".join(json.dumps(c) + "\n" for c in many))
    ctl.create_dm("seq", {"model": "laya:en"})
    await eventually(lambda: ctl.status("seq").get("phase") == "Ready", 120, what="Ready")
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden-seq", "key": "cases.jsonl"}},
        "minAccuracy": "0.60",
        "confidence": "0.95",
        "sequential": True,
    }
    ctl.update_spec("seq", {"model": "laya:seqgood", "rollout": {"evaluation": evaluation}})
    await eventually(
        lambda: (ctl.status("seq").get("stableRevision") or {}).get("model") == "laya:seqgood",
        240,
        what="promoted",
    )
    ev = ctl.status("seq")["evaluation"]
    test = ev["decision"]["sequential"]
    assert ev["cases"] == test["cases"] == test["thisEvaluation"] < 300 == test["datasetCases"]
    assert "stopped after" in condition(ctl, "seq", "Evaluated")["message"]
    revision = ctl.status("seq")["stableRevision"]["hash"]
    [wf] = [
        w async for w in ctl.client.list_workflows(revision_query(ctl.namespace, "seq", revision))
    ]
    result = await ctl.client.get_workflow_handle(wf.id).result()
    assert result["decision"]["sequential"]["cases"] == test["cases"]  # in history too

    few = make_golden_set(80, seed=9)
    ctl.golden_configmap("golden-seq", "".join(json.dumps(c) + "\n" for c in few[:40]))
    at_gate = {
        **evaluation,
        "minAccuracy": f"{expected_accuracy(few[:40], 0.85, 0.8):.4f}",
        "onInconclusive": "Reject",
    }
    ctl.update_spec("seq", {"model": "laya:seqgate", "rollout": {"evaluation": at_gate}})
    failed = await eventually(
        lambda: (
            (f := ctl.status("seq").get("failedRevision") or {}).get("model") == "laya:seqgate"
            and f
        ),
        240,
        what="rejected as undecided",
    )
    assert failed["reason"] == "InconclusiveRejected"
    first = ledger_entry(ctl, "seq", failed["hash"])
    assert first["cases"] == 40 and first["evaluations"] == 1 and first["verdict"] == "Inconclusive"

    # Cases appended, then a retry: the same test goes on from case 41 (not a fresh look).
    ctl.golden_configmap("golden-seq", "".join(json.dumps(c) + "\n" for c in few))
    retried = run(ctl, "retry", "seq")
    assert retried.returncode == 0, retried.stderr
    again = await eventually(
        lambda: (e := ledger_entry(ctl, "seq", failed["hash"])).get("evaluations") == 2 and e,
        240,
        what="the retry's evaluation continued the test",
    )
    assert again["cases"] == 40 + again["thisEvaluation"] and again["thisEvaluation"] > 0
    assert "restarted" not in again
    assert ctl.status("seq")["stableRevision"]["hash"] == revision  # the stable kept serving


async def test_sequential_paired_gates_judge_the_candidate_against_the_stable(
    ctl: RolloutHarness,
) -> None:
    """Issue 35 item 4: with maxAccuracyDrop, maxNegativeFlipRate and maxECE a sequential
    evaluation judges each gate by its own test (the first two against the stable): a
    candidate as good as the stable promotes before the dataset's end, every gate Passed and
    kept in the ledger against that stable; a candidate far worse than the stable fails
    maxAccuracyDrop (though it clears minAccuracy) and is rolled back, the stable serving."""
    put_model("laya", "pairgood", accuracy=0.95, confidence=0.8, revision="pairgood")
    put_model("laya", "pairworse", accuracy=0.6, confidence=0.8, revision="pairworse")
    cases = make_golden_set(300, seed=14)
    ctl.golden_configmap("golden-pair", "".join(json.dumps(c) + "\n" for c in cases))
    ctl.create_dm("pair", {"model": "laya:pairgood"})
    await eventually(lambda: ctl.status("pair").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("pair")["stableRevision"]["hash"]
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden-pair", "key": "cases.jsonl"}},
        "minAccuracy": "0.30",
        "maxAccuracyDrop": "0.20",
        "maxNegativeFlipRate": "0.60",
        "maxECE": "0.50",
        "confidence": "0.95",
        "sequential": True,
    }
    # The same model under another revision name: as good as the stable, judged against it.
    put_model("laya", "pairsame", accuracy=0.95, confidence=0.8, revision="pairsame")
    ctl.update_spec("pair", {"model": "laya:pairsame", "rollout": {"evaluation": evaluation}})
    await eventually(
        lambda: (ctl.status("pair").get("stableRevision") or {}).get("model") == "laya:pairsame",
        240,
        what="promoted",
    )
    decision = ctl.status("pair")["evaluation"]["decision"]
    assert {g["gate"]: g["verdict"] for g in decision["gates"]} == {
        "minAccuracy": "Passed",
        "maxAccuracyDrop": "Passed",
        "maxNegativeFlipRate": "Passed",
        "maxECE": "Passed",
    }
    test = decision["sequential"]
    assert test["baseline"] == stable and test["cases"] < 300
    assert [e["gate"] for e in test["ece"]] == ["maxECE"]  # its bounds' state, for a retry
    assert {g["gate"] for g in test["gates"]} == {"maxAccuracyDrop", "maxNegativeFlipRate"}
    promoted = ctl.status("pair")["stableRevision"]["hash"]

    worse = {**evaluation, "onInconclusive": "Reject"}
    ctl.update_spec("pair", {"model": "laya:pairworse", "rollout": {"evaluation": worse}})
    failed = await eventually(
        lambda: (
            (f := ctl.status("pair").get("failedRevision") or {}).get("model") == "laya:pairworse"
            and f
        ),
        240,
        what="rolled back on its drop",
    )
    assert failed["reason"] == "EvaluationFailed"
    judged = {
        g["gate"]: g["verdict"] for g in ctl.status("pair")["evaluation"]["decision"]["gates"]
    }
    assert judged["maxAccuracyDrop"] == "Failed" and judged["minAccuracy"] == "Passed"
    assert ctl.status("pair")["stableRevision"]["hash"] == promoted  # the stable kept serving


async def test_a_golden_set_too_small_for_its_gate_is_refused_before_anything_is_made(
    ctl: RolloutHarness,
) -> None:
    """Issue 35 item 6: 50 cases can never pass minAccuracy 0.98 at confidence 0.95 (every
    case right gives a lower bound of 0.929), so with onInconclusive Reject every candidate
    would be rolled back: the rollout fails at once naming the field and the fix, nothing of
    the candidate is made, the stable serves. Fixed (Hold: a person decides) and retried, the
    rollout goes on and says the golden set is too small, with the cases it would need."""
    put_model("laya", "small", accuracy=0.99, confidence=0.8, revision="small")
    cases = make_golden_set(50, seed=12)
    ctl.golden_configmap("golden-small", "".join(json.dumps(c) + "\n" for c in cases))
    ctl.create_dm("small", {"model": "laya:en"})
    await eventually(lambda: ctl.status("small").get("phase") == "Ready", 120, what="Ready")
    stable = ctl.status("small")["stableRevision"]["hash"]
    made = set(ctl.names("deployments")), set(ctl.names("jobs"))
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden-small", "key": "cases.jsonl"}},
        "minAccuracy": "0.98",
        "confidence": "0.95",
        "onInconclusive": "Reject",
    }
    ctl.update_spec("small", {"model": "laya:small", "rollout": {"evaluation": evaluation}})
    failed = await eventually(
        lambda: (
            (f := ctl.status("small").get("failedRevision") or {}).get("model") == "laya:small"
            and f
        ),
        120,
        what="refused",
    )
    assert failed["reason"] == "InvalidEvaluationPolicy"
    assert failed["message"].startswith(
        "spec.rollout.evaluation.minAccuracy 0.98 on the golden set's 50 cases at confidence "
        "0.95: no outcome can pass it"
    ), failed["message"]
    assert (
        "ConfigMap golden-small" in failed["message"]
        and "onInconclusive: Hold" in failed["message"]
    )
    assert ctl.status("small")["stableRevision"]["hash"] == stable
    assert (set(ctl.names("deployments")), set(ctl.names("jobs"))) == made  # nothing made
    shown = run(ctl, "status", "small")
    assert "InvalidEvaluationPolicy" in shown.stdout, shown.stdout

    # The fix, then the retry the refusal names (a failed revision is retried by the user:
    # the spec still names the same revision).
    ctl.update_spec("small", {"rollout": {"evaluation": {**evaluation, "onInconclusive": "Hold"}}})
    retried = run(ctl, "retry", "small")
    assert retried.returncode == 0, retried.stderr
    warned = await eventually(
        lambda: (
            (c := condition(ctl, "small", "Evaluated")).get("reason") == "EvaluationUnderpowered"
            and c
        ),
        120,
        what="said too small",
    )
    assert "minAccuracy 0.98 on 50 cases: no outcome can pass it" in warned["message"]
    design = ctl.status("small")["evaluationDesign"]
    assert design["checked"] and design["cases"] == 50
    [gate] = design["gates"]
    assert gate["gate"] == "minAccuracy" and not gate["canPass"] and gate["casesForPower"] > 50
    await held(ctl, "small")  # evaluated all the same, and a person decides
    assert "design     minAccuracy 0.98 on 50 cases" in run(ctl, "status", "small").stdout
    assert ctl.status("small")["stableRevision"]["hash"] == stable

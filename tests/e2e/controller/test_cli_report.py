"""Issue 13, points 4 and 7: ``dmrollout report`` after a real rollout with evaluation, and the
page as a person sees it in headless Chromium (the diagram is drawn: SVG elements present).

The screenshot is saved in the test's tmp dir and copied to ``out/report.png`` (git-ignored)
for a person to look at; ``DMROLLOUT_REPORT_SCREENSHOT`` names one more copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from harness.rollout_harness import RolloutHarness, golden_jsonl, put_model
from playwright.async_api import async_playwright
from temporalio.api.sdk.v1 import WorkflowMetadata

from controller.temporal.rollouts import revision_query

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[3]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-proxy-server"]  # fmt: skip
# Dataset words that must never reach status or the report: question ids and choice labels.
CONTENT = ("q_choice", "q_noul", "q_score", "billing", "tech", "sales", "legal")


def run(ctl: RolloutHarness, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DMROLLOUT_KUBECONFIG": str(ctl.cluster.kubeconfig),
        "DMROLLOUT_TEMPORAL_TASK_QUEUE": ctl.task_queue,
    }
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def chromium() -> str:
    path = "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
    path = path or shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed: run `hack/install-browser.sh`")
    return path


async def test_report_of_an_evaluated_rollout(ctl: RolloutHarness, tmp_path: Path) -> None:
    marker = f"GOLDEN-MARKER-{uuid.uuid4().hex}"
    put_model("laya", "reported", accuracy=0.85, revision="reported")
    ctl.golden_configmap("golden", golden_jsonl(40, seed=3, marker=marker))
    ctl.create_dm("scored", {"model": "laya:en"})
    assert run(ctl, "wait", "scored", "-n", ctl.namespace).returncode == 0
    none_yet = run(ctl, "report", "scored", "-n", ctl.namespace, "-o", str(tmp_path / "x.html"))
    assert none_yet.returncode == 4  # not found: no evaluation yet, said in one line
    assert none_yet.stderr.strip().splitlines() == [
        f"dmrollout: DecisionModel {ctl.namespace}/scored has no evaluation in status yet (set "
        "spec.rollout.evaluation; the report is written once a rollout has evaluated)"
    ]
    assert not (tmp_path / "x.html").exists()
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden", "key": "cases.jsonl"}},
        "minAccuracy": "0.50",
        "maxAccuracyDrop": "0.50",
        "maxECE": "0.50",
    }
    ctl.update_spec("scored", {"model": "laya:reported", "rollout": {"evaluation": evaluation}})
    waited = run(ctl, "wait", "scored", "-n", ctl.namespace)
    assert waited.returncode == 0, waited.stderr

    # Status carries the aggregates, and nothing of the dataset.
    ev = ctl.status("scored")["evaluation"]
    assert len(ev["reliability"]) == 10 and sum(b["count"] for b in ev["reliability"]) > 0
    assert ev["baselineBrier"] and ev["baselineReliability"] and ev["confusion"]
    status_text = json.dumps(ctl.dm("scored"))
    for word in (marker, *CONTENT):
        assert word not in status_text, word

    # `status` links the report.
    shown = run(ctl, "status", "scored", "-n", ctl.namespace)
    assert f"report     dmrollout report scored -n {ctl.namespace}" in shown.stdout

    # The report from status, and the same evaluation from the rollout's history.
    page = tmp_path / "report.html"
    wrote = run(ctl, "report", "scored", "-n", ctl.namespace, "-o", str(page))
    assert wrote.returncode == 0, wrote.stderr
    html = page.read_text()
    revision = ev["revision"]
    again = tmp_path / "history.html"
    from_history = run(
        ctl, "report", "scored", "-n", ctl.namespace, "--revision", revision, "-o", str(again)
    )
    assert from_history.returncode == 0, from_history.stderr
    for word in (marker, *CONTENT):
        assert word not in html and word not in again.read_text(), word
    # Same figures and diagram either way (only the "read from" line differs).
    assert (
        html.split('<svg id="reliability"')[1]
        == again.read_text().split('<svg id="reliability"')[1]
    )
    missing = run(ctl, "report", "scored", "-n", ctl.namespace, "--revision", "0" * 16)
    assert missing.returncode == 4 and "no rollout of revision" in missing.stderr

    # The Temporal UI's details of the rollout name the figures and the command.
    query = revision_query(ctl.namespace, "scored", revision)
    [rollout] = [wf async for wf in ctl.client.list_workflows(query)]
    handle = ctl.client.get_workflow_handle(rollout.id)
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    assert f"accuracy {ev['accuracy']}, ECE {ev['ece']}" in meta.current_details
    assert (
        f"`dmrollout report scored -n {ctl.namespace} --revision {revision}`"
        in meta.current_details
    )

    # The page in headless Chromium: the diagram is there and drawn.
    shot = tmp_path / "report.png"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            view = await browser.new_page(viewport={"width": 1000, "height": 1400})
            await view.goto(page.as_uri())
            bars = view.locator("#reliability rect.bar")
            assert await bars.count() == sum(1 for b in ev["reliability"] if b["count"])
            assert await view.locator("#reliability line.diagonal").count() == 1
            assert await view.locator("#reliability circle.baseline").count() > 0
            assert await view.locator("#reliability text.ece").text_content() == f"ECE {ev['ece']}"
            box = await bars.first.bounding_box()
            assert box is not None and box["height"] > 0 and box["width"] > 0  # drawn, visible
            assert await view.locator("table.confusion").count() == 3
            await view.screenshot(path=str(shot), full_page=True)
        finally:
            await browser.close()
    assert shot.stat().st_size > 10_000
    (REPO / "out").mkdir(exist_ok=True)
    shutil.copy(shot, REPO / "out" / "report.png")
    if os.environ.get("DMROLLOUT_REPORT_SCREENSHOT"):
        shutil.copy(shot, os.environ["DMROLLOUT_REPORT_SCREENSHOT"])

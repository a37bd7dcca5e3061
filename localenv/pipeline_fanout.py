"""Three clusters, one pipeline: staging on the hub, then two production stages in parallel
(issue 25, "Done when": the pipeline in the Temporal UI).

Three real control planes (``hub``, ``prod-eu``, ``prod-us``) in this network namespace, as
``make demo-pipeline`` runs two; a DecisionModelPipeline ``fanout`` whose production stages
both depend on staging only. With ``--ui-tour DIR`` headless Chromium then reads the run as a
person would in the Temporal UI: the pipeline's page, its three stage runs, the links of its
User Metadata tab to the three rollouts (each in its cluster's own Temporal namespace), and
each rollout's own page; screenshots go to DIR, what it saw to ``--json``.

    hack/in-netns.sh .venv/bin/python -m localenv.pipeline_fanout --ui-tour out/ui
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

from temporalio.client import Client

from localenv.browser import CHROMIUM, CHROMIUM_ARGS
from localenv.multicluster import MultiClusterEnv
from localenv.pipeline_demo import NAMESPACE, PIPELINES_NS, Demo, rollout_namespace, say
from workflows.pipeline_details import ui_path

CLUSTERS: Final = ("hub", "prod-eu", "prod-us")
PIPELINE: Final = "fanout"
STAGES: Final = ("staging", "prod-eu", "prod-us")
UI_TIMEOUT_MS: Final = 20_000


def apply_fanout(demo: Demo) -> None:
    where = {"namespace": NAMESPACE}
    stages = [
        {"name": "staging", "cluster": "staging", **where},
        {"name": "prod-eu", "cluster": "prod-eu", "dependsOn": ["staging"], **where},
        {"name": "prod-us", "cluster": "prod-us", "dependsOn": ["staging"], **where},
    ]
    demo.hub.apply(
        {
            "apiVersion": "decisionmodel.io/v1alpha1",
            "kind": "DecisionModelPipeline",
            "metadata": {"name": PIPELINE, "namespace": NAMESPACE},
            "spec": {"template": {"spec": {"model": "laya:en", "replicas": 1}}, "stages": stages},
        }
    )


def run_fanout(demo: Demo) -> dict[str, Any]:
    demo.put_model("en", revision="en-1", accuracy=0.92)
    apply_fanout(demo)
    say("applied DecisionModelPipeline fanout: staging (hub) -> prod-eu, prod-us in parallel")
    stages = {}
    for name in STAGES:
        stages[name] = demo.stage_in(name, "Promoted", "Failed", "Blocked", timeout=400)
        say(f"{name}: {stages[name]['state']} ({stages[name].get('reason')})")
    print(demo.hub.kubectl("get", "dmp", PIPELINE, "-n", NAMESPACE, "-o", "wide").stdout)
    status = demo.pipeline()
    return {"stages": stages, "workflow_id": status.get("workflowId"), "phase": status.get("phase")}


async def child_spans(address: str, run_id: str) -> dict[str, list[float]]:
    """[started, ended] (epoch seconds) of each stage's child, from the run's own history."""
    client = await Client.connect(address, namespace=PIPELINES_NS)
    spans: dict[str, list[float]] = {}
    async for event in client.get_workflow_handle(run_id).fetch_history_events():
        attrs = _child_attributes(event)
        if attrs is not None:
            stage = attrs.workflow_execution.workflow_id.rsplit("/", 1)[-1]
            spans.setdefault(stage, []).append(event.event_time.ToDatetime().timestamp())
    return spans


def _child_attributes(event: Any) -> Any:
    """The attributes of a child's start or close event; None for any other event."""
    for field in (
        "child_workflow_execution_started_event_attributes",
        "child_workflow_execution_completed_event_attributes",
        "child_workflow_execution_failed_event_attributes",
        "child_workflow_execution_canceled_event_attributes",
    ):
        if event.HasField(field):
            return getattr(event, field)
    return None


async def ui_tour(ui: str, run_id: str, shots: Path) -> dict[str, Any]:
    """What a person sees: the run's page, its children, its links and where they lead."""
    from playwright.async_api import async_playwright, expect  # dev dependency, this mode only

    expect.set_options(timeout=UI_TIMEOUT_MS)
    shots.mkdir(parents=True, exist_ok=True)
    seen: dict[str, Any] = {"run_page": f"{ui}{ui_path(PIPELINES_NS, run_id)}"}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1600, "height": 1000})
            await page.goto(seen["run_page"])
            await expect(page.get_by_text(run_id).first).to_be_visible()
            relationships = page.get_by_text("Relationships", exact=False).first
            await expect(relationships).to_contain_text(str(len(STAGES)))
            seen["relationships_tab"] = (await relationships.inner_text()).strip()
            await page.screenshot(path=str(shots / "pipeline-timeline.png"), full_page=True)
            await page.get_by_text("User Metadata", exact=True).click()
            seen["links"] = await _rendered_links(page)
            await page.screenshot(path=str(shots / "pipeline-details.png"), full_page=True)
            seen["opened"] = [
                await _open(browser, ui, href, shots / f"linked-{i}.png")
                for i, (_, href) in enumerate(seen["links"])
            ]
        finally:
            await browser.close()
    return seen


async def _rendered_links(page: Any) -> list[list[str]]:
    """[text, href] of the links in the rendered Markdown (the UI renders it in a frame)."""
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while True:
        links: list[list[str]] = []
        for frame in page.frames:
            if "/render" in frame.url:
                links.extend(await _frame_links(frame))
        if len(links) >= 2 * len(STAGES) or time.monotonic() > deadline:
            return links
        await asyncio.sleep(0.5)


async def _frame_links(frame: Any) -> list[list[str]]:
    """[text, href] of one frame's links; none when the frame went away while being read.

    The UI re-renders the details as it polls the run, which detaches the old frame; the
    caller looks again at the frames then present rather than failing on a stale one.
    """
    from playwright.async_api import Error as PlaywrightError

    try:
        return [
            [(await a.text_content() or "").strip(), await a.get_attribute("href") or ""]
            for a in await frame.locator("a").all()
        ]
    except PlaywrightError:
        return []


async def _open(browser: Any, ui: str, href: str, shot: Path) -> dict[str, Any]:
    """Follow one link; the page it opens must name the workflow and its status."""
    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 1600, "height": 1000})
    try:
        await page.goto(f"{ui}{href}")
        wid = unquote(href.rsplit("/", 1)[-1])
        await expect(page.get_by_text(wid).first).to_be_visible()
        completed = page.get_by_text("Completed", exact=False).first
        await expect(completed).to_be_visible()
        await page.screenshot(path=str(shot))
        return {"href": href, "workflow_id": wid, "url": page.url, "status_shown": True}
    finally:
        await page.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localenv.pipeline_fanout")
    parser.add_argument("--json", type=Path, default=None, help="write the observations here")
    parser.add_argument("--ui-tour", type=Path, default=None, help="screenshots here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    state = Path(tempfile.mkdtemp(prefix="dmrollout-pipeline-fanout-"))
    namespaces = (PIPELINES_NS, *(rollout_namespace(c) for c in CLUSTERS if c != "hub"))
    result: dict[str, Any] = {"state": str(state)}
    with MultiClusterEnv(state, CLUSTERS, temporal_namespaces=namespaces) as env:
        say(f"clusters up in {env.timings['start']:.1f} s; Temporal UI {env.temporal.ui_url}")
        demo = Demo(env, state, PIPELINE)
        demo.install()
        result["fanout"] = run_fanout(demo)
        run_id = str(result["fanout"]["workflow_id"])
        result["spans"] = asyncio.run(child_spans(env.temporal.address, run_id))
        result["namespaces"] = {c: rollout_namespace(c) for c in CLUSTERS}
        if args.ui_tour is not None:
            result["ui"] = asyncio.run(ui_tour(env.temporal.ui_url, run_id, args.ui_tour))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    say(f"done; state and logs in {state}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Temporal Web UI as an operator sees a rollout (issue 6, item 7).

A real rollout runs first; then headless Chromium (Debian's ``chromium``, driven by Playwright
through its executable path: ``playwright install`` downloads a browser build of its own, which
this machine cannot fetch) opens the UI of the dev server inside the test network namespace and
checks the three places ``docs/operations.md`` sends an operator to: the workflow list filtered
by ``DmName``, the workflow's search attributes, and its timeline with each step's summary.
Screenshots land in the test's ``tmp_path``; the timeline one is also copied to
``out/ui-screenshot.png`` (git-ignored) for a person to look at.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from harness.codec_env import CodecEnv
from harness.rollout_harness import RolloutHarness
from playwright.async_api import Browser, Page, async_playwright, expect
from temporalio.client import Client

from decisionmodel.rollout.contracts import RolloutResult, workflow_id
from localenv.browser import CHROMIUM, CHROMIUM_ARGS
from localenv.temporal import TemporalDevServer

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
# The search-attribute columns added to the list; DmName is also the filter itself.
SA_COLUMNS = ("DmName", "DmRevision", "DmPhase", "DmResult")
# Columns taken out so the added ones fit a 1600 px wide screenshot without truncation.
DROPPED_COLUMNS = ("Run ID", "Start", "End")
UI_TIMEOUT_MS = 20_000
CODEC_DECODE_TIMEOUT_MS = 90_000


@pytest.fixture(scope="session")
def chromium() -> str:
    """The browser binary; missing is a failure, not a skip: the check is part of the suite."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path is None:
        pytest.fail(
            "chromium is not installed: run `hack/install-browser.sh` (Debian package "
            "`chromium`; `playwright install` is not used, it downloads its own browser)"
        )
    return path


@pytest.fixture
async def browser(chromium: str) -> AsyncIterator[Browser]:
    # The UI loads its data after the page: assertions wait up to this long for it.
    expect.set_options(timeout=UI_TIMEOUT_MS)
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()


async def visible_in_list(client: Client, query: str, workflow: str, timeout: float = 30) -> None:
    """Wait until visibility answers the UI's query with the closed workflow, so the page
    (which does not refresh by itself) is opened on a list that already holds it."""
    deadline = time.monotonic() + timeout
    while True:
        ids = [wf.id async for wf in client.list_workflows(query)]
        if workflow in ids:
            return
        assert time.monotonic() < deadline, f"{workflow} not listed by {query!r}: {ids}"
        await asyncio.sleep(0.2)


async def configure_columns(page: Page) -> None:
    await page.get_by_test_id("workflows-summary-table-configuration-button").click()
    for column in DROPPED_COLUMNS:
        await page.get_by_test_id(f"orderable-list-item-{column}-remove-button").click()
    for column in SA_COLUMNS:
        await page.get_by_test_id(f"orderable-list-item-{column}-add-button").click()
    await page.get_by_test_id("drawer-close-button").click()
    await expect(page.get_by_text("Configure Workflows Table")).to_be_hidden()
    for column in SA_COLUMNS:  # on screen, not scrolled off to the right of the screenshot
        await expect(
            page.get_by_test_id(f"workflows-summary-table-header-cell-{column}")
        ).to_be_in_viewport()


async def row_by_column(page: Page, workflow: str) -> dict[str, str]:
    """The list row of `workflow` as {column header: cell text}."""
    row = page.get_by_test_id("workflows-summary-configurable-table-row").filter(has_text=workflow)
    await expect(row).to_have_count(1)
    prefix = "workflows-summary-table-header-cell-"
    names = [
        (await h.get_attribute("data-testid") or "").removeprefix(prefix)
        for h in await page.locator(f"[data-testid^='{prefix}']").all()
    ]
    cell = row.get_by_test_id("workflows-summary-table-body-cell")
    cells = [c.strip() for c in await cell.all_inner_texts()]
    assert len(names) == len(cells), (names, cells)
    return dict(zip(names, cells, strict=True))


async def test_rollout_is_readable_in_the_temporal_ui(
    chromium: str,  # first: a missing browser fails before the cluster is started
    harness: RolloutHarness,
    temporal_server: TemporalDevServer,
    browser: Browser,
    tmp_path: Path,
) -> None:
    name = "ui-tour"
    harness.create_dm(name, {"model": "laya:en", "replicas": 1})
    inp = harness.input_for(name)
    handle = await harness.start(inp)
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.result == RolloutResult.PROMOTED, outcome
    rev = outcome.revision
    assert rev is not None
    # The ID carries the revision the controller asked for (before the digest was resolved);
    # DmRevision is upserted to the resolved one.
    wid = workflow_id(inp.dm, inp.requested_revision)
    assert handle.id == wid == f"rollout/{harness.namespace}/{name}/{inp.requested_revision}"
    run_id = handle.result_run_id
    assert run_id is not None
    query = f'DmName="{name}"'
    await visible_in_list(harness.client, query, wid)

    page = await browser.new_page(viewport={"width": 1600, "height": 1000})
    page.set_default_timeout(UI_TIMEOUT_MS)
    ui = temporal_server.ui_url
    # Only the UI itself: anything else the page asks for (news feed, fonts, telemetry) is
    # aborted here rather than left to time out against the namespace's missing network.
    await page.route(lambda url: not url.startswith(ui), lambda route: route.abort())

    # 1. The list, filtered the way the demo prints it: DmName="<name>".
    await page.goto(f"{ui}/namespaces/default/workflows?query={urllib.parse.quote(query)}")
    await expect(page.get_by_role("link", name=wid, exact=True)).to_be_visible()
    await configure_columns(page)
    row = await row_by_column(page, wid)
    assert row["Workflow ID"] == wid
    assert row["Type"] == "RolloutWorkflow"
    assert row["Status"].upper() == "COMPLETED"
    assert {c: row[c] for c in SA_COLUMNS} == {
        "DmName": name,
        "DmRevision": rev,
        "DmPhase": "Ready",
        "DmResult": "Promoted",
    }
    await page.screenshot(path=str(tmp_path / "ui-list.png"))

    # 2. The workflow's own page: every search attribute, read from the JSON the tab shows.
    await page.get_by_role("link", name=wid, exact=True).click()
    await expect(page.get_by_role("heading", name=wid)).to_be_visible()
    await expect(page.get_by_text(run_id, exact=True)).to_be_visible()
    await page.get_by_role("tab", name="Search Attributes", exact=True).click()
    code = page.get_by_role("textbox", name="Search Attributes")
    await expect(code).to_contain_text("DmResult")
    attributes = json.loads(await code.inner_text())
    assert {k: v for k, v in attributes.items() if k.startswith("Dm")} == {
        "DmNamespace": harness.namespace,
        "DmName": name,
        "DmRevision": rev,
        "DmModel": "laya:en",
        "DmPhase": "Ready",
        "DmResult": "Promoted",
    }
    await page.screenshot(path=str(tmp_path / "ui-search-attributes.png"))

    # 3. The timeline: each step as "<activity type> • <summary>", in the order they ran.
    await page.set_viewport_size({"width": 1600, "height": 1300})
    await page.get_by_role("tab", name="Timeline", exact=True).click()
    steps = [
        f"resolve • resolve {inp.revision.model}",
        f"prefetch • prefetch {inp.revision.model} into {name}-store-{rev}",
        f"start • start Deployment {name}-{rev} (1 replicas, no traffic)",
        f"warmup_inspect • warm up and inspect Pods of {rev}: digest, device, pinned",
        f"promote • promote {rev}: record stable, PDB, switch Service {name}",
    ]
    rows: list[float] = []
    for step in steps:
        label = page.get_by_text(step, exact=True)
        await expect(label).to_be_visible()
        box = await label.bounding_box()
        assert box is not None, step
        rows.append(box["y"])
    # One row per activity, sorted by time (either direction): the steps' rows are monotonic.
    placed = list(zip(steps, rows, strict=True))
    assert rows in (sorted(rows), sorted(rows, reverse=True)), placed
    assert len(set(rows)) == len(rows), placed
    shot = tmp_path / "ui-timeline.png"
    await page.screenshot(path=str(shot))
    (REPO / "out").mkdir(exist_ok=True)
    shutil.copyfile(shot, REPO / "out" / "ui-screenshot.png")


async def test_ui_shows_payloads_decoded_through_the_codec_server(
    chromium: str,
    codec_harness: RolloutHarness,
    codec_env: CodecEnv,
    browser: Browser,
    tmp_path: Path,
) -> None:
    """Issue 12, point 6: Temporal holds ciphertext; the UI, pointed at `dmrollout
    codec-server` (`--ui-codec-endpoint`), shows the rollout's input and its steps' summaries
    decoded, with the browser calling the codec server itself (CORS)."""
    h = codec_harness
    name = "ui-codec"
    h.create_dm(name, {"model": "laya:en", "replicas": 1})
    inp = h.input_for(name)
    handle = await h.start(inp)
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.result == RolloutResult.PROMOTED, outcome
    run_id = handle.result_run_id
    assert run_id is not None

    page = await browser.new_page(viewport={"width": 1600, "height": 1300})
    page.set_default_timeout(UI_TIMEOUT_MS)
    ui = codec_env.temporal.ui_url
    endpoint = codec_env.temporal.ui_codec_endpoint
    assert endpoint is not None
    decode_calls: list[int] = []
    page.on(
        "response",
        lambda r: decode_calls.append(r.status) if r.url.startswith(endpoint) else None,
    )
    await page.route(
        lambda url: not (url.startswith(ui) or url.startswith(endpoint)),
        lambda route: route.abort(),
    )
    wid = urllib.parse.quote(handle.id, safe="")
    await page.goto(f"{ui}/namespaces/default/workflows/{wid}/{run_id}/history")
    await expect(page.get_by_role("heading", name=handle.id)).to_be_visible()
    body = page.locator("body")
    # The input as the worker got it: the DecisionModel's UID is in the input payload only. The
    # page shows the ciphertext first and asks the codec server once it has the history; on
    # this shared machine under load that came ~40 s after the page was opened (seen), hence
    # the longer bound for this one wait.
    await expect(body).to_contain_text(inp.dm.uid, timeout=CODEC_DECODE_TIMEOUT_MS)
    await page.screenshot(path=str(tmp_path / "ui-codec-input.png"))
    await page.get_by_role("tab", name="Timeline", exact=True).click()
    await expect(
        page.get_by_text(f"resolve • resolve {inp.revision.model}", exact=True)
    ).to_be_visible()
    await page.screenshot(path=str(tmp_path / "ui-codec-timeline.png"))
    assert decode_calls and set(decode_calls) == {200}, decode_calls
    assert "POST /decode" in codec_env.codec_server.log_path.read_text()

"""A 3-stage pipeline in the Temporal UI (issue 25, "Done when"): staging on the hub, then
two production stages in parallel, each in a real cluster of its own.

The scenario (``localenv.pipeline_fanout``) runs in a network namespace of its own, beside the
session's environment: three control planes, one Temporal with a namespace per cluster's
rollouts and one for the pipelines, a worker and a controller per cluster. Once the run has
promoted everywhere, headless Chromium opens the run's page in the Temporal UI as a person
would and follows the links of its User Metadata tab. This test holds it to: one pipeline
history, three stage runs beside it, links to three rollout histories, each in its cluster's
namespace, each of which opens and shows its rollout; the two production stages overlapped.
Screenshots are in the test's tmp_path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from harness.scenario import ROOT, run_scenario

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900 + 120)]
SCENARIO_SECONDS = 900
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not CHROMIUM.exists():  # a failure, not a skip: the check is part of the suite
        pytest.fail("chromium is not installed: run `make browser` (hack/install-browser.sh)")
    work = tmp_path_factory.mktemp("pipeline-ui")
    out = work / "observed.json"
    args = [str(ROOT / "hack/in-netns.sh"), sys.executable, "-m", "localenv.pipeline_fanout"]
    run = run_scenario([*args, "--ui-tour", str(work / "ui"), "--json", str(out)], SCENARIO_SECONDS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_three_stages_promote_and_production_runs_in_parallel(observed: dict[str, Any]) -> None:
    fanout = observed["fanout"]
    assert fanout["phase"] == "Succeeded"
    assert {s["state"] for s in fanout["stages"].values()} == {"Promoted"}
    spans = observed["spans"]
    assert set(spans) == {"staging", "prod-eu", "prod-us"}
    eu, us, staging = spans["prod-eu"], spans["prod-us"], spans["staging"]
    assert min(eu[0], us[0]) >= staging[1]  # both after staging ended
    assert max(eu[0], us[0]) < min(eu[1], us[1])  # and each began before the other ended


def test_the_run_links_its_stage_runs_and_three_rollout_histories(
    observed: dict[str, Any],
) -> None:
    ui = observed["ui"]
    run_id = observed["fanout"]["workflow_id"]
    assert "3" in ui["relationships_tab"]  # its three stage runs, as children of one history
    hrefs = [href for _, href in ui["links"]]
    for stage in ("staging", "prod-eu", "prod-us"):
        assert f"/namespaces/pipelines/workflows/{quote(f'{run_id}/{stage}', safe='')}" in hrefs
    rollouts = {
        cluster: [h for h in hrefs if h.startswith(f"/namespaces/{namespace}/workflows/rollout")]
        for cluster, namespace in observed["namespaces"].items()
    }
    assert all(len(links) == 1 for links in rollouts.values()), rollouts
    for cluster, stage in (("hub", "staging"), ("prod-eu", "prod-eu"), ("prod-us", "prod-us")):
        wid = observed["fanout"]["stages"][stage]["rolloutWorkflowId"]
        assert rollouts[cluster] == [
            f"/namespaces/{observed['namespaces'][cluster]}/workflows/{quote(wid, safe='')}"
        ]
    opened = {o["href"]: o for o in ui["opened"]}
    assert set(opened) == set(hrefs)
    assert all(o["status_shown"] for o in opened.values())

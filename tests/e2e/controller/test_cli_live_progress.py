"""The CLI tells what is known (issue 22): during an evaluation, the count of cases done out
of the cases that will run (the dataset's, not maxCases), from the step's own heartbeat."""

from __future__ import annotations

import asyncio

from harness.helpers import eventually
from harness.rollout_harness import SIM_PREFIX, RolloutHarness, golden_jsonl

from controller.temporal.rollouts import Rollouts

CASES = 30


async def test_the_evaluation_count_is_live_and_out_of_the_cases_that_run(
    ctl: RolloutHarness,
) -> None:
    ctl.golden_configmap("golden-live", golden_jsonl(CASES))
    evaluation = {
        "datasetRef": {"configMapRef": {"name": "golden-live", "key": "cases.jsonl"}},
        "minAccuracy": "0.10",
        "maxCases": 500,
    }
    namespace = ["annotate", "namespace", ctl.namespace, "--overwrite"]
    ctl.kubectl(*namespace, f"{SIM_PREFIX}latency-ms=300")  # ~9 s of evaluation
    try:
        ctl.create_dm("live", {"model": "laya:en", "rollout": {"evaluation": evaluation}})
        await eventually(
            lambda: ctl.status("live").get("phase") == "Evaluating", 120, what="Evaluating"
        )
        wid = ctl.status("live")["rollout"]["workflowId"]
        rollouts = Rollouts(ctl.client, ctl.task_queue)
        seen: list[tuple[int, int]] = []
        for _ in range(200):  # bounded: 60 s at most
            live = await rollouts.evaluation_live(wid)
            if live is not None:
                seen.append(live)
            if any(0 < done < total for done, total in seen) or (
                ctl.status("live").get("phase") != "Evaluating"
            ):
                break
            await asyncio.sleep(0.3)
        assert any(0 < done < total for done, total in seen), seen
        assert {total for _, total in seen} == {CASES}, seen
    finally:
        ctl.kubectl(*namespace, f"{SIM_PREFIX}latency-ms-")

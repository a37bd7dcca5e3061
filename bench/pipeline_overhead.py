"""Benchmark: what a DecisionModelPipeline adds over its stages' own rollouts (issue 25's goal:
under 1 s per stage plus the soak).

Two clusters as ``make demo-pipeline`` runs them (localenv.pipeline_demo). ``--runs`` pipeline
revisions, each staging → prod with ``--soak`` and Automatic approval, one after another. From
Temporal's own records (start and close times of the pipeline run, each stage's child workflow
in the pipelines' namespace, and each cluster's RolloutWorkflow in its own namespace), per
stage:

- before: the child's start → its cluster's rollout start (the apply, and the cluster's
  controller taking it up, as it would after a `kubectl apply`);
- after: the rollout's close → the child's close (the verdict reaching the pipeline);
- gap: prod's child start - (staging's child close + soak): the pipeline's own scheduling.

Prints the figures beside the floor; asserts nothing. Run inside the test namespace:

    hack/in-netns.sh .venv/bin/python bench/pipeline_overhead.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client

from decisionmodel.api.spec import parse_duration
from localenv.multicluster import MultiClusterEnv
from localenv.pipeline_demo import (
    PIPELINES_NS,
    ROLLOUT_NS,
    Demo,
    wait_for,
)

FLOOR_SECONDS = 1.0


async def times(address: str, namespace: str, wid: str) -> tuple[datetime, datetime]:
    client = await Client.connect(address, namespace=namespace)
    d = await client.get_workflow_handle(wid).describe()
    assert d.start_time is not None and d.close_time is not None, wid
    return d.start_time, d.close_time


async def stage_figures(env: MultiClusterEnv, pipeline: dict[str, Any]) -> dict[str, float]:
    wid = pipeline["workflowId"]
    stages = {s["name"]: s for s in pipeline["stages"]}
    out: dict[str, float] = {}
    for name, cluster in (("staging", "hub"), ("prod", "prod")):
        child = await times(env.temporal.address, PIPELINES_NS, f"{wid}/{name}")
        rollout = await times(
            env.temporal.address, ROLLOUT_NS[cluster], stages[name]["rolloutWorkflowId"]
        )
        out[f"{name} before"] = (rollout[0] - child[0]).total_seconds()
        out[f"{name} after"] = (child[1] - rollout[1]).total_seconds()
        out[f"{name} rollout"] = (rollout[1] - rollout[0]).total_seconds()
        out[f"{name} start"] = child[0].timestamp()
    return out


def one_run(demo: Demo, index: int, soak: str) -> dict[str, float]:
    tag = f"b{index}"
    demo.put_model(tag, revision=f"{tag}-1", accuracy=0.93)
    before = demo.pipeline().get("revision")
    began = time.monotonic()
    demo.apply_pipeline(f"laya:{tag}", evaluation=False, approval="Automatic", soak=soak)
    wait_for(lambda: demo.pipeline().get("revision") not in (None, before), 60, "a new run")
    wait_for(lambda: demo.pipeline().get("phase") in ("Succeeded", "Failed"), 600, "the run")
    wall = time.monotonic() - began
    pipeline = demo.pipeline()
    figures = asyncio.run(stage_figures(demo.env, pipeline))
    # The child workflows' close times give staging's end; prod starts after it plus the soak.
    staging_close = figures["staging start"] + figures["staging before"]
    staging_close += figures["staging rollout"] + figures["staging after"]
    gap = figures["prod start"] - staging_close - parse_duration(soak).total_seconds()
    return {**figures, "gap": gap, "wall": wall, "ok": float(pipeline.get("phase") == "Succeeded")}


def report(runs: list[dict[str, float]], soak: str) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"\npipeline overhead, {len(runs)} runs, staging -> prod, soak {soak}, Automatic")
    print(f"{'figure':<42}{'median s':>10}{'max s':>9}   floor")
    rows = [
        ("staging: child start -> rollout start", "staging before"),
        ("staging: rollout close -> child close", "staging after"),
        ("prod: staging done + soak -> child start", "gap"),
        ("prod: child start -> rollout start", "prod before"),
        ("prod: rollout close -> child close", "prod after"),
    ]
    for label, key in rows:
        worst = max(r[key] for r in runs)
        print(f"{label:<42}{med(key):>10.2f}{worst:>9.2f}   < {FLOOR_SECONDS:.0f} s per stage")
    print(f"{'the rollouts themselves (staging, prod)':<42}{med('staging rollout'):>10.2f}"
          f"{med('prod rollout'):>9.2f}")  # fmt: skip
    print(f"{'whole run, wall clock':<42}{med('wall'):>10.2f}")
    print(f"succeeded: {sum(int(r['ok']) for r in runs)}/{len(runs)}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/pipeline_overhead.py")
    parser.add_argument("--runs", type=int, default=3, choices=range(1, 11), metavar="1..10")
    parser.add_argument("--soak", default="5s")
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="dmrollout-bench-pipeline-"))
    namespaces = tuple(n for n in {*ROLLOUT_NS.values(), PIPELINES_NS} if n != "default")
    with MultiClusterEnv(state, ("hub", "prod"), temporal_namespaces=namespaces) as env:
        demo = Demo(env, state)
        demo.install()
        runs = [one_run(demo, i, args.soak) for i in range(args.runs)]
    report(runs, args.soak)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

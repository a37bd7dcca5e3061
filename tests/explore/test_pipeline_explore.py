"""The lifecycle explorer for pipelines (docs/explore.md "Pipelines"): random pipeline lifecycles
on Temporal's time-skipping server (pipeline_explore), judged by pipeline_checks.

``make test`` runs the seeds of ``CI_SEEDS``; ``make explore`` runs ``EXPLORE_PIPELINES``
lifecycles (default 200) from ``EXPLORE_SEED``. A violation prints the seed and its trace.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from harness.tiers import full
from harness.time_skipping import register_search_attributes, start_time_skipping
from pipeline_checks import check_applies, check_ends, replayed
from pipeline_explore import OPS, lifecycle
from temporalio.testing import WorkflowEnvironment

from workflows import search_attributes as sa

CI_SEEDS = tuple(range(9100, 9112))
OPERATIONS = 15


def seeds() -> tuple[int, ...]:
    if not full("explore"):
        return CI_SEEDS
    first = int(os.environ.get("EXPLORE_SEED") or time.time())
    return tuple(range(first, first + int(os.environ.get("EXPLORE_PIPELINES", "200"))))


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await start_time_skipping()
    await register_search_attributes(environment, sa.registered(pipelines=True))
    yield environment
    await environment.shutdown()


async def one(
    env: WorkflowEnvironment, seed: int
) -> tuple[list[str], list[str], int, Counter[str]]:
    async with AsyncExitStack() as stack:
        life = await asyncio.wait_for(lifecycle(env, seed, OPERATIONS, stack), 600)
        try:
            left = [t.split(": ", 1)[1] for t in life.trace if t.startswith("still running")]
            bad = check_applies(life) + check_ends(life, left)
            histories, unreplayable = await replayed(life)
        finally:
            await life.fleet.close([r.wid for r in life.runs], life.names)
    return bad + unreplayable, life.trace, histories, life.ops


@pytest.mark.timeout(7200)
async def test_random_pipeline_lifecycles(env: WorkflowEnvironment) -> None:
    failed, histories, ops = [], 0, Counter[str]()
    for seed in seeds():
        bad, trace, replays, kinds = await one(env, seed)
        histories += replays
        ops += kinds
        if bad:
            failed.append("\n".join([*(f"VIOLATION {b}" for b in bad), *(f"  {t}" for t in trace)]))
    print(
        f"\npipeline explorer: {len(seeds())} lifecycles, {sum(ops.values())} operations "
        f"({', '.join(f'{k} {n}' for k, n in ops.most_common())}), {histories} histories "
        f"replayed, {len(failed)} with violations"
    )
    assert not failed, "\n\n".join(failed)


def test_every_operation_is_drawn() -> None:
    assert {k for k, _ in OPS} >= {"approve", "abort", "supersede", "retry", "cluster_away"}

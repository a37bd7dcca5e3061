"""The lifecycle explorer for pipelines (docs/explore.md "Pipelines"): random pipeline lifecycles
on Temporal's time-skipping server (pipeline_explore), judged by pipeline_checks.

``make test`` runs the seeds of ``CI_SEEDS``; ``make explore`` runs ``EXPLORE_PIPELINES``
lifecycles (default 200) from ``EXPLORE_SEED``. A violation prints the seed and its trace.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from workflows import search_attributes as sa

# Seed 21: a stopped run's stage, its cluster away, applied its spec when the cluster came back
# (fixed by workflows/pipeline_stage.py APPLY_STOPS_ON_CANCEL_PATCH); kept as a regression.
# Four lifecycles: about 6 s alone, but the JVM test server slows down many times over beside
# `make test`'s other tier (13 lifecycles took 6 minutes there); `make explore` runs hundreds.
CI_SEEDS = (21, 9100, 9101, 9102)
OPERATIONS = 15


def seeds() -> tuple[int, ...]:
    if not full("explore"):
        return CI_SEEDS
    first = int(os.environ.get("EXPLORE_SEED") or time.time())
    return tuple(range(first, first + int(os.environ.get("EXPLORE_PIPELINES", "200"))))


# A lifecycle takes about a second of real time alone; one that takes this long is the test
# server's failure (it has stalled for good, not slowed down).
LIFECYCLE_SECONDS = 300


class SkippingServer:
    """Temporal's time-skipping test server (a JVM), started again when it stalls: on long
    batches or a loaded machine it has answered "Timeout expired", an h2 error, or nothing.
    Its failures are the environment's, never a lifecycle's verdict."""

    def __init__(self) -> None:
        self.env: WorkflowEnvironment | None = None
        self.restarts = 0

    async def start(self) -> WorkflowEnvironment:
        self.env = await start_time_skipping()
        await register_search_attributes(self.env, sa.registered(pipelines=True))
        return self.env

    async def restart(self) -> WorkflowEnvironment:
        self.restarts += 1
        if self.env is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.env.shutdown(), 30)
        return await self.start()


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[SkippingServer]:
    found = SkippingServer()
    await found.start()
    yield found
    if found.env is not None:
        await found.env.shutdown()


async def one(
    env: WorkflowEnvironment, seed: int
) -> tuple[list[str], list[str], int, Counter[str]]:
    async with AsyncExitStack() as stack:
        life = await asyncio.wait_for(lifecycle(env, seed, OPERATIONS, stack), LIFECYCLE_SECONDS)
        try:
            left = [t.split(": ", 1)[1] for t in life.trace if t.startswith("still running")]
            bad = check_applies(life) + check_ends(life, left)
            histories, unreplayable = await replayed(life)
        finally:
            await life.fleet.close([r.wid for r in life.runs], life.names)
    return bad + unreplayable, life.trace, histories, life.ops


async def one_on(
    server: SkippingServer, seed: int
) -> tuple[list[str], list[str], int, Counter[str]]:
    """The lifecycle of ``seed``; once more on a fresh test server when the server failed it
    (a check that fails is a verdict and is never run again)."""
    assert server.env is not None
    try:
        return await one(server.env, seed)
    except (TimeoutError, RPCError) as e:
        print(f"seed {seed}: the test server failed ({type(e).__name__}: {e}); once more")
        return await one(await server.restart(), seed)


@pytest.mark.timeout(7200)
async def test_random_pipeline_lifecycles(server: SkippingServer) -> None:
    failed, histories, ops = [], 0, Counter[str]()
    for seed in seeds():
        bad, trace, replays, kinds = await one_on(server, seed)
        histories += replays
        ops += kinds
        if bad:
            failed.append("\n".join([*(f"VIOLATION {b}" for b in bad), *(f"  {t}" for t in trace)]))
    print(
        f"\npipeline explorer: {len(seeds())} lifecycles, {sum(ops.values())} operations "
        f"({', '.join(f'{k} {n}' for k, n in ops.most_common())}), {histories} histories "
        f"replayed, {len(failed)} with violations, {server.restarts} test server restarts"
    )
    assert not failed, "\n\n".join(failed)


def test_every_operation_is_drawn() -> None:
    assert {k for k, _ in OPS} >= {"approve", "abort", "supersede", "retry", "cluster_away"}

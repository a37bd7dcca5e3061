"""The chaos matrix (issue 10): a rollout survives each fault at each step.

Per cell (``chaos_cell.run_cell``): the candidate's rollout ends promoted, no revision ever
has two Deployments, Jobs or PVCs, nothing of a revision that is neither stable nor candidate
is left once the reaper had its grace, and the stable answered every probe while the fault was
on. How long the rollout took to move after the fault cleared is reported in the table, not
asserted.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from chaos_cell import run_cell
from chaos_matrix import Cell
from chaos_rig import CellRig
from chaos_table import CellResult
from temporalio.client import Client

from localenv.cluster import LocalCluster
from localenv.env import LocalEnv

# Up to a 2-minute fault, then up to 5 minutes for the outcome and one for the reaper.
pytestmark = pytest.mark.timeout(1200)


async def test_chaos_cell(
    cell: Cell,
    chaos_cluster: LocalCluster,
    chaos_client: Client,
    local_env: LocalEnv,
    chaos_logs: Path,
    chaos_results: list[CellResult],
) -> None:
    result = CellResult(cell.fault, cell.step, cell.seconds)
    chaos_results.append(result)
    began = time.monotonic()
    rig = CellRig(cell, chaos_cluster, local_env.temporal, chaos_client, chaos_logs / cell.id)
    try:
        rig.start()
        await run_cell(rig, result)
    except BaseException as e:
        if result.outcome == "not run":
            result.outcome = f"error: {type(e).__name__}"
        result.notes.append(f"{type(e).__name__}: {str(e)[:400]}")
        raise
    finally:
        await rig.stop()
        result.wall = time.monotonic() - began
    assert result.passed, f"{cell.id}: {result.problems()}; notes: {result.notes}"

"""How much the explorer runs: ``make explore`` (``DMROLLOUT_FULL=explore``) random lifecycles
for ``EXPLORE_SECONDS`` (default 1800), ``EXPLORE_PARALLEL`` at a time (default 6),
``EXPLORE_OPS`` operations each (default 20), from ``EXPLORE_SEED`` (default: the clock); a
failing one is shrunk in at most ``EXPLORE_SHRINK_RUNS`` runs. ``make test`` runs the same two
seeds every time (``CI_SEEDS``), so a red CI is a reproducible finding."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from harness.tiers import full

CI_SEEDS = (3401, 3402)


@dataclass(frozen=True)
class Budget:
    seeds: tuple[int, ...] | None  # None: as many from ``first`` as the time allows
    first: int
    seconds: float
    parallel: int
    ops: int
    shrink_runs: int


def budget() -> Budget:
    if not full("explore"):
        return Budget(CI_SEEDS, CI_SEEDS[0], 900.0, 2, 20, 0)
    first = int(os.environ.get("EXPLORE_SEED") or time.time())
    return Budget(
        None,
        first,
        float(os.environ.get("EXPLORE_SECONDS", "1800")),
        int(os.environ.get("EXPLORE_PARALLEL", "6")),
        int(os.environ.get("EXPLORE_OPS", "20")),
        int(os.environ.get("EXPLORE_SHRINK_RUNS", "8")),
    )

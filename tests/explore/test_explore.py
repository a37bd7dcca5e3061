"""The lifecycle explorer (issue 34 item 2): random sequences of user operations and faults
against the live local environment, judged by the invariants of ``explore_checks``.

``test_kept_sequences``: every sequence in ``seeds/`` (each one a violation found once, shrunk,
and fixed since) passes. ``test_random_lifecycles``: the budget of ``conftest.budget``; a
violation prints its seed and trace, is shrunk (``make explore``), and is written to
``build/explore/violations/`` to be kept in ``seeds/`` with its fix.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from explore_budget import Budget, budget
from explore_checks import Violation
from explore_ops import GLOBAL_KINDS, Sequence, generate
from explore_run import Env, Outcome, run, shrink

SEEDS = Path(__file__).resolve().parent / "seeds"
# The kept sequences, and any given in EXPLORE_REPLAY (comma-separated paths, e.g. a violation
# written to build/explore/violations/) to run one again before keeping it.
KEPT = sorted(SEEDS.glob("*.json")) + [
    Path(p) for p in os.environ.get("EXPLORE_REPLAY", "").split(",") if p.strip()
]


def _report(outcome: Outcome) -> str:
    lines = [f"seed {outcome.seq.seed}: {len(outcome.seq.ops)} operations, {outcome.seconds:.0f}s"]
    lines += [f"  VIOLATION {v}" for v in outcome.violations]
    lines += [f"    {t}" for t in outcome.trace]
    return "\n".join(lines)


@pytest.mark.timeout(1800)
async def test_kept_sequences(explore_env: Env) -> None:
    """Every kept sequence, side by side (a few at a time, as the random lanes run)."""
    assert KEPT, f"no kept sequence in {SEEDS}"
    limit = asyncio.Semaphore(3)

    async def one(path: Path) -> Outcome:
        async with limit:
            return await run(explore_env, Sequence.loads(path.read_text()), f"kept-{path.stem}")

    outcomes = await asyncio.gather(*(one(p) for p in KEPT))
    failed = [f"{p.name}:\n{_report(o)}" for p, o in zip(KEPT, outcomes, strict=True) if not o.ok]
    assert not failed, "\n\n".join(failed)


# A lifecycle starts while the budget's time lasts and may take up to about 25 minutes (20
# operations, then up to four settles of five minutes each): the timeout leaves it that.
@pytest.mark.timeout(budget().seconds + 1800)
async def test_random_lifecycles(explore_env: Env, explore_summary: list[str]) -> None:
    plan = budget()
    outcomes = await _explore(explore_env, plan)
    failed = [o for o in outcomes if not o.ok]
    kept = [await _keep(explore_env, plan, o) for o in failed]
    explore_summary.extend(_summary(plan, outcomes, kept))
    assert not failed, "\n\n".join(_report(o) for o in failed)


async def _explore(env: Env, plan: Budget) -> list[Outcome]:
    seeds = iter(plan.seeds) if plan.seeds is not None else iter(range(plan.first, 1 << 62))
    deadline = time.monotonic() + plan.seconds
    outcomes: list[Outcome] = []

    async def lane(index: int) -> None:
        # Environment faults (Temporal, the API server) from one lane only: each stops every
        # lifecycle beside it, so more lanes would mean more of them, not more coverage.
        while time.monotonic() < deadline:
            seed = next(seeds, None)
            if seed is None:
                return
            seq = Sequence(seed, generate(seed, plan.ops, allow_global=index == 0))
            try:
                outcomes.append(await run(env, seq, f"seed-{seed}"))
            except Exception as e:  # the explorer's own failure: reported, the lanes go on
                broken = Violation("the explorer runs each lifecycle to its end", repr(e), 0.0)
                outcomes.append(Outcome(seq, [broken], [f"explorer error {e!r}"], 0, 0, 0.0))

    await asyncio.gather(*(lane(i) for i in range(plan.parallel)))
    return outcomes


async def _keep(env: Env, plan: Budget, outcome: Outcome) -> Path:
    """Shrink the failing sequence (within the budget's runs) and write it out to be kept."""
    target = {v.invariant for v in outcome.violations}
    n = 0

    async def attempt(seq: Sequence) -> Outcome:
        nonlocal n
        n += 1
        return await run(env, seq, f"shrink-{seq.seed}-{n}")

    small = await shrink(outcome.seq, target, attempt, plan.shrink_runs)
    small.note = "; ".join(sorted(target))
    out = env.logs / "violations" / f"seed-{outcome.seq.seed}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(small.dumps())
    return out


def _summary(plan: Budget, outcomes: list[Outcome], kept: list[Path]) -> list[str]:
    kinds = Counter(op.kind for o in outcomes for op in o.seq.ops)
    ops = sum(kinds.values())
    faults = sum(n for k, n in kinds.items() if k in GLOBAL_KINDS)
    lines = [
        f"lifecycles {len(outcomes)} (first seed {plan.first}), operations {ops} "
        f"({faults} environment faults), invariant checks {sum(o.checks for o in outcomes)}, "
        f"histories replayed {sum(o.histories for o in outcomes)}, "
        f"violations {sum(len(o.violations) for o in outcomes)}",
        "operations: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()),
    ]
    lines += [f"violation, shrunk sequence in {p}" for p in kept]
    return lines

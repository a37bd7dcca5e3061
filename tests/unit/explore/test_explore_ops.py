"""The lifecycle explorer's pure parts: a seed gives one sequence, a kept sequence reads back
as written, and the shrinker keeps only what the failure needs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "explore"))

from explore_checks import Violation
from explore_ops import GLOBAL_KINDS, WEIGHTS, Op, Sequence, final_desired, generate
from explore_run import Outcome, shrink


def test_a_seed_gives_one_sequence_and_another_seed_another() -> None:
    assert generate(7, 40) == generate(7, 40)
    assert generate(7, 40) != generate(8, 40)
    assert len(generate(7, 25)) == 25


def test_every_operation_kind_turns_up_and_environment_faults_can_be_left_out() -> None:
    kinds = {op.kind for seed in range(60) for op in generate(seed, 30)}
    assert kinds == set(WEIGHTS)
    quiet = {op.kind for seed in range(60) for op in generate(seed, 30, allow_global=False)}
    assert not quiet & GLOBAL_KINDS


def test_a_kept_sequence_reads_back_as_written() -> None:
    seq = Sequence(5, generate(5, 20), note="settles on its last spec")
    again = Sequence.loads(seq.dumps())
    assert (again.seed, again.ops, again.note) == (seq.seed, seq.ops, seq.note)


def test_the_desired_spec_follows_the_spec_changes_only() -> None:
    ops = [Op("tag", "bad"), Op("gate", "on"), Op("approve"), Op("promotion", "Manual")]
    desired = final_desired(ops)
    assert (desired.tag, desired.gate, desired.manual) == ("bad", True, True)
    assert not desired.should_serve
    assert final_desired([*ops, Op("gate", "off")]).should_serve


async def test_the_shrinker_keeps_the_two_operations_the_failure_needs() -> None:
    # A stand-in failure: the invariant breaks when an undo is followed later by a tag change.
    ops = [Op("wait", "2"), Op("undo"), Op("scale", "0"), Op("wait", "5"), Op("tag", "v3")]
    ops += [Op("approve"), Op("delete_pod")]
    runs = 0

    async def fails(seq: Sequence) -> Outcome:
        nonlocal runs
        runs += 1
        kinds = [o.kind for o in seq.ops]
        broken = "undo" in kinds and "tag" in kinds[kinds.index("undo") :]
        found = [Violation("settles on its last spec", "", 0.0)] if broken else []
        return Outcome(seq, found, [], 0, 0, 0.0)

    small = await shrink(Sequence(1, ops), {"settles on its last spec"}, fails, budget=50)
    assert small.ops == [Op("undo"), Op("tag", "v3")]
    assert runs <= 50

"""The next build of the rollouts' worker, for the upgrade test (tests/e2e/test_worker_upgrade.py).

``python -m harness.next_build worker`` is ``dmrollout worker`` with RolloutWorkflow's code
changed the way a release might change it: a step the current code does not have, before the
first activity. Replaying a history written by the current code on this one fails with a
non-determinism error, so only pinning keeps the rollouts in flight during an upgrade alive.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from decisionmodel.rollout.contracts import RolloutInput, RolloutOutcome
    from workflows.rollout import RolloutWorkflow

# The step the next build adds: a timer (visible as TimerStarted in its histories).
NEXT_STEP = timedelta(milliseconds=10)


@workflow.defn(name="RolloutWorkflow")
class NextRolloutWorkflow(RolloutWorkflow):
    @workflow.run
    async def run(self, inp: RolloutInput) -> RolloutOutcome:
        await workflow.sleep(NEXT_STEP)
        return await super().run(inp)


def main() -> int:
    from controller.cli.main import main as cli
    from controller.worker import run

    # By its module name, not this __main__: the workflow sandbox re-imports the module a
    # workflow class was defined in.
    from harness.next_build import NextRolloutWorkflow as Next

    run.RolloutWorkflow = Next  # type: ignore[misc]
    return cli()


if __name__ == "__main__":
    raise SystemExit(main())

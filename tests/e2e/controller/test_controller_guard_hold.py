"""A guard holding a rollout holds it steadily, and the controller keeps track of it (issue 34).

- Every retry of the held step used to write the step's phase again (Starting), and the
  controller then put back the phase the guard calls for (Degraded): the phase flapped on every
  retry, each flap a status write, a watch event and a metric transition.
- A DecisionModel in phase Degraded was not looked up in Temporal (the controller describes the
  run status.rollout names only while a rollout phase holds): after a controller restart, a
  spec change started a second run beside the guard-held one, which nothing cancelled and which
  went on (and could promote) once the guard was fixed.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.helpers import async_assert_eventually, eventually
from harness.rollout_harness import ControllerProcess, RolloutHarness, put_model
from temporalio.client import WorkflowExecutionStatus

from controller.temporal.rollouts import dm_query
from decisionmodel.rollout.contracts import RolloutOutcome
from decisionmodel.vocabulary import RolloutResult
from localenv.paths import python_tool

AUTH = {"apiKeySecretRef": {"name": "key", "key": "token"}}
# Retries of a held step back off 1, 2, 4, 8, 16, then 30 s apart.
RETRIES = 3


def unlabelled_key(h: RolloutHarness) -> None:
    """An API-key Secret without decisionmodel.io/api-key: the start step's guard holds."""
    h.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "key", "namespace": h.namespace},
            "stringData": {"token": "k-123"},
        }
    )


def held(h: RolloutHarness, name: str) -> bool:
    """Seed 001: phase Degraded, Ready=False SecretNotAllowed (asserts, saying what it saw)."""
    status = h.status(name)
    ready = h.held(name, "Ready", "SecretNotAllowed")
    assert status.get("phase") == "Degraded" and ready is not None, status
    return True


def run_of(h: RolloutHarness, name: str) -> str:
    wid: str = (h.status(name).get("rollout") or {}).get("workflowId") or ""
    return wid


async def attempt(h: RolloutHarness, wid: str) -> int:
    """The attempt of the run's pending step (0: none pending)."""
    desc = await h.client.get_workflow_handle(wid).describe()
    pending = desc.raw_description.pending_activities
    return max((p.attempt for p in pending), default=0)


async def running(h: RolloutHarness, name: str) -> list[str]:
    query = f"{dm_query(h.namespace, name)} AND ExecutionStatus = 'Running'"
    return [wf.id async for wf in h.client.list_workflows(query)]


@contextmanager
def status_watch(h: RolloutHarness, name: str, log: Path, field: str = "phase") -> Iterator[Path]:
    """Every value the API server holds of ``status.<field>`` of ``name``, one line per change
    of the object, from `kubectl get -w`: a poll misses one that lasts a few hundred ms."""
    cmd = [python_tool("kubectl"), "--kubeconfig", str(h.cluster.kubeconfig), "-n", h.namespace]
    cmd += ["get", "dm", name, "-w", "-o", f"jsonpath={{.status.{field}}}{{'\\n'}}"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
    try:
        yield log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def transitions(log: Path) -> list[str]:
    """The values seen, a repeat of the same value folded into one."""
    seen: list[str] = []
    for line in log.read_text().splitlines():
        value = line.strip().strip("'")
        if value and (not seen or seen[-1] != value):
            seen.append(value)
    return seen


async def next_attempt(h: RolloutHarness, wid: str, after: int) -> int:
    """Waits (up to the longest backoff and some) until the held step is retried."""
    return await async_assert_eventually(
        lambda: _later(h, wid, after), 60, interval=0.5, what=f"attempt {after + 1}"
    )


async def _later(h: RolloutHarness, wid: str, after: int) -> int:
    n = await attempt(h, wid)
    return n if n > after else 0


async def test_a_guard_holds_the_phase_steady_over_the_retries(
    ctl: RolloutHarness, tmp_path: Path
) -> None:
    unlabelled_key(ctl)
    ctl.create_dm("steady", {"model": "laya:en", "auth": AUTH})
    await eventually(lambda: held(ctl, "steady"), 90, what="Degraded, Ready=False SecretNotAllowed")
    wid = run_of(ctl, "steady")
    with status_watch(ctl, "steady", tmp_path / "phases") as log:
        await eventually(lambda: transitions(log) == ["Degraded"], 30, what="the watch")
        n = await attempt(ctl, wid)
        for _ in range(RETRIES):
            n = await next_attempt(ctl, wid, n)
        # The controller reconciles the retry's write (its watch event) within a second or so:
        # one more retry later, whatever the last one wrote has been answered.
        await next_attempt(ctl, wid, n)
        seen = transitions(log)
        assert seen == ["Degraded"], f"{len(seen) - 1} phase changes over {RETRIES} retries: {seen}"
        assert held(ctl, "steady")
        ctl.kubectl("label", "secret", "key", "decisionmodel.io/api-key=true")
        await eventually(
            lambda: ctl.status("steady").get("phase") == "Ready", 120, what="Ready after the fix"
        )
    # After the fix the step's phase came back, then the rollout went on to Ready.
    after = transitions(log)
    assert after[0] == "Degraded" and after[-1] == "Ready", after
    assert "Starting" in after, after


async def test_a_guard_held_run_is_superseded_by_a_spec_change_after_a_controller_restart(
    ctl: RolloutHarness, controller: ControllerProcess, tmp_path: Path
) -> None:
    tag = f"gh{uuid.uuid4().hex[:6]}"
    put_model("laya", tag, accuracy=0.95, revision=tag)
    unlabelled_key(ctl)
    ctl.create_dm("restarted", {"model": "laya:en", "auth": AUTH})
    await eventually(lambda: held(ctl, "restarted"), 90, what="held by the unlabelled key")
    stale = run_of(ctl, "restarted")
    # Late in the backoff (30 s between retries from the 7th attempt on): the restarted
    # controller's first look falls between two retries, while the phase is the guard's.
    n = await attempt(ctl, stale)
    while n < 7:
        n = await next_attempt(ctl, stale, n)
    await eventually(lambda: held(ctl, "restarted"), 30, what="held again after the retry")
    with status_watch(ctl, "restarted", tmp_path / "runs", "rollout.workflowId") as log:
        controller.stop()
        try:
            ctl.update_spec("restarted", {"model": f"laya:{tag}"})
        finally:
            controller.start()
        # The new spec's run replaces the stale one at the restarted controller's first look.
        await eventually(
            lambda: run_of(ctl, "restarted") not in ("", stale), 90, what="the new spec's run"
        )
        fresh = run_of(ctl, "restarted")
        stale_handle = ctl.client.get_workflow_handle(stale, result_type=RolloutOutcome)

        async def one_run_left() -> bool:
            closed = (await stale_handle.describe()).status != WorkflowExecutionStatus.RUNNING
            return closed and await running(ctl, "restarted") == [fresh]

        await async_assert_eventually(one_run_left, 60, interval=1, what="stale run superseded")
    # Superseded before its held step was tried again: a retry of it used to write its phase
    # and its run into status (and so made it visible again, up to 30 s later: two runs side by
    # side meanwhile; and never, once the retries no longer rewrite the phase).
    runs = transitions(log)
    assert runs == [stale, fresh], f"status.rollout went {runs}"
    outcome = await stale_handle.result()
    assert outcome.result == RolloutResult.SUPERSEDED, outcome
    ctl.kubectl("label", "secret", "key", "decisionmodel.io/api-key=true")
    await eventually(
        lambda: (ctl.status("restarted").get("stableRevision") or {}).get("model") == f"laya:{tag}",
        180,
        what="the new spec promoted",
    )
    # Nothing else was ever promoted: no previous revision (the stale one never was stable).
    assert not ctl.status("restarted").get("previousRevision"), ctl.status("restarted")

"""Run one lifecycle: its operations under the continuous checks, then the faults healed, the
user's next steps (approve what waits, retry what failed, one more GitOps commit) and the final
checks. And shrink a failing sequence to a shorter one that fails the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from explore_checks import ROLLOUT_PHASES, Checker, Violation, kstatus
from explore_ops import BAD_TAG, GOOD_TAGS, UNSCHEDULABLE_CPU, Desired, Op, Sequence
from explore_rig import Faults, Lifecycle
from harness.argocd_health import health
from temporalio.client import Client

from decisionmodel.vocabulary import Phase
from localenv.cluster import LocalCluster
from localenv.temporal import TemporalDevServer

T = TypeVar("T")
SETTLE_SECONDS = 300.0
LEFTOVER_SECONDS = 90.0
SAMPLE_SECONDS = 2.0
# Longer than the controller takes to act on a spec change it has seen (it starts the run in
# the same reconcile), so two restful looks this far apart are rest.
STEADY_SECONDS = 12.0
# A rest ends when nothing shown has changed for this long (a hold waits for a fix): longer than
# a prefetch or an evaluation of the explorer's small models takes without a visible change.
STILL_SECONDS = 60.0
# How long after this lifecycle's last own fault a stable short of replicas is taken for one
# being restored (the checker's ANSWER_GRACE: a Pod replaced, warmed and inspected).
RECOVERY_SECONDS = 90.0
# Set-up (processes started, DecisionModel created) to its first phase, in quiet time.
FIRST_PHASE_SECONDS = 120.0


@dataclass
class Env:
    cluster: LocalCluster
    temporal: TemporalDevServer
    client: Client
    logs: Path
    faults: Faults = field(default_factory=Faults)


@dataclass
class Outcome:
    seq: Sequence
    violations: list[Violation]
    trace: list[str]
    checks: int
    histories: int
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.violations


async def run(env: Env, seq: Sequence, name: str) -> Outcome:
    t0 = time.monotonic()
    # Not while Temporal or the API server is down for another lifecycle: its set-up is no
    # operation of the sequence, and the final reads below are none either. Built in a thread:
    # the harness's constructor calls kubectl, and a blocked event loop cannot heal the fault
    # another lane holds (an 8-lane run hung so: the API server stopped, never started again).
    async with env.faults.lock:
        life = await asyncio.to_thread(
            Lifecycle, env.cluster, env.temporal, env.client, env.logs / name, env.faults
        )
        await asyncio.to_thread(life.prepare)
    checker = Checker(life)
    trace = Trace(life.logs / "trace.txt", t0)
    trace.note(f"seed {seq.seed}, namespace {life.namespace}: {' '.join(map(str, seq.ops))}")
    life.supervise()
    sampler: asyncio.Task[None] | None = None
    histories = 0
    try:
        trace.note(await _first_phase(life, checker))
        sampler = asyncio.create_task(_sample(checker))
        await _operations(life, checker, seq, trace)
        await _heal(life, trace)
        await _next_steps(life, checker, trace)
    finally:
        if sampler is not None:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
    try:
        async with env.faults.lock:
            histories = await checker.no_secrets_and_replay()
    finally:
        await life.stop()
        async with env.faults.lock:
            await asyncio.to_thread(life.delete)
    for v in checker.violations:
        trace.note(f"VIOLATION {v}")
    trace.note(f"done: {checker.checks} checks, {histories} histories replayed")
    return Outcome(seq, checker.violations, trace, checker.checks, histories, time.monotonic() - t0)


async def _first_phase(life: Lifecycle, checker: Checker) -> str:
    """Set-up ends when the new DecisionModel shows a phase: its controller and worker are
    processes started with it, which a loaded machine (CI: 3 lifecycles beside the other xdist
    worker's tests) took more than the checks' 25 s grace to bring up (seeds 3401 and 6013
    flagged "phase None"). Their start is no operation of the sequence; the wait is bounded in
    quiet time, and a DecisionModel still without a phase then is a violation."""
    start = time.monotonic()
    while True:
        obj = await asyncio.to_thread(life.dm)
        phase = ((obj or {}).get("status") or {}).get("phase")
        if phase:
            return f"set-up: phase {phase} after {time.monotonic() - start:.1f}s"
        if checker.quiet_for() > FIRST_PHASE_SECONDS:
            checker.flag(
                "a new DecisionModel shows a phase", f"none {FIRST_PHASE_SECONDS:.0f}s after set-up"
            )
            return "set-up: no phase"
        await asyncio.sleep(SAMPLE_SECONDS)


async def _sample(checker: Checker) -> None:
    while True:
        with contextlib.suppress(Exception):  # a sample lost to a restarting API server
            await checker.sample()
        await asyncio.sleep(SAMPLE_SECONDS)


class Trace(list[str]):
    """The lifecycle's story, timed from its start, also written line by line to ``trace.txt``
    to follow it live."""

    def __init__(self, path: Path, t0: float) -> None:
        super().__init__()
        self.path, self.t0 = path, t0
        path.unlink(missing_ok=True)  # a run of the same name before

    def note(self, line: str) -> None:
        self.append(f"{time.monotonic() - self.t0:7.1f}s {line}")
        with self.path.open("a") as f:
            f.write(self[-1] + "\n")


async def _rest(life: Lifecycle, checker: Checker) -> str:
    status = await settle(life, checker, "rest", judged=False)
    return _brief(status)


async def _operations(life: Lifecycle, checker: Checker, seq: Sequence, trace: Trace) -> None:
    pause = random.Random(seq.seed)
    for op in seq.ops:
        said = await _rest(life, checker) if op.kind == "rest" else await life.apply(op)
        trace.note(f"{op}: {said}")
        await asyncio.sleep(pause.choice((0.5, 1.0, 2.0, 4.0)))


# How long the final heal waits for the API server (another lane may have paused it) before it
# mends anything: a mend the API server refuses would leave the fault on.
HEAL_API_SECONDS = 120.0


async def _heal(life: Lifecycle, trace: Trace) -> None:
    """Every fault the sequence left in force ends, as an operator would mend it: once the API
    server answers, and judged by what the namespace carries, not only by what the rig recorded."""
    deadline = time.monotonic() + HEAL_API_SECONDS
    while not await asyncio.to_thread(life.api_answers) and time.monotonic() < deadline:
        await asyncio.sleep(2.0)
    for fault in await asyncio.to_thread(life.faults_on_namespace):
        life.runtime_fault = fault  # also one whose removal was refused earlier
        await asyncio.to_thread(life.heal_runtime)
    said = await asyncio.to_thread(life.heal_runtime)
    if life.desired.cpu == UNSCHEDULABLE_CPU:  # the request no node has: the spec is mended
        said += " " + await life.apply(Op("resources", "100m"))
    if life.foreign_service:
        said += " " + await life.apply(Op("foreign_service_gone"))
    if life.secret_unlabelled:
        said += " " + await life.apply(Op("secret_fix"))
    if life.record_key_gone:
        said += " " + await life.apply(Op("record_key_back"))
    for p in life.processes:
        if not p.alive():
            await asyncio.to_thread(p.start)
    trace.note(f"faults healed {said}".strip())


async def settle(
    life: Lifecycle, checker: Checker, what: str, tag: str | None = None, judged: bool = True
) -> dict[str, Any]:
    """The status once the DecisionModel rests: it has seen its spec, no rollout phase, and no
    run open unless one waits for an approval; twice, :data:`STEADY_SECONDS` apart, so a spec
    change the controller has not acted on yet is not taken for rest. With ``tag``: and the
    status speaks of that tag (serving it, failed on it, or holding it). A violation if it does
    not within the bound. Not ``judged`` (the ``rest`` operation): also once the status has not
    changed for :data:`STILL_SECONDS`, as a person watching ``kubectl get dm`` would stop
    waiting for a rollout held by a guard (it waits for a fix, not for time)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    status: dict[str, Any] = {}
    rested_at: float | None = None
    still = _Stillness()
    while time.monotonic() < deadline:
        status = await _resting(life, checker, tag)
        if not status:
            rested_at = None
        elif rested_at is None:
            rested_at = time.monotonic()
        elif time.monotonic() - rested_at >= STEADY_SECONDS:
            return status
        if not judged:
            obj = await asyncio.to_thread(life.dm) or {}
            if still.for_long(obj):
                return dict(obj.get("status") or {})
        await asyncio.sleep(2)
    obj = await asyncio.to_thread(life.dm) or {}
    status = obj.get("status") or {}
    if judged:
        checker.flag("settles within the bound", f"{what}: still {_brief(status)}")
    return status


class _Stillness:
    """Whether what ``kubectl get dm`` shows (phase, and each condition's status and reason)
    has stayed the same for :data:`STILL_SECONDS`."""

    def __init__(self) -> None:
        self.seen: tuple[Any, ...] = ()
        self.since = time.monotonic()

    def for_long(self, obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        shown = (
            status.get("phase"),
            tuple(
                (c.get("type"), c.get("status"), c.get("reason"))
                for c in status.get("conditions") or []
            ),
        )
        if shown != self.seen:
            self.seen, self.since = shown, time.monotonic()
        return time.monotonic() - self.since >= STILL_SECONDS


async def _resting(life: Lifecycle, checker: Checker, tag: str | None) -> dict[str, Any]:
    """The status if the DecisionModel rests now, else {}."""
    obj = await asyncio.to_thread(life.dm) or {}
    status: dict[str, Any] = obj.get("status") or {}
    if status.get("observedGeneration") != obj.get("metadata", {}).get("generation"):
        return {}
    phase = status.get("phase")
    if tag is not None and tag not in _tags_spoken_of(status, life.repo):
        return {}
    if phase == Phase.AWAITING_PROMOTION:
        return status
    if phase in ROLLOUT_PHASES or await _quiet(life, checker.running_runs()):
        return {}
    if _recovering(status) and time.monotonic() - life.touched_at < RECOVERY_SECONDS:
        return {}
    return status


def _recovering(status: dict[str, Any]) -> bool:
    """The stable is short of model-ready replicas: Pods the controller recreates and warms
    up after a deletion or a scale (seed 3420 judged that moment as the model's rest)."""
    degraded = next((c for c in status.get("conditions") or [] if c.get("type") == "Degraded"), {})
    return degraded.get("status") == "True" and degraded.get("reason") in (
        "NoModelReadyPods",
        "ReplicasNotModelReady",
    )


async def _quiet(life: Lifecycle, read: Awaitable[T]) -> T:
    """A read of Temporal made while no environment fault is in force (another lane may stop
    Temporal: its faults are taken under the same lock; a read during one failed the whole
    explorer run once, 8 lanes in)."""
    async with life.faults.lock:
        return await read


def _tags_spoken_of(status: dict[str, Any], repo: str) -> set[str]:
    phase = status.get("phase")
    tags = {_serving(status, repo)}
    if phase in (Phase.ROLLED_BACK, Phase.FAILED):
        tags.add(_tag_of(status.get("failedRevision"), repo))
    if phase == Phase.AWAITING_PROMOTION:
        tags.add(_tag_of(status.get("candidateRevision"), repo))
    return tags


def _brief(status: dict[str, Any]) -> str:
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    ready = next((c for c in conditions if c["type"] == "Ready"), {})
    stable = (status.get("stableRevision") or {}).get("model")
    return (
        f"phase {status.get('phase')}, stable {stable}, Ready {ready.get('status')}/"
        f"{ready.get('reason')}: {str(ready.get('message'))[:160]}"
    )


async def _next_steps(life: Lifecycle, checker: Checker, trace: Trace) -> None:
    status = await settle(life, checker, "after the faults healed")
    for _ in range(2):  # approve what waits, retry what failed: what the user does next
        step = _user_step(life.desired, status, life.repo)
        if step is None:
            break
        # The user's next step is taken with Temporal and the API server up: another lane's
        # fault of the whole environment is not this lifecycle's (seed 3437: an approval
        # refused "cannot reach Temporal" was judged as the model not settling).
        trace.note(f"next step {step}: {await _quiet(life, life.apply(Op(step)))}")
        status = await settle(life, checker, f"after {step}")
    _judge_last_spec(life, checker, status)
    # One more GitOps commit: whatever came before (an undo, a rollback-to, a rejection), the
    # next spec change rolls out and is served.
    stable_tag = str((status.get("stableRevision") or {}).get("model", "")).rpartition(":")[2]
    tag = next(t for t in GOOD_TAGS if t != stable_tag and t != life.desired.tag)
    for op in (Op("gate", "on"), Op("promotion", "Automatic"), Op("tag", tag)):
        life.desired = life.desired.after(op)
    trace.note(f"final commit {life.desired}: {await _quiet(life, life.apply(Op('tag', tag)))}")
    status = await settle(life, checker, f"after the final commit to {tag}", tag)
    if _serving(status, life.repo) != tag and status.get("phase") in (
        Phase.ROLLED_BACK,
        Phase.FAILED,
    ):
        # The commit names a revision that failed before in the trace (an aborted undo to it,
        # say): the reference does not retry a failed revision by itself; the user retries.
        trace.note(f"after the final commit {_brief(status)}")
        trace.note(f"next step retry: {await life.apply(Op('retry'))}")
        status = await settle(life, checker, f"after the retry of {tag}", tag)
    if _serving(status, life.repo) != tag:
        checker.flag("the next spec change is served", f"{tag} asked: {_brief(status)}")
    else:
        now = await asyncio.to_thread(life.dm)
        argo = health(now) if now is not None else None
        if argo is None or argo.status != "Healthy":  # what GitOps shows of the commit served
            checker.flag("Argo CD shows Healthy once the spec serves", f"{argo}")
        found = kstatus().check(now) if now is not None else None
        if found is None or found.status != "Current":
            checker.flag("kstatus reads Current once the spec serves", f"{found}")
    await _nothing_left(life, checker, status)


def _serving(status: dict[str, Any], repo: str) -> str:
    return _tag_of(status.get("stableRevision"), repo)


def _tag_of(revision: dict[str, Any] | None, repo: str) -> str:
    model = str((revision or {}).get("model") or "")
    return model.rpartition(":")[2] if model.startswith(f"{repo}:") else ""


def _user_step(desired: Desired, status: dict[str, Any], repo: str) -> str | None:
    phase = status.get("phase")
    if phase == Phase.AWAITING_PROMOTION:
        return "approve" if desired.should_serve else "reject"
    # A failure shows as Stalled (with status.failedRevision) also when the phase says the
    # stable is Degraded (seed 001: the stable's health sets the phase): the user retries.
    stalled = any(
        c.get("type") == "Stalled" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    failed = phase in (Phase.ROLLED_BACK, Phase.FAILED) or stalled
    if failed and desired.should_serve and _serving(status, repo) != desired.tag:
        return "retry"
    return None


def _judge_last_spec(life: Lifecycle, checker: Checker, status: dict[str, Any]) -> None:
    serving = _serving(status, life.repo)
    if not life.desired.should_serve:
        if serving == BAD_TAG:
            # Judged by its promotion's signed record: a bad model asked while no gate held it
            # may serve (a gate judges candidates, not the stable: seeds 4425, 4445), one a gate
            # judged may not. Read from the records, not guessed from the operations (seed 7037:
            # a gated bad tag asked after an unfinished good one, the ungated bad still served).
            checker.bad_serving = (_brief(status), str(status["stableRevision"]["hash"]))
        return
    if serving == life.desired.tag:
        return
    # An undo or a rollback-to after the last spec change serves another revision on purpose,
    # and the DecisionModel says so (RollbackTo=True, issue 34).
    said = any(
        c["type"] == "RollbackTo" and c["status"] == "True" for c in status.get("conditions") or []
    )
    if not (life.undone_after_change and said):
        checker.flag("settles on its last spec", f"{life.desired.tag} asked: {_brief(status)}")


async def _nothing_left(life: Lifecycle, checker: Checker, status: dict[str, Any]) -> None:
    stable = str((status.get("stableRevision") or {}).get("hash") or "")
    deadline = time.monotonic() + LEFTOVER_SECONDS
    while True:
        left = await _quiet(life, asyncio.to_thread(checker.objects_left, stable))
        if not left or time.monotonic() > deadline:
            break
        await asyncio.sleep(3)
    if left:
        checker.flag("nothing left behind", ", ".join(left))
    obj = await asyncio.to_thread(life.dm)
    if obj is not None:
        await _quiet(life, asyncio.to_thread(checker.decision_records, obj))
    stranded = await _quiet(life, checker.unserved_pins())
    if stranded:
        checker.flag("no run pinned to a build no worker serves", "; ".join(stranded))
    if status.get("phase") != Phase.AWAITING_PROMOTION and await _quiet(
        life, checker.running_runs()
    ):
        checker.flag("no run left open", f"runs still open with phase {status.get('phase')}")


async def shrink(
    seq: Sequence,
    target: set[str],
    fails: Callable[[Sequence], Awaitable[Outcome]],
    budget: int,
) -> Sequence:
    """A shorter sequence that breaks one of the ``target`` invariants again: drop chunks, then
    single operations (delta debugging), at most ``budget`` runs."""
    best = seq
    chunk = max(1, len(seq.ops) // 2)
    while chunk >= 1 and budget > 0:
        i = 0
        while i < len(best.ops) and budget > 0:
            candidate = Sequence(best.seed, best.ops[:i] + best.ops[i + chunk :], best.note)
            budget -= 1
            outcome = await fails(candidate)
            if {v.invariant for v in outcome.violations} & target:
                best = candidate
            else:
                i += chunk
        chunk //= 2
    return best

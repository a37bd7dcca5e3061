"""The verbs that change or follow a rollout: ``wait``, ``abort``, ``retry``, ``undo`` and
``status --watch``. Each is what a user would otherwise do by hand with ``temporal workflow
signal`` or ``kubectl annotate``/``patch``, with the same effect."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from controller.cli.context import CliContext
from controller.cli.errors import CliError, ExitCode
from controller.cli.verbs import _dm_or_not_found, _running_rollouts, _status_text, _status_view
from controller.reconciler.guard_status import held_by_guard
from controller.temporal.rollouts import Rollouts
from decisionmodel.api import GROUP, PLURAL, VERSION
from decisionmodel.api.status import Condition
from decisionmodel.engine.render.labels import ANNOTATION_RETRY, ANNOTATION_ROLLBACK_TO
from decisionmodel.vocabulary import GUARD_REASONS, ConditionType, Phase, Reason, StatusKey
from kube.client import Kube
from workflows.retry_policies import STEP

POLL_SECONDS: Final = 1.0
# Phases in which nothing is rolling out: a rollout ended (or none was needed).
SETTLED: Final = {
    Phase.READY.value,
    Phase.ROLLED_BACK.value,
    Phase.FAILED.value,
    Phase.DEGRADED.value,
}
FAILED: Final = {Phase.ROLLED_BACK.value, Phase.FAILED.value}
# A phase in which the rollout waits for a person: `wait` returns rather than run out its time.
HELD: Final = {Phase.AWAITING_PROMOTION.value}
# A guard holds a step until a person fixes its cause (the step's condition names the fix).
# A registry that is away or erring is retried by itself: `wait` goes on for those.
PERSON_GUARDS: Final = GUARD_REASONS - {Reason.REGISTRY_UNAVAILABLE, Reason.REGISTRY_ERROR}
# How long a guard must hold before `wait` says so: longer than the step's retry interval, so a
# guard fixed just before (still shown until the step's next attempt clears it) is not one.
GUARD_HOLD_SECONDS: Final = (STEP.maximum_interval or timedelta(seconds=30)).total_seconds() + 5


def _settled(obj: dict[str, Any]) -> bool:
    st = obj.get("status") or {}
    seen = st.get(StatusKey.OBSERVED_GENERATION) == obj["metadata"].get("generation")
    return (
        seen
        and st.get("phase") in SETTLED
        and not st.get(StatusKey.CANDIDATE_REVISION)
        and not _rolling_back(obj)
    )


def _rolling_back(obj: dict[str, Any]) -> bool:
    """A rollback-to the previous revision asked for and not yet serving (an annotation does
    not change the generation, so observedGeneration cannot tell)."""
    st = obj.get("status") or {}
    wanted = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_ROLLBACK_TO)
    previous = (st.get(StatusKey.PREVIOUS_REVISION) or {}).get("hash")
    stable = (st.get(StatusKey.STABLE_REVISION) or {}).get("hash")
    failed = (st.get(StatusKey.FAILED_REVISION) or {}).get("hash")
    return bool(wanted) and wanted == previous and wanted not in (stable, failed)


async def wait(ctx: CliContext) -> int:
    """Block until the DecisionModel's current rollout ends or waits for a person: 0 promoted
    (Ready), 1 rolled back or failed (the reason on stderr), 7 Degraded, 8 held for a manual
    approval, 9 held by a guard until its cause is fixed (the reason and fix on stderr), 6 at
    ``--timeout``. Settled means: the controller saw the latest spec, no rollout
    runs, no candidate, a final phase; twice in a row, a poll apart (the controller starts a
    rollout and writes status in separate steps)."""
    args = ctx.args
    namespace = ctx.namespace()
    kube = ctx.kube()
    deadline = time.monotonic() + args.timeout
    client, temporal = await ctx.temporal()
    rollouts = Rollouts(client, temporal.task_queue, temporal.ui_url)
    settled_once, held_once, shown = False, False, ""
    guarded = GuardWatch()
    while time.monotonic() < deadline:
        obj = await Kube.run(_dm_or_not_found, kube, namespace, args.name)
        running = await rollouts.running(namespace, args.name)
        shown = _say_progress(obj, running, shown)
        # Held twice in a row, as the rollout itself says (an abort or an approval just sent
        # has had a poll's time to land): a person must act, so waiting longer is pointless.
        held = bool(running) and _held(obj) and await _awaits_approval(rollouts, running)
        if held and held_once:
            _held_verdict(obj)
        held_once = held
        guarded.see(obj, bool(running))
        if running or not _settled(obj):
            settled_once = False
        elif settled_once:
            return _verdict(obj)
        else:
            settled_once = True
        await asyncio.sleep(POLL_SECONDS)
    raise CliError(
        ExitCode.TIMED_OUT,
        f"{namespace}/{args.name} still rolling out after {args.timeout:.0f} s "
        f"(`dmrollout status {args.name} -n {namespace}` shows where)",
    )


@dataclass
class GuardWatch:
    """A guard holding the latest generation's rollout, seen by ``wait`` for longer than the
    step's retry interval: only its cause's fix moves the rollout on (issue 34)."""

    since: float | None = None

    def see(self, obj: dict[str, Any], running: bool) -> None:
        held = _guard_hold(obj) if running else None
        if held is None:
            self.since = None
            return
        now = time.monotonic()
        self.since = now if self.since is None else self.since
        if now - self.since >= GUARD_HOLD_SECONDS:
            _guard_verdict(obj, held)


def _guard_hold(obj: dict[str, Any]) -> Condition | None:
    """The step condition a person's guard holds for the DecisionModel's generation."""
    conditions: list[Condition] = []
    for raw in (obj.get("status") or {}).get("conditions") or []:
        try:
            conditions.append(Condition.model_validate(raw))
        except ValueError:
            continue
    held = held_by_guard(conditions, int(obj["metadata"].get("generation") or 0))
    return held if held is not None and held.reason in PERSON_GUARDS else None


def _guard_verdict(obj: dict[str, Any], held: Condition) -> None:
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    phase = (obj.get("status") or {}).get("phase") or Phase.PENDING.value
    raise CliError(
        ExitCode.BLOCKED,
        f"{ns}/{name} {phase}, held by a guard: {held.type}=False {held.reason}: {held.message} "
        f"(the rollout goes on by itself once that is fixed; `dmrollout abort {name} -n {ns}` "
        "gives it up)",
    )


def _say_progress(obj: dict[str, Any], running: list[Any], shown: str) -> str:
    phase = (obj.get("status") or {}).get("phase") or Phase.PENDING.value
    line = f"{phase}" + (f" ({running[0].workflow_id})" if running else "")
    if line != shown:
        print(f"{datetime.now(UTC):%H:%M:%S} {line}", file=sys.stderr)
    return line


async def _awaits_approval(rollouts: Rollouts, running: list[Any]) -> bool:
    progress = await rollouts.progress(running[0].workflow_id)
    return progress is not None and progress.expected_approval is not None


def _held(obj: dict[str, Any]) -> bool:
    return ((obj.get("status") or {}).get("phase")) in HELD


def _held_verdict(obj: dict[str, Any]) -> None:
    st = obj.get("status") or {}
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    candidate = (st.get(StatusKey.CANDIDATE_REVISION) or {}).get("hash", "?")
    raise CliError(
        ExitCode.HELD,
        f"{ns}/{name} AwaitingPromotion: candidate {candidate} waits for an approval "
        f"(`dmrollout promote {name} -n {ns}`; held on inconclusive evidence also "
        f"`dmrollout reject {name} -n {ns}`; or `dmrollout abort {name} -n {ns}`)",
    )


def _verdict(obj: dict[str, Any]) -> int:
    st = obj.get("status") or {}
    name = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    if st.get("phase") == Phase.DEGRADED.value:
        conditions: list[dict[str, Any]] = st.get("conditions") or []
        degraded = next((c for c in conditions if c.get("type") == ConditionType.DEGRADED), {})
        raise CliError(
            ExitCode.DEGRADED,
            f"{name} Degraded: {degraded.get('reason', '?')}: {degraded.get('message', '')}",
        )
    if st.get("phase") in FAILED:
        failed = st.get(StatusKey.FAILED_REVISION) or {}
        raise CliError(
            ExitCode.FAILED,
            f"{name} {st['phase']}: revision {failed.get('hash', '?')} "
            f"{failed.get('reason', '')}: {failed.get('message', '')}",
        )
    stable = (st.get(StatusKey.STABLE_REVISION) or {}).get("hash")
    print(f"{name} Ready: revision {stable} serves")
    return ExitCode.OK


async def abort(ctx: CliContext) -> int:
    args = ctx.args
    namespace = ctx.namespace()
    client, temporal = await ctx.temporal()
    rollouts = Rollouts(client, temporal.task_queue)
    running = await rollouts.running(namespace, args.name)
    if not running:
        raise CliError(ExitCode.NOT_FOUND, f"no rollout of {namespace}/{args.name} is running")
    for r in running:
        await rollouts.abort(r.workflow_id, args.reason)
        print(f"abort sent to {r.workflow_id} ({args.reason}); `dmrollout wait` follows it")
    return ExitCode.OK


async def retry(ctx: CliContext) -> int:
    """A fresh retry token: the controller starts the failed revision again."""
    args = ctx.args
    namespace = ctx.namespace()
    kube = ctx.kube()
    obj = await Kube.run(_dm_or_not_found, kube, namespace, args.name)
    failed = (obj.get("status") or {}).get(StatusKey.FAILED_REVISION)
    if not failed:
        raise CliError(ExitCode.FAILED, f"{namespace}/{args.name} has no failed revision to retry")
    token = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    patch = {"metadata": {"annotations": {ANNOTATION_RETRY: token}}}
    await Kube.run(_patch_dm, kube, namespace, args.name, patch)
    print(f"retry {token} of revision {failed.get('hash')} requested for {namespace}/{args.name}")
    return ExitCode.OK


async def undo(ctx: CliContext) -> int:
    """Roll back to the previous revision with ``decisionmodel.io/rollback-to`` (seed 002): a
    new rollout of its whole recorded identity (model, digest, device, resources, image,
    placement), through every gate as any rollout. The spec is not touched: GitOps keeps
    owning it. The revision then serves in place of the spec (status.rollbackTo, condition
    RollbackTo) until the next spec change, which rolls the spec out (issue 34)."""
    args = ctx.args
    namespace = ctx.namespace()
    kube = ctx.kube()
    obj = await Kube.run(_dm_or_not_found, kube, namespace, args.name)
    previous = (obj.get("status") or {}).get(StatusKey.PREVIOUS_REVISION)
    if not previous or not previous.get("digest") or not previous.get("model"):
        raise CliError(
            ExitCode.FAILED,
            f"{namespace}/{args.name} records no previous revision to go back to",
        )
    patch = {"metadata": {"annotations": {ANNOTATION_ROLLBACK_TO: previous["hash"]}}}
    await Kube.run(_patch_dm, kube, namespace, args.name, patch)
    print(
        f"{namespace}/{args.name}: rolling back to revision {previous['hash']} "
        f"({previous['model']}@sha256:{previous['digest'][:12]}…) with {ANNOTATION_ROLLBACK_TO}; "
        f"`dmrollout wait {args.name} -n {namespace}` follows the rollout. Once it serves, the "
        f"controller removes the annotation and the revision serves in place of the spec "
        f"(status.rollbackTo) until the next spec change, which rolls the spec out"
    )
    return ExitCode.OK


def _patch_dm(kube: Kube, namespace: str, name: str, patch: dict[str, Any]) -> None:
    kube.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, patch)


async def watch_status(ctx: CliContext) -> int:
    """``status --watch``: the view again every second, with the step's elapsed time and the
    evaluation's k/N, until the rollout settles (or Ctrl-C)."""
    args = ctx.args
    namespace = ctx.namespace()
    kube = ctx.kube()
    client, temporal = await ctx.temporal()
    rollouts = Rollouts(client, temporal.task_queue, temporal.ui_url)
    step_since: dict[str, float] = {}
    settled_once = False
    while True:
        obj = await Kube.run(_dm_or_not_found, kube, namespace, args.name)
        view = _status_view(namespace, obj)
        view["rollouts"] = await _running_rollouts(ctx, namespace, args.name)
        lines = [_status_text(view), *await _progress_lines(rollouts, view, step_since)]
        sys.stdout.write("\x1b[H\x1b[2J" if sys.stdout.isatty() else "\n")
        sys.stdout.write(f"{datetime.now(UTC):%H:%M:%S} (every {POLL_SECONDS:.0f} s)\n")
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        settled = not view["rollouts"] and _settled(obj)
        if settled and settled_once and not args.forever:
            return ExitCode.FAILED if view["phase"] in FAILED else ExitCode.OK
        settled_once = settled
        await asyncio.sleep(POLL_SECONDS)


async def _progress_lines(
    rollouts: Rollouts, view: dict[str, Any], step_since: dict[str, float]
) -> list[str]:
    lines = []
    for r in view["rollouts"] or []:
        progress = await rollouts.progress(r["workflowId"])
        if progress is None:
            continue
        key = f"{r['workflowId']}:{progress.step}"
        started = step_since.setdefault(key, time.monotonic())
        line = f"  step       {progress.step} ({time.monotonic() - started:.0f} s)"
        live = await rollouts.evaluation_live(r["workflowId"])
        if live is not None:  # the step's own count, as it goes (issue 22)
            line += f", evaluation {live[0]}/{live[1]} cases"
        elif progress.cases_done:
            line += f", evaluation done on {progress.cases_done} cases"
        lines.append(line)
        if progress.cleanup is not None:
            lines.append(f"  cleanup    {json.dumps(progress.cleanup.model_dump(mode='json'))}")
    return lines

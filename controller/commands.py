"""The user-facing CLI verbs: ``status``, ``promote``, ``history``, and ``controller``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from controller.payload_codec import PayloadKeysInvalid
from controller.rollouts import Rollouts, dm_query
from controller.settings import ControllerSettings
from controller.temporal_client import NamespaceNotReady, TemporalSettings, connect
from decisionmodel.contracts import Phase
from decisionmodel.settings import RolloutSettings
from kube.client import Kube
from workflows import search_attributes as sa


def _dm(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    from controller.reconcile import get_dm_raw

    return get_dm_raw(kube, namespace, name)


def _rev(label: str, rev: dict[str, Any] | None) -> str:
    if not rev:
        return f"  {label:<10} -"
    extra = f"  reason {rev['reason']}: {rev.get('message', '')}" if rev.get("reason") else ""
    digest = (rev.get("digest") or "")[:12]
    return f"  {label:<10} {rev['hash']}  {rev.get('model', '')}  digest {digest}{extra}"


async def status(args: argparse.Namespace) -> int:
    temporal = TemporalSettings()
    settings = RolloutSettings()
    if args.kubeconfig:
        settings = settings.model_copy(update={"kubeconfig": args.kubeconfig})
    kube = Kube.from_settings(settings)
    obj = await Kube.run(_dm, kube, args.namespace, args.name)
    if obj is None:
        print(f"DecisionModel {args.namespace}/{args.name} not found", file=sys.stderr)
        return 1
    st = obj.get("status") or {}
    replicas = st.get("replicas") or {}
    spec = obj["spec"]
    print(f"{args.namespace}/{args.name}: {spec['model']} on {spec.get('device', 'cpu')}")
    print(f"  phase      {st.get('phase', '-')} (since {st.get('phaseTransitionTime', '-')})")
    print(f"  ready      {replicas.get('modelReady', 0)}/{replicas.get('desired', '-')}")
    print(_rev("stable", st.get("stableRevision")))
    print(_rev("candidate", st.get("candidateRevision")))
    print(_rev("failed", st.get("failedRevision")))
    ev = st.get("evaluation")
    if ev:
        print(
            f"  evaluation {ev.get('result', '-')}: accuracy {ev.get('accuracy')} "
            f"(baseline {ev.get('baselineAccuracy', '-')}), ECE {ev.get('ece')}, "
            f"{ev.get('cases')} cases"
        )
    for c in st.get("conditions") or []:
        print(f"  {c['type']:<10} {c['status']:<5} {c.get('reason', '')}: {c.get('message', '')}")
    client = await connect(temporal)
    rollouts = Rollouts(client, temporal.task_queue, temporal.ui_url)
    running = await rollouts.running(args.namespace, args.name)
    for r in running:
        progress = await rollouts.progress(r.workflow_id)
        step = f" — {progress.phase.value}: {progress.step}" if progress else ""
        print(f"  rollout    {r.workflow_id}{step}")
        if progress and progress.expected_approval:
            print(f"  approval   dmrollout promote {args.name} -n {args.namespace}")
        print(f"  UI         {rollouts.ui_link(r.workflow_id, temporal.namespace)}")
    if not running:
        print("  rollout    none running")
    return 0


async def promote(args: argparse.Namespace) -> int:
    temporal = TemporalSettings()
    client = await connect(temporal)
    rollouts = Rollouts(client, temporal.task_queue, temporal.ui_url)
    running = await rollouts.running(args.namespace, args.name)
    if not running:
        print(f"no rollout of {args.namespace}/{args.name} is running", file=sys.stderr)
        return 1
    for r in running:
        progress = await rollouts.progress(r.workflow_id)
        if progress is None or progress.phase != Phase.AWAITING_PROMOTION:
            phase = progress.phase.value if progress else "unknown"
            print(f"{r.workflow_id} is not awaiting promotion (phase {phase})", file=sys.stderr)
            return 1
        approval = args.approval or progress.expected_approval or ""
        refusal = await rollouts.approve(r.workflow_id, approval)
        if refusal:
            print(f"refused: {refusal}", file=sys.stderr)
            return 1
        print(f"approved {approval} for {args.namespace}/{args.name} ({r.workflow_id})")
    return 0


async def history(args: argparse.Namespace) -> int:
    temporal = TemporalSettings()
    client = await connect(temporal)
    rows = []
    async for wf in client.list_workflows(dm_query(args.namespace, args.name)):
        attrs = wf.typed_search_attributes
        duration = "-"
        if wf.close_time and wf.start_time:
            duration = f"{(wf.close_time - wf.start_time).total_seconds():.0f}s"
        rows.append(
            (
                wf.start_time.isoformat(timespec="seconds") if wf.start_time else "-",
                attrs.get(sa.DM_REVISION) or "-",
                attrs.get(sa.DM_MODEL) or "-",
                attrs.get(sa.DM_RESULT) or (wf.status.name.title() if wf.status else "-"),
                duration,
                wf.id,
            )
        )
    print(f"{'STARTED':<26}{'REVISION':<18}{'MODEL':<28}{'RESULT':<12}{'DURATION':<10}WORKFLOW")
    for row in sorted(rows):
        print(f"{row[0]:<26}{row[1]:<18}{row[2]:<28}{row[3]:<12}{row[4]:<10}{row[5]}")
    return 0


def rollout_settings(args: argparse.Namespace) -> RolloutSettings:
    """RolloutSettings from the environment, overridden by the reference operator's flags.

    The guards are enforced by the worker's activities (resolve, render); the controller uses the
    same settings to render the stable's objects when it restores them. Give both the same."""
    overrides: dict[str, Any] = {}
    if args.allowed_registries is not None:
        overrides["allowed_registries"] = [r for r in args.allowed_registries.split(",") if r]
    if args.allow_insecure_registries:
        overrides["allow_insecure_registries"] = True
    if args.allow_image_override:
        overrides["allow_image_override"] = True
    if args.ollaya_registry:
        overrides["ollaya_registry"] = args.ollaya_registry
    if args.ollaya_hf_endpoint:
        overrides["ollaya_hf_endpoint"] = args.ollaya_hf_endpoint
    return RolloutSettings(**overrides)


def add_guard_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allowed-registries", default=None, help="comma-separated hosts")
    p.add_argument("--allow-insecure-registries", action="store_true")
    p.add_argument("--allow-image-override", action="store_true")
    p.add_argument("--ollaya-registry", default=None)
    p.add_argument(
        "--ollaya-hf-endpoint", default=None, help="base URL for weight downloads (a HF mirror)"
    )


def controller_settings(args: argparse.Namespace) -> ControllerSettings:
    """ControllerSettings from the environment, overridden by the controller's flags."""
    overrides: dict[str, Any] = {}
    if args.watch_namespaces is not None:
        overrides["watch_namespaces"] = [n for n in args.watch_namespaces.split(",") if n]
    if args.max_concurrent_rollouts is not None:
        overrides["max_concurrent_rollouts"] = args.max_concurrent_rollouts
    if args.max_concurrent_reconciles is not None:
        overrides["workers"] = args.max_concurrent_reconciles
    if args.runtime_version_policy is not None:
        overrides["runtime_version_policy"] = args.runtime_version_policy
    if args.health_port is not None:
        overrides["health_port"] = args.health_port
    if args.leader_elect is not None:
        overrides["leader_election"] = args.leader_elect == "true"
    return ControllerSettings(**overrides)


def controller(args: argparse.Namespace) -> int:
    from controller.manager import Manager

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = controller_settings(args)
    rollout = rollout_settings(args)
    try:
        return asyncio.run(Manager(settings, rollout, TemporalSettings()).run())
    except (NamespaceNotReady, PayloadKeysInvalid) as e:
        print(f"dmrollout controller: {e}", file=sys.stderr)
        return 3


def add_commands(sub: Any) -> None:
    def dm_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("name", help="the DecisionModel")
        p.add_argument("-n", "--namespace", default="default")

    st = sub.add_parser("status", help="phase, revisions, the running rollout and its UI link")
    dm_args(st)
    st.add_argument("--kubeconfig", default=None)
    st.set_defaults(func=lambda a: asyncio.run(status(a)))

    pr = sub.add_parser("promote", help="approve the candidate awaiting promotion (bound approval)")
    dm_args(pr)
    pr.add_argument("--approval", default=None, help="default: the one the rollout expects")
    pr.set_defaults(func=lambda a: asyncio.run(promote(a)))

    hi = sub.add_parser("history", help="past rollouts from Temporal visibility")
    dm_args(hi)
    hi.set_defaults(func=lambda a: asyncio.run(history(a)))

    co = sub.add_parser("controller", help="run the controller (watches, dispatch, steady state)")
    co.add_argument("--watch-namespaces", default=None, help="comma-separated; empty = all")
    co.add_argument("--max-concurrent-rollouts", type=int, default=None)
    co.add_argument(
        "--max-concurrent-reconciles", type=int, default=None, help="DecisionModels at once"
    )
    co.add_argument("--runtime-version-policy", choices=["Pinned", "FollowOperator"], default=None)
    add_guard_flags(co)
    co.add_argument("--health-port", type=int, default=None)
    co.add_argument("--leader-elect", choices=["true", "false"], default=None)
    co.set_defaults(func=controller)
